package indicator

import (
	"math"

	"github.com/marketscreener/market/domain"
)

// Series holds candles split into one slice per field, the shape every
// indicator works on. All slices have the same length, oldest bar first.
type Series struct {
	Open, High, Low, Close, Volume []float64
}

// FromCandles splits candles (oldest first) into a Series. The five slices
// share one allocation.
func FromCandles(cs []domain.Candle) Series {
	n := len(cs)
	buf := make([]float64, 5*n)
	s := Series{
		Open:   buf[0:n:n],
		High:   buf[n : 2*n : 2*n],
		Low:    buf[2*n : 3*n : 3*n],
		Close:  buf[3*n : 4*n : 4*n],
		Volume: buf[4*n : 5*n : 5*n],
	}
	for i, c := range cs {
		s.Open[i], s.High[i], s.Low[i], s.Close[i], s.Volume[i] = c.Open, c.High, c.Low, c.Close, c.Volume
	}
	return s
}

// Tail returns the last n bars of s (all of s when it is shorter),
// sharing its arrays. Indicators with a bounded window (Stochastic,
// Williams %R, CCI, Ichimoku, AO, UO, HMA) give the same latest values on
// a tail that covers their window, at a fraction of the cost; recursive
// ones (EMA, RSI, MACD, ATR, DMI) need the whole history.
func (s Series) Tail(n int) Series {
	from := max(0, s.Len()-n)
	return Series{Open: s.Open[from:], High: s.High[from:], Low: s.Low[from:], Close: s.Close[from:], Volume: s.Volume[from:]}
}

// Len is the number of bars.
func (s Series) Len() int { return len(s.Close) }

// HL2 returns (high+low)/2 per bar.
func (s Series) HL2() []float64 {
	out := make([]float64, len(s.High))
	for i := range out {
		out[i] = (s.High[i] + s.Low[i]) / 2
	}
	return out
}

// Last returns the value i bars back from the end of x (0 = last), or NaN
// when that bar does not exist: TradingView's x[i] on the last bar.
func Last(x []float64, i int) float64 {
	j := len(x) - 1 - i
	if j < 0 || j >= len(x) {
		return math.NaN()
	}
	return x[j]
}

// nans returns a slice of n NaNs.
func nans(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

// firstValid returns the index of the first non-NaN value, or len(x).
func firstValid(x []float64) int {
	for i, v := range x {
		if !math.IsNaN(v) {
			return i
		}
	}
	return len(x)
}

// onValid runs a go-talib function on the part of x after its NaN warm-up
// and marks the function's own warm-up (lookback bars, which go-talib fills
// with zeros) as NaN. go-talib panics on inputs shorter than its lookback,
// so those return all NaN.
func onValid(x []float64, lookback int, fn func([]float64) []float64) []float64 {
	start := firstValid(x)
	if len(x)-start <= lookback {
		return nans(len(x))
	}
	res := fn(x[start:])
	if start == 0 { // the common case: reuse go-talib's slice
		for i := range lookback {
			res[i] = math.NaN()
		}
		return res
	}
	out := make([]float64, len(x))
	for i := range out {
		j := i - start
		if j < lookback {
			out[i] = math.NaN()
		} else {
			out[i] = res[j]
		}
	}
	return out
}

// Highest returns the highest value of x over the last n bars including
// the current one (TradingView ta.highest); NaN while the window is short
// or holds a NaN.
func Highest(x []float64, n int) []float64 { return rollingExtreme(x, n, true) }

// Lowest returns the lowest value of x over the last n bars (ta.lowest).
func Lowest(x []float64, n int) []float64 { return rollingExtreme(x, n, false) }

// rollingExtreme keeps a monotonic deque of candidate indices, so each
// bar is pushed and popped once: O(n) whatever the window (rescanning each
// window would be the scorer's hottest loop).
func rollingExtreme(x []float64, n int, max bool) []float64 {
	out := make([]float64, len(x))
	dq := make([]int, len(x)) // each index enters once, so no wrap-around
	head, tail := 0, 0
	lastNaN := -1 // index of the most recent NaN seen
	for i, v := range x {
		if math.IsNaN(v) {
			lastNaN = i
		} else {
			for tail > head && ((max && x[dq[tail-1]] <= v) || (!max && x[dq[tail-1]] >= v)) {
				tail--
			}
			dq[tail] = i
			tail++
		}
		for tail > head && dq[head] <= i-n {
			head++
		}
		if i < n-1 || lastNaN > i-n || tail == head {
			out[i] = math.NaN()
			continue
		}
		out[i] = x[dq[head]]
	}
	return out
}

// Sum returns the rolling sum of x over n bars (TradingView math.sum); NaN
// while the window is incomplete or holds a NaN.
//
// Each window is summed afresh, oldest value first, so a sum depends only
// on the values inside its window. A running sum (add the new value,
// subtract the one leaving) is O(1) per bar but keeps the rounding residue
// of every value that ever passed through: after a Stochastic RSI of 12.3,
// 45.6, 0, 0, 0, 0 the "sum" of three zeros came out as ±1e-14, %K and %D
// differed in their last bits where both are exactly 0, and the K > D vote
// turned bullish on noise (≈0.5–1.5 % of random series). The windows the
// scorer sums are short (≤ 34 bars over a 40-bar tail), so O(n·w) costs
// nothing that shows.
func Sum(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	lastNaN := -1 // index of the most recent NaN seen
	for i, v := range x {
		if math.IsNaN(v) {
			lastNaN = i
		}
		if n < 1 || i < n-1 || lastNaN > i-n {
			out[i] = math.NaN()
			continue
		}
		var sum float64
		for _, w := range x[i-n+1 : i+1] {
			sum += w
		}
		out[i] = sum
	}
	return out
}

// div returns a/b, or NaN when b is 0, as Pine does.
func div(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
