package screen

import (
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// Asset is what an expression reads about one asset: its identity, its
// screener row and its analytics result in each style it was scored in.
// It is read-only once built and safe to share between goroutines.
type Asset struct {
	Market                       domain.Market
	Symbol, Exchange, Instrument string
	// Row is the asset's screener row (price, change_pct, volume); nil
	// makes those null.
	Row *domain.Ticker
	// reports are the results by style, in analytics.Styles order; nil
	// for a style the asset was not scored in.
	reports [4]*analytics.Result
	// tabs are the reports' factor tables (Index); nil: a factor is
	// found by a scan of the report's factors.
	tabs [4]*factorTable
}

// Index builds the factor tables of a's reports that have none, so that
// reading a factor costs no scan: worth it for an asset that many
// expressions read (a snapshot's), not for one read by a few. Call it
// before a is shared.
func (a *Asset) Index() {
	for i, r := range a.reports {
		if r != nil && a.tabs[i] == nil {
			a.tabs[i] = newFactorTable(r)
		}
	}
}

// NewAsset builds an asset from the screener row (domain.Ticker as the
// worker ingests it and store.DB.Tickers reads it; nil when there is
// none) and the analytics results by style (store.AnalyticsRecord.Result,
// as store.DB.AnalyticsReport reads it or the worker's scoring makes it;
// the key "" stands for analytics.DefaultStyle). Set Exchange and
// Instrument on the result when known (store.AnalyticsRecord's).
func NewAsset(market string, symbol string, row *domain.Ticker, reports map[analytics.Style]*analytics.Result) *Asset {
	a := &Asset{Market: domain.Market(market), Symbol: symbol, Row: row}
	for st, r := range reports {
		a.SetReport(st, r)
	}
	return a
}

// SetReport sets the result of style st ("" for analytics.DefaultStyle);
// nil removes it. An unknown style is ignored.
func (a *Asset) SetReport(st analytics.Style, r *analytics.Result) {
	if st == "" {
		st = analytics.DefaultStyle
	}
	for i, s := range analytics.Styles {
		if s == st {
			a.reports[i], a.tabs[i] = r, nil
		}
	}
}

// Report is the result of style st ("" for analytics.DefaultStyle), nil
// when the asset was not scored in it.
func (a *Asset) Report(st analytics.Style) *analytics.Result {
	if st == "" {
		st = analytics.DefaultStyle
	}
	for i, s := range analytics.Styles {
		if s == st {
			return a.reports[i]
		}
	}
	return nil
}
