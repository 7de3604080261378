package indicator

import (
	"math"

	talib "github.com/markcheno/go-talib"
)

// RSI is Wilder's Relative Strength Index over n bars (ta.rsi): RMA of
// gains and losses seeded with their simple average, first value at bar n.
// A window without losses gives 100 and one without gains 0, as in
// TradingView (go-talib gives 0 for a flat series).
func RSI(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	up, down := wilder{n: n}, wilder{n: n}
	for i := range x {
		if i == 0 {
			out[i] = math.NaN()
			continue
		}
		ch := x[i] - x[i-1]
		u, d := up.push(math.Max(ch, 0)), down.push(math.Max(-ch, 0))
		switch {
		case math.IsNaN(u) || math.IsNaN(d):
			out[i] = math.NaN()
		case d == 0:
			out[i] = 100
		case u == 0:
			out[i] = 0
		default:
			out[i] = 100 - 100/(1+u/d)
		}
	}
	return out
}

// StochK is the raw stochastic (ta.stoch): 100·(src − lowest(low, n)) /
// (highest(high, n) − lowest(low, n)); NaN over a flat range.
func StochK(src, high, low []float64, n int) []float64 {
	hh, ll := Highest(high, n), Lowest(low, n)
	for i := range hh {
		hh[i] = 100 * div(src[i]-ll[i], hh[i]-ll[i])
	}
	return hh
}

// Stoch is the full Stochastic (TradingView stochFull(n, smoothK, smoothD)):
// %K = SMA(stoch, smoothK), %D = SMA(%K, smoothD).
func Stoch(high, low, close []float64, n, smoothK, smoothD int) (k, d []float64) {
	k = SMA(StochK(close, high, low, n), smoothK)
	return k, SMA(k, smoothD)
}

// StochRSI is the Stochastic RSI (TradingView stochRsi(rsiLen, n, smoothK,
// smoothD)): the full Stochastic applied to RSI(rsiLen).
func StochRSI(x []float64, rsiLen, n, smoothK, smoothD int) (k, d []float64) {
	return StochRSIFrom(RSI(x, rsiLen), n, smoothK, smoothD)
}

// StochRSIFrom is StochRSI over an already computed RSI series, so a caller
// that needs both computes RSI once.
func StochRSIFrom(rsi []float64, n, smoothK, smoothD int) (k, d []float64) {
	k = SMA(StochK(rsi, rsi, rsi, n), smoothK)
	return k, SMA(k, smoothD)
}

// CCI is the Commodity Channel Index of one source series (ta.cci(src, n)):
// (src − SMA) / (0.015 · mean absolute deviation). TradingView's Technical
// Rating feeds it the close; go-talib's Cci always uses the typical price.
func CCI(x []float64, n int) []float64 {
	ma := SMA(x, n)
	out := make([]float64, len(x))
	for i := range x {
		if math.IsNaN(ma[i]) {
			out[i] = math.NaN()
			continue
		}
		var dev float64
		for j := i - n + 1; j <= i; j++ {
			dev += math.Abs(x[j] - ma[i])
		}
		out[i] = div(x[i]-ma[i], 0.015*dev/float64(n))
	}
	return out
}

// WilliamsR is Williams %R over n bars (ta.wpr), from −100 to 0; NaN over
// a flat range.
func WilliamsR(high, low, close []float64, n int) []float64 {
	hh, ll := Highest(high, n), Lowest(low, n)
	for i := range hh {
		hh[i] = 100 * div(close[i]-hh[i], hh[i]-ll[i])
	}
	return hh
}

// Momentum is x − x[n] (ta.mom), computed by go-talib.
func Momentum(x []float64, n int) []float64 {
	return onValid(x, n, func(v []float64) []float64 { return talib.Mom(v, n) })
}

// MACD returns the MACD line EMA(fast) − EMA(slow), its signal line
// EMA(macd, signal) and the histogram (ta.macd). Each EMA is seeded as
// TradingView does, with the SMA of its own first values; go-talib's Macd
// seeds the fast EMA and the signal differently and only converges after
// ~100 bars.
func MACD(x []float64, fast, slow, signal int) (macd, sig, hist []float64) {
	f, s := EMA(x, fast), EMA(x, slow)
	macd = f
	for i := range macd {
		macd[i] = f[i] - s[i]
	}
	sig = EMA(macd, signal)
	hist = s
	for i := range hist {
		hist[i] = macd[i] - sig[i]
	}
	return macd, sig, hist
}

// AwesomeOscillator is SMA(hl2, fast) − SMA(hl2, slow); TradingView's
// ao() is fast 5, slow 34.
func AwesomeOscillator(high, low []float64, fast, slow int) []float64 {
	hl2 := make([]float64, len(high))
	for i := range hl2 {
		hl2[i] = (high[i] + low[i]) / 2
	}
	f, sl := SMA(hl2, fast), SMA(hl2, slow)
	for i := range f {
		f[i] -= sl[i]
	}
	return f
}

// UltimateOscillator is Williams' Ultimate Oscillator (TradingView
// uo(p1, p2, p3)): 100·(4·avg(p1) + 2·avg(p2) + avg(p3))/7 where avg(p) =
// Σ buying pressure / Σ true range over p bars; NaN while a true-range sum
// is 0 (go-talib silently drops that term).
func UltimateOscillator(high, low, close []float64, p1, p2, p3 int) []float64 {
	n := len(close)
	bp := make([]float64, n)
	tr := make([]float64, n)
	bp[0], tr[0] = math.NaN(), math.NaN() // needs close[1]
	for i := 1; i < n; i++ {
		tmin := math.Min(low[i], close[i-1])
		tr[i] = math.Max(high[i], close[i-1]) - tmin
		bp[i] = close[i] - tmin
	}
	b1, b2, b3 := Sum(bp, p1), Sum(bp, p2), Sum(bp, p3)
	t1, t2, t3 := Sum(tr, p1), Sum(tr, p2), Sum(tr, p3)
	out := b1
	for i := range out {
		out[i] = 100 * (4*div(b1[i], t1[i]) + 2*div(b2[i], t2[i]) + div(b3[i], t3[i])) / 7
	}
	return out
}

// BullBearPower returns Elder's bull power high − EMA(close, n) and bear
// power low − EMA(close, n).
func BullBearPower(high, low, close []float64, n int) (bull, bear []float64) {
	ema := EMA(close, n)
	bull, bear = make([]float64, len(close)), make([]float64, len(close))
	for i := range ema {
		bull[i], bear[i] = high[i]-ema[i], low[i]-ema[i]
	}
	return bull, bear
}
