package feeds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

const (
	// premiumIndexTTL is how long one /fapi/v1/premiumIndex download (the
	// funding rate of every perpetual, weight 10) serves per-symbol calls.
	premiumIndexTTL = time.Minute
	// fundingInfoTTL is how long /fapi/v1/fundingInfo (the symbols whose
	// funding interval or cap differs from the default) is kept: Binance
	// changes an interval rarely and announces it.
	fundingInfoTTL = time.Hour
	// binanceDefaultFundingHours is the funding interval of a symbol
	// fundingInfo does not list.
	binanceDefaultFundingHours = 8
)

// binanceFunding caches the funding rates and intervals of every USDT-M
// perpetual, and the perpetual of each spot pair.
type binanceFunding struct {
	mu          sync.Mutex
	fetched     time.Time
	rates       map[string]float64 // exchange symbol (BTCUSDT) → fraction per 8 h
	infoFetched time.Time
	hours       map[string]int // exchange symbol → funding interval; absent = 8

	perpsOf *symbolMap               // the perpetual listing perps was built from
	perps   map[string]binancePerpOf // canonical spot pair (PEPE_USDT) → its perpetual
}

// binancePerpOf is the perpetual of a spot pair: its exchange symbol and
// how many units of the asset one contract unit is (1000 for 1000PEPEUSDT).
type binancePerpOf struct {
	symbol     string
	multiplier float64
}

// binancePremiumIndex is one row of /fapi/v1/premiumIndex.
type binancePremiumIndex struct {
	Symbol          string  `json:"symbol"`
	LastFundingRate *string `json:"lastFundingRate"`
}

// binanceFundingInfo is one row of /fapi/v1/fundingInfo.
type binanceFundingInfo struct {
	Symbol               string `json:"symbol"`
	FundingIntervalHours int    `json:"fundingIntervalHours"`
}

// binanceOpenInterest is one row of /futures/data/openInterestHist. The
// documented example gives timestamp as a string, the live API as a
// number: both are read.
type binanceOpenInterest struct {
	SumOpenInterest      *string         `json:"sumOpenInterest"`
	SumOpenInterestValue *string         `json:"sumOpenInterestValue"`
	CMCCirculatingSupply *string         `json:"CMCCirculatingSupply"`
	Timestamp            json.RawMessage `json:"timestamp"`
}

