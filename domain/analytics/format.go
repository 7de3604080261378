package analytics

import (
	"math"
	"strconv"
)

// fmtNum formats v with prec decimals, language-neutral (dot decimal
// separator, no grouping), without a "-0".
func fmtNum(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if s[0] == '-' {
		zero := true
		for i := 1; i < len(s); i++ {
			if s[i] != '0' && s[i] != '.' {
				zero = false
				break
			}
		}
		if zero {
			return s[1:]
		}
	}
	return s
}

// fmtPrice formats a price with about six significant digits: 2 decimals
// from 1000 up, more for small prices (EUR_USD 1.0834, a meme coin
// 0.00001234), at most 8.
func fmtPrice(v float64) string {
	return fmtNum(v, priceDecimals(v))
}

func priceDecimals(v float64) int {
	a := math.Abs(v)
	if a == 0 || math.IsNaN(a) || math.IsInf(a, 0) {
		return 2
	}
	d := 4 - int(math.Floor(math.Log10(a)))
	return max(2, min(8, d))
}

// fmtSigned formats an indicator value whose magnitude varies with the
// price (MACD, momentum, AO): as many decimals as a price of that size.
func fmtSigned(v, price float64) string { return fmtNum(v, priceDecimals(price)) }

// fmtPct formats a fraction as a percentage with prec decimals (0.0123 → "1.23").
func fmtPct(frac float64, prec int) string { return fmtNum(frac*100, prec) }
