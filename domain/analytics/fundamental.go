package analytics

import (
	"math"

	"github.com/marketscreener/market/domain"
)

// Fundamentals are the optional fundamental inputs of one asset (the JSON
// names are those of the published vectors). Every
// field is optional (nil = not available); only the fields of the asset's
// market are used. Fractions are plain ratios (0.05 = 5%).
type Fundamentals struct {
	// Crypto (perpetual futures data of the same base asset).
	FundingRate        *float64 `json:"funding_rate,omitempty"`         // latest funding rate per 8 h period, fraction
	OpenInterestChange *float64 `json:"open_interest_change,omitempty"` // open-interest change over 24 h, fraction
	VolumeToMarketCap  *float64 `json:"volume_to_market_cap,omitempty"` // 24 h traded volume / market capitalisation

	// Stocks.
	PE            *float64 `json:"pe,omitempty"`             // price / trailing earnings; ≤ 0 for loss-makers
	SectorPE      *float64 `json:"sector_pe,omitempty"`      // median P/E of the sector; nil = compare with MarketPE
	RevenueGrowth *float64 `json:"revenue_growth,omitempty"` // revenue change year on year, fraction
	NetMargin     *float64 `json:"net_margin,omitempty"`     // net income / revenue, fraction
	DebtToEquity  *float64 `json:"debt_to_equity,omitempty"` // total debt / shareholders' equity (negative equity < 0)

	// Forex, base currency minus quote currency, in percentage points.
	PolicyRateDiff *float64 `json:"policy_rate_differential,omitempty"`
	InflationDiff  *float64 `json:"inflation_differential,omitempty"`
}

// Thresholds of the fundamental rules. They are deliberately simple,
// documented rules of thumb rather than a fitted model; the factor
// statistics show how well each one works.
const (
	fundingHigh = 0.0005  // ≥ 0.05% per 8 h (≈ 55% a year): crowded longs, bearish
	fundingLow  = -0.0001 // ≤ −0.01%: shorts pay, squeeze fuel, bullish
	oiMove      = 0.02    // |OI change| below 2% confirms nothing

	liquidityHigh = 0.10 // volume ≥ 10% of market cap a day: strong interest
	liquidityLow  = 0.01 // < 1%: thin market

	// MarketPE is the broad-market P/E used when the sector's is unknown.
	MarketPE      = 20.0
	peCheap       = 0.8  // P/E below 80% of the reference: cheap
	peExpensive   = 1.25 // above 125%: expensive
	growthStrong  = 0.10 // revenue +10% y/y
	marginStrong  = 0.15 // net margin 15%
	leverageLow   = 0.5  // debt/equity
	leverageHigh  = 2.0
	rateDiffMin   = 0.5 // policy-rate differential that matters, pp
	inflationDiff = 1.0 // inflation differential that matters, pp
)

// Relative weights of the inputs inside each market's fundamental score;
// missing inputs drop out and the rest are renormalised.
const (
	wFunding, wOpenInterest, wLiquidity     = 0.4, 0.35, 0.25
	wValuation, wGrowth, wMargin, wLeverage = 0.3, 0.3, 0.2, 0.2
	wRateDiff, wInflation                   = 0.6, 0.4
)

// fundamental returns the fundamental factors of the asset's market with
// weights summing to 1, or none. priceChange is the recent price change,
// whose sign says how to read the open interest's change.
func fundamental(m domain.Market, f *Fundamentals, priceChange float64) []Factor {
	if f == nil {
		return nil
	}
	var out []Factor
	add := func(name, value string, dir int, w float64, key string, kv ...string) {
		out = append(out, Factor{Name: name, Value: value, Sentiment: sentimentOf(dir), Group: GroupFundamental,
			Weight: w, Text: msg(voteKey(key, dir), kv...)})
	}
	switch m {
	case domain.Crypto:
		if v, ok := finite(f.FundingRate); ok {
			s := fmtPct(v, 4)
			dir := 0
			switch {
			case v >= fundingHigh:
				dir = -1
			case v <= fundingLow:
				dir = 1
			}
			add("funding_rate", s, dir, wFunding, "funding", "value", s)
		}
		if v, ok := finite(f.OpenInterestChange); ok {
			dir := 0
			if v >= oiMove && priceChange != 0 {
				dir = int(math.Copysign(1, priceChange))
			}
			s := fmtPct(v, 2)
			add("open_interest_change", s, dir, wOpenInterest, "oi", "value", s)
		}
		if v, ok := finite(f.VolumeToMarketCap); ok {
			s := fmtPct(v, 2)
			add("volume_to_market_cap", s, band(v, liquidityLow, liquidityHigh), wLiquidity, "liquidity", "value", s)
		}
	case domain.Stocks:
		if pe, ok := finite(f.PE); ok {
			add2 := func(dir int, key string, ref float64) {
				add("valuation_pe", fmtNum(pe, 1), dir, wValuation, key, "pe", fmtNum(pe, 1), "ref", fmtNum(ref, 1))
			}
			ref, key := MarketPE, "valuation_market"
			if s, ok := finite(f.SectorPE); ok && s > 0 {
				ref, key = s, "valuation"
			}
			switch {
			case pe <= 0:
				out = append(out, Factor{Name: "valuation_pe", Value: fmtNum(pe, 1), Sentiment: Bearish,
					Group: GroupFundamental, Weight: wValuation, Text: msg("valuation.loss", "pe", fmtNum(pe, 1))})
			default:
				add2(-band(pe/ref, peCheap, peExpensive), key, ref)
			}
		}
		if v, ok := finite(f.RevenueGrowth); ok {
			s := fmtPct(v, 1)
			add("revenue_growth", s, band(v, 0, growthStrong), wGrowth, "growth", "value", s)
		}
		if v, ok := finite(f.NetMargin); ok {
			s := fmtPct(v, 1)
			add("net_margin", s, band(v, 0, marginStrong), wMargin, "margin", "value", s)
		}
		if v, ok := finite(f.DebtToEquity); ok {
			dir := -band(v, leverageLow, leverageHigh)
			if v < 0 { // negative equity
				dir = -1
			}
			add("debt_to_equity", fmtNum(v, 2), dir, wLeverage, "leverage", "value", fmtNum(v, 2))
		}
	case domain.Forex:
		if v, ok := finite(f.PolicyRateDiff); ok {
			s := fmtNum(v, 2)
			add("policy_rate_differential", s, band(v, -rateDiffMin, rateDiffMin), wRateDiff, "rate_diff", "value", s)
		}
		if v, ok := finite(f.InflationDiff); ok {
			s := fmtNum(v, 2)
			add("inflation_differential", s, -band(v, -inflationDiff, inflationDiff), wInflation, "inflation_diff", "value", s)
		}
	}
	var total float64
	for _, f := range out {
		total += f.Weight
	}
	for i := range out {
		out[i].Weight /= total
	}
	return out
}

// band maps v to −1 below lo (strictly), +1 at or above hi, else 0.
func band(v, lo, hi float64) int {
	switch {
	case v >= hi:
		return 1
	case v < lo:
		return -1
	}
	return 0
}

// finite dereferences an optional input, rejecting NaN and ±Inf as missing.
func finite(p *float64) (float64, bool) {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return 0, false
	}
	return *p, true
}