// Fundamentals implements FundamentalsProvider for crypto from the USDT-M
// perpetual of the same asset (1000PEPEUSDT for PEPE_USDT): the last
// funding rate per 8 h (one download for all symbols, cached a minute,
// scaled from the symbol's own funding interval), the 24 h change of open
// interest and, where Binance publishes the circulating supply, the market
// cap (both from the daily open-interest history, one call per symbol).
// Each input fails alone: a failed open-interest call keeps the funding
// rate. An asset without a perpetual has no inputs (ENOTFOUND).
func (b *binance) Fundamentals(ctx context.Context, m domain.Market, symbol string) (FundamentalInputs, error) {
	if m != domain.Crypto {
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: binance: no fundamentals for %s", m)
	}
	perp, err := b.symbols(ctx, domain.Combination{Market: domain.Crypto, Exchange: NameBinance, Instrument: "perpetual"})
	if err != nil {
		return nil, err
	}
	of, ok := b.perpetualOf(perp, symbol)
	if !ok {
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: binance: %s has no USDT-M perpetual", symbol)
	}
	out := FundamentalInputs{}
	var errs []error
	if rate, ok, err := b.fundingRate(ctx, of.symbol); err != nil {
		errs = append(errs, err)
	} else if ok {
		out[FundamentalFundingRate] = rate * 100
	}
	if err := b.openInterest(ctx, of, out); err != nil {
		errs = append(errs, err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, err := range errs {
		b.log.Warn("feeds: fundamentals input unavailable", "symbol", of.symbol, "err", err)
	}
	if len(out) == 0 {
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: binance: no fundamentals for %s", symbol)
	}
	return out, nil
}

// binanceMultiplierRE matches the base asset of a perpetual quoted in
// blocks of units: 1000PEPE, 1000000MOG (powers of ten from 1,000) and
// 1MBABYDOGE (a million). 1INCH is an asset of its own and does not match.
var binanceMultiplierRE = regexp.MustCompile(`^(10{3,}|1M)([A-Z][A-Z0-9]*)$`)

// binanceMultiplier splits a contract's base asset into its multiplier and
// the asset ("1000PEPE" → 1000, "PEPE"); 1 and the base itself otherwise.
func binanceMultiplier(base string) (float64, string) {
	sub := binanceMultiplierRE.FindStringSubmatch(base)
	if sub == nil {
		return 1, base
	}
	if sub[1] == "1M" {
		return 1e6, sub[2]
	}
	return float64(pow10(len(sub[1]) - 1)), sub[2]
}

func pow10(n int) int64 {
	v := int64(1)
	for range n {
		v *= 10
	}
	return v
}

// perpetualOf finds the perpetual of a spot pair: the perpetual of the
// same name (BTC_USDT, or 1000SATS_USDT where the spot asset is itself
// 1000SATS), else the one quoted in blocks of the asset (1000PEPE_USDT for
// PEPE_USDT). The index is rebuilt when the listing is refreshed.
func (b *binance) perpetualOf(perp *symbolMap, symbol string) (binancePerpOf, bool) {
	if ex, ok := perp.fromCanon[symbol]; ok {
		return binancePerpOf{symbol: ex, multiplier: 1}, true
	}
	b.funding.mu.Lock()
	defer b.funding.mu.Unlock()
	if b.funding.perpsOf != perp {
		idx := map[string]binancePerpOf{}
		for canonical, ex := range perp.fromCanon {
			base, quote, ok := strings.Cut(canonical, "_")
			if !ok {
				continue
			}
			if mult, asset := binanceMultiplier(base); mult > 1 {
				if spot, ok := domain.NormalizeSymbol(domain.Crypto, asset+"_"+quote); ok {
					idx[spot] = binancePerpOf{symbol: ex, multiplier: mult}
				}
			}
		}
		b.funding.perps, b.funding.perpsOf = idx, perp
	}
	of, ok := b.funding.perps[symbol]
	return of, ok
}

// fundingRate returns the last funding rate of a perpetual as a fraction
// per 8 h; ok is false when Binance gave none for it.
func (b *binance) fundingRate(ctx context.Context, exch string) (float64, bool, error) {
	rates, err := b.fundingRates(ctx)
	if err != nil {
		return 0, false, err
	}
	r, ok := rates[exch]
	return r, ok, nil
}

// fundingRates returns the cached funding rates per 8 h, downloading them
// when older than premiumIndexTTL. lastFundingRate is per the symbol's own
// funding interval (fundingInfo: 8, 4 or 1 h), so it is scaled to 8 h: a
// 4-hourly 0.01 % is 0.02 % per 8 h. Rows with a missing or non-finite rate
// are logged and left out.
func (b *binance) fundingRates(ctx context.Context) (map[string]float64, error) {
	b.funding.mu.Lock()
	defer b.funding.mu.Unlock()
	now := b.now()
	if b.funding.rates != nil && now.Sub(b.funding.fetched) < premiumIndexTTL {
		return b.funding.rates, nil
	}
	if err := b.refreshFundingInfo(ctx, now); err != nil {
		return nil, err
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
		hours := binanceDefaultFundingHours
		if h, ok := b.funding.hours[r.Symbol]; ok {
			hours = h
		}
		rates[r.Symbol] = v * binanceDefaultFundingHours / float64(hours)
	}
	b.funding.rates, b.funding.fetched = rates, now
	return rates, nil
}

// refreshFundingInfo downloads the funding intervals when older than
// fundingInfoTTL (b.funding.mu held). A failed refresh keeps the intervals
// it had; without any, the funding rates cannot be labelled and fail.
func (b *binance) refreshFundingInfo(ctx context.Context, now time.Time) error {
	if b.funding.hours != nil && now.Sub(b.funding.infoFetched) < fundingInfoTTL {
		return nil
	}
	var rows []binanceFundingInfo
	if err := b.futures.getJSON(ctx, "/fapi/v1/fundingInfo", nil, &rows); err != nil {
		if b.funding.hours != nil {
			b.log.Warn("feeds: fundingInfo refresh failed, using cached intervals", "err", err)
			return nil
		}
		return err
	}
	hours := make(map[string]int, len(rows))
	for _, r := range rows {
		switch {
		case r.FundingIntervalHours > 0 && r.FundingIntervalHours <= 24:
			hours[r.Symbol] = r.FundingIntervalHours
		case r.FundingIntervalHours != 0:
			b.log.Warn("feeds: ignoring bad funding interval", "symbol", r.Symbol, "hours", r.FundingIntervalHours)
		}
	}
	b.funding.hours, b.funding.infoFetched = hours, now
	return nil
}

// openInterest adds the 24 h change of open interest and, when the
// history carries a circulating supply, the market cap to out. A history
// that does not parse is logged and adds nothing; a failed request is
// returned.
func (b *binance) openInterest(ctx context.Context, of binancePerpOf, out FundamentalInputs) error {
	var hist []binanceOpenInterest
	q := url.Values{"symbol": {of.symbol}, "period": {"1d"}, "limit": {"2"}}
	if err := b.futures.getJSON(ctx, "/futures/data/openInterestHist", q, &hist); err != nil {
		return err
	}
	chg, err := openInterestChange(hist)
	if err != nil {
		b.log.Warn("feeds: dropping bad open-interest history", "symbol", of.symbol, "err", err)
		return nil
	}
	out[FundamentalOpenInterestChg] = chg
	if mcap, ok := openInterestMarketCap(hist[len(hist)-1], of.multiplier); ok {
		out[FundamentalMarketCap] = mcap
	}
	return nil
}

// openInterestChange is the percent change between the two newest points
// of an open-interest history (oldest first, as Binance returns it). The
// ratio is the same in contracts as in units of the asset.
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
	ta, err := parseRawMillis("timestamp", a.Timestamp)
	if err != nil {
		return 0, err
	}
	tb, err := parseRawMillis("timestamp", b.Timestamp)
	if err != nil {
		return 0, err
	}
	chg := (last/prev - 1) * 100
	if prev <= 0 || last < 0 || !tb.After(ta) || math.IsInf(chg, 0) {
		return 0, fmt.Errorf("open interest %v → %v at %s → %s: %w", prev, last, ta, tb, errBadField)
	}
	return chg, nil
}

// openInterestMarketCap is the circulating supply times the asset's price.
// The price is the open interest's value over its size, per contract unit:
// a 1000PEPE unit is worth 1,000 PEPE, so it is divided by the multiplier
// (the supply, from CoinMarketCap, counts single units of the asset).
func openInterestMarketCap(p binanceOpenInterest, multiplier float64) (float64, bool) {
	var supply, size, value float64
	if p.CMCCirculatingSupply == nil || parseDecimalFields(
		decimalField{"CMCCirculatingSupply", p.CMCCirculatingSupply, &supply},
		decimalField{"sumOpenInterest", p.SumOpenInterest, &size},
		decimalField{"sumOpenInterestValue", p.SumOpenInterestValue, &value}) != nil {
		return 0, false
	}
	if supply <= 0 || size <= 0 || value <= 0 || !(multiplier > 0) {
		return 0, false
	}
	mcap := supply * (value / size / multiplier)
	return mcap, mcap > 0 && !math.IsInf(mcap, 0)
}
