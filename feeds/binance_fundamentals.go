package feeds

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// premiumIndexTTL is how long one /fapi/v1/premiumIndex download (the
// funding rate of every perpetual, weight 10) serves per-symbol calls.
const premiumIndexTTL = time.Minute

// binanceFunding caches the funding rates of every USDT-M perpetual.
type binanceFunding struct {
	mu      sync.Mutex
	fetched time.Time
	rates   map[string]float64 // exchange symbol (BTCUSDT) → fraction per 8 h
}

// binancePremiumIndex is one row of /fapi/v1/premiumIndex.
type binancePremiumIndex struct {
	Symbol          string  `json:"symbol"`
	LastFundingRate *string `json:"lastFundingRate"`
}

// binanceOpenInterest is one row of /futures/data/openInterestHist.
type binanceOpenInterest struct {
	SumOpenInterest *string `json:"sumOpenInterest"`
	Timestamp       int64   `json:"timestamp"`
}

// Fundamentals implements FundamentalsProvider for crypto from the USDT-M
// perpetual of the same pair: the last funding rate (one download for all
// symbols, cached a minute) and the 24 h change of open interest (daily
// open-interest history, one call per symbol). An asset without a
// perpetual has no inputs (ENOTFOUND); liquidity needs a market cap, which
// Binance does not publish, so volume_to_market_cap is absent.
func (b *binance) Fundamentals(ctx context.Context, m domain.Market, symbol string) (FundamentalInputs, error) {
	if m != domain.Crypto {
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: binance: no fundamentals for %s", m)
	}
	perp, err := b.symbols(ctx, domain.Combination{Market: domain.Crypto, Exchange: NameBinance, Instrument: "perpetual"})
	if err != nil {
		return nil, err
	}
	exch, ok := perp.fromCanon[symbol]
	if !ok {
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: binance: %s has no USDT-M perpetual", symbol)
	}
	rates, err := b.fundingRates(ctx)
	if err != nil {
		return nil, err
	}
	out := FundamentalInputs{}
	if r, ok := rates[exch]; ok {
		out[FundamentalFundingRate] = r * 100
	}
	var hist []binanceOpenInterest
	q := url.Values{"symbol": {exch}, "period": {"1d"}, "limit": {"2"}}
	if err := b.futures.getJSON(ctx, "/futures/data/openInterestHist", q, &hist); err != nil {
		return nil, err
	}
	if chg, err := openInterestChange(hist); err != nil {
		b.log.Warn("feeds: dropping bad open-interest history", "symbol", exch, "err", err)
	} else {
		out[FundamentalOpenInterestChg] = chg
	}
	if len(out) == 0 {
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: binance: no fundamentals for %s", symbol)
	}
	return out, nil
}

// fundingRates returns the cached funding rates, downloading them when
// older than premiumIndexTTL. Rows with a missing or non-finite rate are
// logged and left out.
func (b *binance) fundingRates(ctx context.Context) (map[string]float64, error) {
	b.funding.mu.Lock()
	defer b.funding.mu.Unlock()
	if b.funding.rates != nil && b.now().Sub(b.funding.fetched) < premiumIndexTTL {
		return b.funding.rates, nil
	}
	var rows []binancePremiumIndex
	if err := b.futures.getJSON(ctx, "/fapi/v1/premiumIndex", nil, &rows); err != nil {
		return nil, err
	}
	rates := make(map[string]float64, len(rows))
	for _, r := range rows {
		var v float64
		if err := parseDecimalFields(decimalField{"lastFundingRate", r.LastFundingRate, &v}); err != nil {
			b.log.Warn("feeds: dropping bad funding row", "symbol", r.Symbol, "err", err)
			continue
		}
		rates[r.Symbol] = v
	}
	b.funding.rates, b.funding.fetched = rates, b.now()
	return rates, nil
}

// openInterestChange is the percent change between the two newest points
// of an open-interest history (oldest first, as Binance returns it).
func openInterestChange(hist []binanceOpenInterest) (float64, error) {
	if len(hist) < 2 {
		return 0, fmt.Errorf("%d points, need 2: %w", len(hist), errBadField)
	}
	var prev, last float64
	a, b := hist[len(hist)-2], hist[len(hist)-1]
	if err := parseDecimalFields(decimalField{"sumOpenInterest", a.SumOpenInterest, &prev},
		decimalField{"sumOpenInterest", b.SumOpenInterest, &last}); err != nil {
		return 0, err
	}
	if prev <= 0 || last < 0 || b.Timestamp <= a.Timestamp {
		return 0, fmt.Errorf("open interest %v → %v at %d → %d: %w", prev, last, a.Timestamp, b.Timestamp, errBadField)
	}
	return (last/prev - 1) * 100, nil
}
