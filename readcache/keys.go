// Package readcache is the api's in-process cache of hot reads (screener
// snapshots, candle series, analytics bodies) and the typed names both
// sides use: the worker announces a Scope after a write, the api caches
// values under Keys that belong to exactly one Scope, and dropping a Scope
// drops every Key built in it. Writers and readers build both with the
// constructors below, so an invalidation cannot miss a key by a spelling.
//
// A load shared by concurrent requests (one per key at a time) runs on a
// context no single request can cancel: a client that disconnects gives up
// its own wait, never the other waiters' answer.
package readcache

import (
	"errors"
	"strconv"
	"strings"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// kind is what a Scope covers.
type kind uint8

const (
	kindTickers kind = iota + 1
	kindCandles
	kindAnalytics
	kindTopSetups
)

var kindNames = map[kind]string{kindTickers: "tickers", kindCandles: "candles", kindAnalytics: "analytics", kindTopSetups: "top-setups"}

// Scope is the unit of invalidation: what one kind of write makes stale.
type Scope struct {
	kind       kind
	market     domain.Market
	exchange   string
	instrument string
}

// Tickers is the screener data of one combination (a tickers ingest).
func Tickers(c domain.Combination) Scope {
	return Scope{kind: kindTickers, market: c.Market, exchange: c.Exchange, instrument: c.Instrument}
}

// Candles is every candle series of one exchange of a market (a candles ingest).
func Candles(m domain.Market, exchange string) Scope {
	return Scope{kind: kindCandles, market: m, exchange: exchange}
}

// Analytics is a market's reports, lists and statistics (a scoring run or
// a statistics job).
func Analytics(m domain.Market) Scope { return Scope{kind: kindAnalytics, market: m} }

// TopSetups is the cross-market top-setups lists (any scoring run).
func TopSetups() Scope { return Scope{kind: kindTopSetups} }

// String is the wire form of the scope (on the invalidation bus):
// "tickers:crypto/binance/spot", "candles:crypto/binance",
// "analytics:crypto", "top-setups".
func (s Scope) String() string {
	name := kindNames[s.kind]
	switch s.kind {
	case kindTickers:
		return name + ":" + string(s.market) + "/" + s.exchange + "/" + s.instrument
	case kindCandles:
		return name + ":" + string(s.market) + "/" + s.exchange
	case kindAnalytics:
		return name + ":" + string(s.market)
	}
	return name
}

// ParseScope reads the wire form written by String.
func ParseScope(text string) (Scope, error) {
	name, rest, _ := strings.Cut(text, ":")
	parts := strings.Split(rest, "/")
	bad := errors.New("readcache: malformed scope " + strconv.Quote(text))
	switch name {
	case "tickers":
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return Scope{}, bad
		}
		return Tickers(domain.Combination{Market: domain.Market(parts[0]), Exchange: parts[1], Instrument: parts[2]}), nil
	case "candles":
		if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			return Scope{}, bad
		}
		return Candles(domain.Market(parts[0]), parts[1]), nil
	case "analytics":
		if len(parts) != 1 || parts[0] == "" {
			return Scope{}, bad
		}
		return Analytics(domain.Market(parts[0])), nil
	case "top-setups":
		if rest != "" {
			return Scope{}, bad
		}
		return TopSetups(), nil
	}
	return Scope{}, bad
}

// what is the kind of value a Key names inside its scope.
type what uint8

const (
	whatTickerSnapshot what = iota + 1
	whatCandleSeries
	whatCandleBody
	whatCandleSymbols
	whatAnalyticsList
	whatAnalyticsListBody
	whatAnalyticsReport
	whatMarketStats
	whatTopSetups
	whatStatsBody
	whatFactorStatsBody
	whatHistoryBody
)

// Key names one cached value. It is comparable and built without
// allocating, so a cache hit costs two map lookups.
type Key struct {
	Scope Scope
	item  item
}

type item struct {
	what    what
	a, b, c string
	n       int
}

// TickerSnapshot is the screener rows of a combination.
func TickerSnapshot(c domain.Combination) Key {
	return Key{Scope: Tickers(c), item: item{what: whatTickerSnapshot}}
}

// CandleSeries is the stored candles of one symbol and timeframe.
func CandleSeries(m domain.Market, exchange, symbol string, tf domain.Timeframe) Key {
	return Key{Scope: Candles(m, exchange), item: item{what: whatCandleSeries, a: symbol, b: string(tf)}}
}

// CandleBody is the encoded response of a candle series cut to limit.
func CandleBody(m domain.Market, exchange, symbol string, tf domain.Timeframe, limit int) Key {
	return Key{Scope: Candles(m, exchange), item: item{what: whatCandleBody, a: symbol, b: string(tf), n: limit}}
}

// CandleSymbols is the symbols with candles of a timeframe on an exchange.
func CandleSymbols(m domain.Market, exchange string, tf domain.Timeframe) Key {
	return Key{Scope: Candles(m, exchange), item: item{what: whatCandleSymbols, b: string(tf)}}
}

// AnalyticsList is the stored analytics records of a market and style.
func AnalyticsList(m domain.Market, st analytics.Style) Key {
	return Key{Scope: Analytics(m), item: item{what: whatAnalyticsList, b: string(st)}}
}

// AnalyticsListBody is the encoded list response of a market and style.
func AnalyticsListBody(m domain.Market, st analytics.Style) Key {
	return Key{Scope: Analytics(m), item: item{what: whatAnalyticsListBody, b: string(st)}}
}

// AnalyticsReport is the encoded report of one asset in one language.
func AnalyticsReport(m domain.Market, st analytics.Style, symbol string, lang analytics.Lang) Key {
	return Key{Scope: Analytics(m), item: item{what: whatAnalyticsReport, a: symbol, b: string(st), c: string(lang)}}
}

// MarketStats is a market's verdict and factor statistics.
func MarketStats(m domain.Market) Key {
	return Key{Scope: Analytics(m), item: item{what: whatMarketStats}}
}

// TopSetupsBody is an encoded top-setups response: markets is the
// comma-separated market list, verdict the filter ("" for any).
func TopSetupsBody(markets, verdict string, limit int) Key {
	return Key{Scope: TopSetups(), item: item{what: whatTopSetups, a: markets, b: verdict, n: limit}}
}

// StatsBody is the encoded verdict statistics of a market.
func StatsBody(m domain.Market) Key {
	return Key{Scope: Analytics(m), item: item{what: whatStatsBody}}
}

// FactorStatsBody is the encoded factor statistics of a market for one
// horizon (0 for every horizon).
func FactorStatsBody(m domain.Market, horizonDays int) Key {
	return Key{Scope: Analytics(m), item: item{what: whatFactorStatsBody, n: horizonDays}}
}

// HistoryBody is the encoded score history of one asset cut to limit.
func HistoryBody(m domain.Market, st analytics.Style, symbol string, limit int) Key {
	return Key{Scope: Analytics(m), item: item{what: whatHistoryBody, a: symbol, b: string(st), n: limit}}
}
