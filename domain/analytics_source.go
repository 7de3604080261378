package domain

// AnalyticsSources are the combinations whose candles are scored for a
// market in a region: the candle-bearing combinations of the market in the
// region's catalogue that served serves, in catalogue order. Analytics are
// per market and symbol, so a symbol must come from one source:
//
//   - crypto pairs trade on several exchanges under the same symbol, so
//     the first served spot exchange is the market's reference and the
//     only source;
//   - a stock is listed on one exchange and a currency pair is either a
//     major or a minor, so every combination of stocks and forex is a
//     source, and together they cover the market.
//
// A market none of whose candle-bearing combinations is served has none
// and is not scored.
func AnalyticsSources(region string, m Market, served Served) []Combination {
	var out []Combination
	for _, c := range catalogue[region] {
		if c.Market != m || !c.HasCandles() || !served.Has(c) {
			continue
		}
		out = append(out, c)
		if m == Crypto {
			break
		}
	}
	return out
}

// Scored reports whether a market has an analytics source in the region
// with the served combinations (AnalyticsSources), so it is scored.
func Scored(region string, m Market, served Served) bool {
	return len(AnalyticsSources(region, m, served)) > 0
}

// ScoredExchange reports whether candles of a market's exchange are read
// by scoring: the exchange of one of its analytics sources.
func ScoredExchange(region string, m Market, exchange string, served Served) bool {
	for _, c := range AnalyticsSources(region, m, served) {
		if c.Exchange == exchange {
			return true
		}
	}
	return false
}
