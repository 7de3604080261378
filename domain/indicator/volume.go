package indicator

import talib "github.com/markcheno/go-talib"

// OBV is on-balance volume computed by go-talib. It starts from the first
// bar's volume where TradingView starts from 0; the constant offset does
// not change its slope or its crossings of its own moving average, which
// is all the analytics use.
func OBV(close, volume []float64) []float64 {
	if len(close) == 0 {
		return nil
	}
	return talib.Obv(close, volume)
}

// Bollinger returns the Bollinger Bands over n bars with k population
// standard deviations (TradingView ta.bb), computed by go-talib.
func Bollinger(x []float64, n int, k float64) (upper, middle, lower []float64) {
	upper = onValid(x, n-1, func(v []float64) []float64 { u, _, _ := talib.BBands(v, n, k, k, talib.SMA); return u })
	middle = SMA(x, n)
	lower = make([]float64, len(x))
	for i := range lower {
		lower[i] = 2*middle[i] - upper[i]
	}
	return upper, middle, lower
}
