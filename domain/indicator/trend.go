package indicator

import "math"

// TrueRange is max(high, close[1]) − min(low, close[1]); the first bar,
// without a previous close, uses high − low (TradingView ta.tr(true)).
func TrueRange(high, low, close []float64) []float64 {
	out := make([]float64, len(close))
	for i := range out {
		if i == 0 {
			out[i] = high[i] - low[i]
			continue
		}
		out[i] = math.Max(high[i], close[i-1]) - math.Min(low[i], close[i-1])
	}
	return out
}

// ATR is the average true range over n bars (ta.atr): Wilder's RMA of the
// true range, first value at bar n−1, exactly as TradingView (go-talib
// starts one bar later and seeds differently).
func ATR(high, low, close []float64, n int) []float64 {
	out := make([]float64, len(close))
	w := wilder{n: n}
	for i := range out {
		tr := high[i] - low[i]
		if i > 0 {
			tr = math.Max(high[i], close[i-1]) - math.Min(low[i], close[i-1])
		}
		out[i] = w.push(tr)
	}
	return out
}

// DMI returns the directional indicators +DI, −DI and ADX (ta.dmi(diLen,
// adxLen)), smoothed with Wilder's RMA seeded by the SMA as TradingView
// does. The first bar has no directional movement, so +DI/−DI start at bar
// diLen and ADX at bar diLen+adxLen−1 (27 for 14/14, like TA-Lib, whose
// values converge to these after ~150 bars).
func DMI(high, low, close []float64, diLen, adxLen int) (plus, minus, adx []float64) {
	n := len(close)
	plus, minus, adx = make([]float64, n), make([]float64, n), make([]float64, n)
	d := newDMIStep(diLen, adxLen)
	for i := range n {
		if i == 0 {
			plus[i], minus[i], adx[i] = math.NaN(), math.NaN(), math.NaN()
			continue
		}
		plus[i], minus[i], adx[i] = d.push(high, low, close, i)
	}
	return plus, minus, adx
}

// dmiStep is DMI bar by bar: DMI and DMILast both run it.
type dmiStep struct{ tr, plus, minus, adx wilder }

func newDMIStep(diLen, adxLen int) dmiStep {
	return dmiStep{tr: wilder{n: diLen}, plus: wilder{n: diLen}, minus: wilder{n: diLen}, adx: wilder{n: adxLen}}
}

// push takes bar i (i ≥ 1) and returns its +DI, −DI and ADX.
func (d *dmiStep) push(high, low, close []float64, i int) (plus, minus, adx float64) {
	up, down := high[i]-high[i-1], low[i-1]-low[i]
	var pdm, mdm float64
	if up > down && up > 0 {
		pdm = up
	}
	if down > up && down > 0 {
		mdm = down
	}
	trur := d.tr.push(math.Max(high[i], close[i-1]) - math.Min(low[i], close[i-1]))
	plus = 100 * div(d.plus.push(pdm), trur)
	minus = 100 * div(d.minus.push(mdm), trur)
	sum := plus + minus
	if sum == 0 {
		sum = 1
	}
	return plus, minus, 100 * d.adx.push(math.Abs(plus-minus)/sum)
}

// IchimokuLines are the Ichimoku Cloud lines as of each bar, not displaced:
// SpanA/SpanB at bar i are plotted 26 bars ahead on a chart, so the cloud
// under bar i is SpanA/SpanB at bar i−26.
type IchimokuLines struct {
	Conversion, Base, SpanA, SpanB []float64
}

// Ichimoku computes the Ichimoku lines (TradingView ta.ichimoku):
// conversion = donchian(conv), base = donchian(base), spanA = average of
// the two, spanB = donchian(spanB), where donchian(n) is the midpoint of
// the n-bar high/low range.
func Ichimoku(high, low []float64, conv, base, spanB int) IchimokuLines {
	l := IchimokuLines{
		Conversion: donchianMid(high, low, conv),
		Base:       donchianMid(high, low, base),
		SpanB:      donchianMid(high, low, spanB),
	}
	l.SpanA = make([]float64, len(high))
	for i := range l.SpanA {
		l.SpanA[i] = (l.Conversion[i] + l.Base[i]) / 2
	}
	return l
}

// IchimokuLast is what a vote reads of Ichimoku(high, low, conv, base,
// spanB), bit for bit, without the series: the conversion and base lines
// of the last bar, span A and span B as of displacement bars before it,
// and span B of the last bar (NaN where the series has none).
func IchimokuLast(high, low []float64, conv, base, spanB, displacement int) (conversion, baseLine, spanAd, spanBd, spanB0 float64) {
	last, back := len(high)-1, len(high)-1-displacement
	conversion, baseLine = donchianMidAt(high, low, conv, last), donchianMidAt(high, low, base, last)
	spanB0 = donchianMidAt(high, low, spanB, last)
	spanAd, spanBd = math.NaN(), math.NaN()
	if back >= 0 && back < len(high) {
		spanAd = (donchianMidAt(high, low, conv, back) + donchianMidAt(high, low, base, back)) / 2
		spanBd = donchianMidAt(high, low, spanB, back)
	}
	return conversion, baseLine, spanAd, spanBd, spanB0
}

// donchianMidAt is donchianMid(high, low, n)[i] (NaN out of range).
func donchianMidAt(high, low []float64, n, i int) float64 {
	if i < 0 || i >= len(high) {
		return math.NaN()
	}
	return (extremeAt(high, n, i, true) + extremeAt(low, n, i, false)) / 2
}

// extremeAt is rollingExtreme(x, n, max)[i], bit for bit: NaN before the
// window fills or when it holds a NaN, else the window's extreme (of
// equal values the latest, as the deque keeps it).
func extremeAt(x []float64, n, i int, max bool) float64 {
	if n < 1 || i < n-1 {
		return math.NaN()
	}
	e := x[i-n+1]
	if math.IsNaN(e) {
		return math.NaN()
	}
	for _, v := range x[i-n+2 : i+1] {
		switch {
		case math.IsNaN(v):
			return math.NaN()
		case max && v >= e, !max && v <= e:
			e = v
		}
	}
	return e
}

func donchianMid(high, low []float64, n int) []float64 {
	hh, ll := Highest(high, n), Lowest(low, n)
	for i := range hh {
		hh[i] = (hh[i] + ll[i]) / 2
	}
	return hh
}
