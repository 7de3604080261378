package indicator

import "math"

// The latest values of recursive indicators, computed as their series
// functions compute them (the same operations in the same order, so the
// values are bit-identical) without allocating the series: the scorer
// votes on the last bar or two only, and a series of 500 bars per
// indicator per asset was most of a scoring run's garbage.

// emaStep is a streaming EMA in go-talib's form (Ema): seeded with the
// mean of its first n values, then (x−ema)·k + ema.
type emaStep struct {
	n, seen int
	k, sum  float64
	value   float64
}

func newEMAStep(n int) emaStep { return emaStep{n: n, k: 2.0 / float64(n+1)} }

// push adds the next value; ok is false while the first n are collected.
func (e *emaStep) push(x float64) (v float64, ok bool) {
	if e.seen < e.n {
		e.sum += x
		e.seen++
		if e.seen < e.n {
			return math.NaN(), false
		}
		e.value = e.sum / float64(e.n)
		return e.value, true
	}
	e.value = ((x - e.value) * e.k) + e.value
	return e.value, true
}

// EMALast2 is the last two values of EMA(x, n), newest first (NaN where
// the series has none). x must not contain NaN.
func EMALast2(x []float64, n int) (last, prev float64) {
	last, prev = math.NaN(), math.NaN()
	if n < 1 || len(x) < n {
		return last, prev
	}
	e := newEMAStep(n)
	for _, v := range x {
		if y, ok := e.push(v); ok {
			prev, last = last, y
		}
	}
	return last, prev
}

// MACDLast is the last MACD line and signal value of MACD(x, fast, slow,
// signal). x must not contain NaN.
func MACDLast(x []float64, fast, slow, signal int) (macd, sig float64) {
	macd, sig = math.NaN(), math.NaN()
	if fast < 1 || slow < 1 || signal < 1 || len(x) < max(fast, slow) {
		return macd, sig
	}
	f, s, g := newEMAStep(fast), newEMAStep(slow), newEMAStep(signal)
	for _, v := range x {
		fv, fok := f.push(v)
		sv, sok := s.push(v)
		if !fok || !sok {
			continue
		}
		macd = fv - sv
		if gv, ok := g.push(macd); ok {
			sig = gv
		}
	}
	return macd, sig
}

// BullBearPowerLast is the last two values of BullBearPower(high, low,
// close, n), newest first. close must not contain NaN.
func BullBearPowerLast(high, low, close []float64, n int) (bull, bull1, bear, bear1 float64) {
	k := len(close)
	e, e1 := EMALast2(close, n)
	bull, bull1, bear, bear1 = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if k >= 1 {
		bull, bear = high[k-1]-e, low[k-1]-e
	}
	if k >= 2 {
		bull1, bear1 = high[k-2]-e1, low[k-2]-e1
	}
	return bull, bull1, bear, bear1
}

// DMILast is the last +DI, −DI and ADX of DMI(high, low, close, diLen,
// adxLen), and the ADX of the bar before.
func DMILast(high, low, close []float64, diLen, adxLen int) (plus, minus, adx, adx1 float64) {
	plus, minus, adx, adx1 = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	d := newDMIStep(diLen, adxLen)
	for i := 1; i < len(close); i++ {
		var a float64
		plus, minus, a = d.push(high, low, close, i)
		adx1, adx = adx, a
	}
	return plus, minus, adx, adx1
}
