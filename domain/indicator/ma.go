package indicator

import (
	"math"

	talib "github.com/markcheno/go-talib"
)

// SMA is the simple moving average over n bars (ta.sma). A NaN inside the
// window makes the result NaN, so SMA can smooth series with gaps (a
// Stochastic over a flat range) the way TradingView does.
func SMA(x []float64, n int) []float64 {
	out := Sum(x, n)
	for i := range out {
		out[i] /= float64(n)
	}
	return out
}

// EMA is the exponential moving average over n bars (ta.ema), alpha =
// 2/(n+1), seeded with the SMA of the first n values after x's own NaN
// warm-up. Computed by go-talib, whose seeding is the same.
func EMA(x []float64, n int) []float64 {
	return onValid(x, n-1, func(v []float64) []float64 { return talib.Ema(v, n) })
}

// EMALast is the last value of EMA(x, n) without allocating the series,
// for callers that only vote on today's value (the scorer runs six EMAs
// per asset). x must not contain NaN; it is NaN when x is shorter than n.
func EMALast(x []float64, n int) float64 {
	last, _ := EMALast2(x, n) // go-talib's form (emaStep), so the values are bit-identical
	return last
}

// EMALasts sets out[i] to EMALast(x, ns[i]) for every i, bit for bit, in
// one pass over x. An EMA is a chain of dependent operations, each waiting
// for the one before, so one EMA at a time leaves most of the processor
// idle; side by side, the chains' steps overlap. x must not contain NaN;
// out must be as long as ns.
func EMALasts(x []float64, ns []int, out []float64) {
	const most = 8
	if len(ns) > most {
		for i, n := range ns {
			out[i] = EMALast(x, n)
		}
		return
	}
	var sum, val, k [most]float64
	var lens [most]int
	m := 0 // the chains that have a value: their lengths, in lens[:m]
	for i, n := range ns {
		out[i] = math.NaN()
		if n >= 1 && len(x) >= n {
			lens[m], k[m] = n, 2.0/float64(n+1) // as newEMAStep
			m++
		}
	}
	for i, v := range x {
		for j := range m {
			// emaStep.push: the first n values summed in order, their mean
			// the seed, then the recursion.
			if n := lens[j]; i < n {
				sum[j] += v
				if i == n-1 {
					val[j] = sum[j] / float64(n)
				}
			} else {
				val[j] = ((v - val[j]) * k[j]) + val[j]
			}
		}
	}
	j := 0
	for i, n := range ns {
		if n >= 1 && len(x) >= n {
			out[i] = val[j]
			j++
		}
	}
}

// WMA is the linearly weighted moving average over n bars (ta.wma).
func WMA(x []float64, n int) []float64 {
	if n <= 1 {
		return append([]float64(nil), x...)
	}
	return onValid(x, n-1, func(v []float64) []float64 { return talib.Wma(v, n) })
}

// RMA is Wilder's moving average (ta.rma), alpha = 1/n, seeded with the SMA
// of the first n values after x's NaN warm-up. RSI, ATR and DMI use it.
func RMA(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	w := wilder{n: n}
	for i, v := range x {
		out[i] = w.push(v)
	}
	return out
}

// wilder is a streaming RMA, so RSI, ATR and DMI smooth as they go
// instead of allocating a series per intermediate.
type wilder struct {
	n, seen int
	sum     float64
	value   float64
}

// push adds the next value and returns the average so far: NaN while the
// first n values (NaNs before them are skipped as warm-up) are collected.
func (w *wilder) push(x float64) float64 {
	if w.seen < w.n {
		if math.IsNaN(x) {
			return math.NaN()
		}
		w.sum += x
		w.seen++
		if w.seen < w.n {
			return math.NaN()
		}
		w.value = w.sum / float64(w.n)
		return w.value
	}
	w.value = (x + float64(w.n-1)*w.value) / float64(w.n)
	return w.value
}

// HMA is the Hull moving average (ta.hma):
// WMA(2·WMA(x, n/2) − WMA(x, n), floor(√n)).
func HMA(x []float64, n int) []float64 {
	half := WMA(x, n/2)
	full := WMA(x, n)
	diff := make([]float64, len(x))
	for i := range diff {
		diff[i] = 2*half[i] - full[i]
	}
	return WMA(diff, int(math.Floor(math.Sqrt(float64(n)))))
}

// VWMA is the volume-weighted moving average over n bars (ta.vwma):
// SMA(close·volume)/SMA(volume); NaN when the window has no volume.
func VWMA(close, volume []float64, n int) []float64 {
	pv := make([]float64, len(close))
	for i := range pv {
		pv[i] = close[i] * volume[i]
	}
	num := Sum(pv, n)
	den := Sum(volume, n)
	for i := range num {
		num[i] = div(num[i], den[i])
	}
	return num
}
