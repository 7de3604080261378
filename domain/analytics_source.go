package domain

// AnalyticsSource is the combination whose candles are scored for a
// market in a region: the first candle-bearing combination of the market
// in the region's catalogue (for crypto its spot exchange). Analytics are
// per market and symbol, so one exchange is the reference.
func AnalyticsSource(region string, m Market) (Combination, bool) {
	for _, c := range catalogue[region] {
		if c.Market == m && c.HasCandles() {
			return c, true
		}
	}
	return Combination{}, false
}
