package domain

// AnalyticsSource is the combination whose candles are scored for a
// market in a region: the first candle-bearing combination of the market
// in the region's catalogue that served serves (for crypto a spot
// exchange). Analytics are per market and symbol, so one exchange is the
// reference; a market none of whose candle-bearing combinations is served
// has none and is not scored.
func AnalyticsSource(region string, m Market, served Served) (Combination, bool) {
	for _, c := range catalogue[region] {
		if c.Market == m && c.HasCandles() && served.Has(c) {
			return c, true
		}
	}
	return Combination{}, false
}
