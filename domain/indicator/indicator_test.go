package indicator

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	talib "github.com/markcheno/go-talib"
)

// randomWalk returns deterministic OHLCV bars with realistic structure.
func randomWalk(n int, seed uint64) Series {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Series{Open: make([]float64, n), High: make([]float64, n), Low: make([]float64, n), Close: make([]float64, n), Volume: make([]float64, n)}
	price := 100.0
	for i := range n {
		open := price
		price *= math.Exp(r.NormFloat64() * 0.02)
		s.Open[i], s.Close[i] = open, price
		s.High[i] = math.Max(open, price) * (1 + r.Float64()*0.01)
		s.Low[i] = math.Min(open, price) * (1 - r.Float64()*0.01)
		s.Volume[i] = 1000 + r.Float64()*1000
	}
	return s
}

func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

func assertSeries(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

// compareFrom checks got against a go-talib reference from bar `from` on.
func compareFrom(t *testing.T, name string, got, want []float64, from int, tol float64) {
	t.Helper()
	for i := from; i < len(got); i++ {
		if !near(got[i], want[i], tol) {
			t.Fatalf("%s[%d] = %v, go-talib %v", name, i, got[i], want[i])
		}
	}
}

var nan = math.NaN()

func TestMovingAveragesTrivial(t *testing.T) {
	t.Parallel()
	x := []float64{1, 2, 3, 4, 5}
	assertSeries(t, "SMA3", SMA(x, 3), []float64{nan, nan, 2, 3, 4}, 1e-12)
	// EMA(3): alpha 0.5, seeded with SMA(1,2,3)=2 → 3 → 4.
	assertSeries(t, "EMA3", EMA(x, 3), []float64{nan, nan, 2, 3, 4}, 1e-12)
	assertSeries(t, "EMA2", EMA([]float64{2, 4, 8, 8}, 2), []float64{nan, 3, 3 + (8-3)*2.0/3, (3 + (8-3)*2.0/3) + (8-(3+(8-3)*2.0/3))*2.0/3}, 1e-12)
	// WMA(3) of 1..5: (1+4+9)/6, (2+6+12)/6, (3+8+15)/6.
	assertSeries(t, "WMA3", WMA(x, 3), []float64{nan, nan, 14.0 / 6, 20.0 / 6, 26.0 / 6}, 1e-12)
	// RMA(2) of 2,4,6: seed 3, then 0.5*6+0.5*3.
	assertSeries(t, "RMA2", RMA([]float64{2, 4, 6}, 2), []float64{nan, 3, 4.5}, 1e-12)
	// A NaN inside the window makes SMA NaN (Pine semantics) and it recovers after.
	assertSeries(t, "SMA-gap", SMA([]float64{1, nan, 3, 5, 7}, 2), []float64{nan, nan, nan, 4, 6}, 1e-12)
	// Short input: all NaN, no panic.
	assertSeries(t, "EMA-short", EMA([]float64{1, 2}, 5), []float64{nan, nan}, 0)
}

// TestSumDependsOnlyOnItsWindow: a window's sum must not carry rounding
// residue from values that have left it, or two equal windows (three zeros
// after 12.3, 45.6, 7.7: a running sum gave 9.77e-15) compare unequal and a
// K > D vote fires on noise.
func TestSumDependsOnlyOnItsWindow(t *testing.T) {
	t.Parallel()
	if got := Sum([]float64{12.3, 45.6, 7.7, 0, 0, 0}, 3)[5]; got != 0 {
		t.Errorf("sum of three zeros = %v, want exactly 0", got)
	}
	if got := SMA([]float64{0.7, 33.1, 5.9, 100, 100, 100}, 3)[5]; got != 100 {
		t.Errorf("SMA of three 100s = %v, want exactly 100", got)
	}
	x := randomWalk(300, 7).Close
	const n = 14
	sums := Sum(x, n)
	for i := n - 1; i < len(x); i++ {
		if fresh := Sum(x[i-n+1:i+1], n)[n-1]; sums[i] != fresh {
			t.Fatalf("Sum[%d] = %v, the same window alone sums to %v", i, sums[i], fresh)
		}
	}
}

func TestHMAOfLineIsTheLine(t *testing.T) {
	t.Parallel()
	// WMA(n) of a line lags by (n−1)/3; Hull's construction cancels the lag
	// exactly: 2·(i−1) − (i−8/3) = i + 2/3, and WMA(3) of that is i.
	x := make([]float64, 30)
	for i := range x {
		x[i] = float64(i)
	}
	got := HMA(x, 9)
	for i := range got {
		if i < 10 {
			if !math.IsNaN(got[i]) {
				t.Fatalf("HMA[%d] = %v, want NaN in warm-up", i, got[i])
			}
			continue
		}
		if !near(got[i], float64(i), 1e-9) {
			t.Fatalf("HMA[%d] = %v, want %d", i, got[i], i)
		}
	}
}

func TestVWMA(t *testing.T) {
	t.Parallel()
	c := []float64{10, 20, 30}
	v := []float64{1, 1, 2}
	// (20·1 + 30·2)/3 = 26.67
	assertSeries(t, "VWMA2", VWMA(c, v, 2), []float64{nan, 15, 80.0 / 3}, 1e-12)
	assertSeries(t, "VWMA-novol", VWMA(c, []float64{0, 0, 0}, 2), []float64{nan, nan, nan}, 0)
}

// Wilder's RSI example (the StockCharts worksheet of Wilder's method).
func TestRSIWilderExample(t *testing.T) {
	t.Parallel()
	closes := []float64{44.3389, 44.0902, 44.1497, 43.6124, 44.3278, 44.8264, 45.0955, 45.4245, 45.8433, 46.0826,
		45.8931, 46.0328, 45.6140, 46.2820, 46.2820, 46.0028, 46.0328, 46.4116, 46.2222, 45.6439, 46.2122, 46.2521,
		45.7137, 46.4515, 45.7835, 45.3548, 44.0288, 44.1783, 44.2181, 44.5672, 43.4205, 42.6628, 43.1314}
	want := []float64{70.53, 66.32, 66.55, 69.41, 66.36, 57.97, 62.93, 63.26, 56.06, 62.38, 54.71, 50.42, 39.99,
		41.46, 41.87, 45.46, 37.30, 33.08, 37.77}
	got := RSI(closes, 14)
	for i := range 14 {
		if !math.IsNaN(got[i]) {
			t.Fatalf("RSI[%d] = %v, want NaN", i, got[i])
		}
	}
	for i, w := range want {
		if math.Abs(got[14+i]-w) > 0.01 {
			t.Errorf("RSI[%d] = %.4f, want %.2f", 14+i, got[14+i], w)
		}
	}
	compareFrom(t, "RSI vs talib", got, talib.Rsi(closes, 14), 14, 1e-9)
}

func TestRSIFlat(t *testing.T) {
	t.Parallel()
	x := []float64{5, 6, 7, 8, 9, 10}
	if got := Last(RSI(x, 3), 0); got != 100 {
		t.Errorf("RSI of a rising series = %v, want 100", got)
	}
	flat := []float64{5, 5, 5, 5, 5}
	if got := Last(RSI(flat, 3), 0); got != 100 {
		t.Errorf("RSI of a flat series = %v, want 100 (TradingView: no losses)", got)
	}
}

func TestBollingerKnownSeries(t *testing.T) {
	t.Parallel()
	// Mean 5, population standard deviation exactly 2.
	x := []float64{2, 4, 4, 4, 5, 5, 7, 9}
	u, m, l := Bollinger(x, 8, 2)
	if !near(Last(u, 0), 9, 1e-9) || !near(Last(m, 0), 5, 1e-12) || !near(Last(l, 0), 1, 1e-9) {
		t.Errorf("Bollinger = %v/%v/%v, want 9/5/1", Last(u, 0), Last(m, 0), Last(l, 0))
	}
	if !math.IsNaN(u[6]) || !math.IsNaN(l[0]) {
		t.Error("Bollinger warm-up must be NaN")
	}
}

func TestATRHandComputed(t *testing.T) {
	t.Parallel()
	h := []float64{10, 12, 11, 15}
	l := []float64{8, 9, 9, 12}
	c := []float64{9, 11, 10, 14}
	// TR: 2 (h−l, no previous close), 3, 2, max(15,10)−min(12,10)=5.
	assertSeries(t, "TR", TrueRange(h, l, c), []float64{2, 3, 2, 5}, 1e-12)
	// ATR(2): seed (2+3)/2 = 2.5, then (2.5+2)/2 = 2.25, then (2.25+5)/2 = 3.625.
	assertSeries(t, "ATR2", ATR(h, l, c, 2), []float64{nan, 2.5, 2.25, 3.625}, 1e-12)
}

// The Wilder-smoothed indicators start up as TradingView does and differ
// from go-talib's early values, but both are the same recursion, so they
// agree once the seed has decayed ((13/14)^300 ≈ 2e-10).
func TestConvergesToTalib(t *testing.T) {
	t.Parallel()
	s := randomWalk(600, 7)
	const from = 300
	compareFrom(t, "ATR", ATR(s.High, s.Low, s.Close, 14), talib.Atr(s.High, s.Low, s.Close, 14), from, 1e-7)
	p, m, adx := DMI(s.High, s.Low, s.Close, 14, 14)
	compareFrom(t, "+DI", p, talib.PlusDI(s.High, s.Low, s.Close, 14), from, 1e-7)
	compareFrom(t, "-DI", m, talib.MinusDI(s.High, s.Low, s.Close, 14), from, 1e-7)
	compareFrom(t, "ADX", adx, talib.Adx(s.High, s.Low, s.Close, 14), from, 1e-6)
	macd, sig, hist := MACD(s.Close, 12, 26, 9)
	tm, ts, th := talib.Macd(s.Close, 12, 26, 9)
	compareFrom(t, "MACD", macd, tm, from, 1e-7)
	compareFrom(t, "MACD signal", sig, ts, from, 1e-7)
	compareFrom(t, "MACD hist", hist, th, from, 1e-7)
}

// Where the definitions coincide exactly, values match go-talib from the first bar.
func TestMatchesTalib(t *testing.T) {
	t.Parallel()
	s := randomWalk(400, 11)
	compareFrom(t, "SMA", SMA(s.Close, 20), talib.Sma(s.Close, 20), 19, 1e-9)
	compareFrom(t, "EMA", EMA(s.Close, 50), talib.Ema(s.Close, 50), 49, 1e-9)
	compareFrom(t, "RSI", RSI(s.Close, 14), talib.Rsi(s.Close, 14), 14, 1e-9)
	// TradingView's cci(close) is TA-Lib's CCI with high = low = close.
	compareFrom(t, "CCI", CCI(s.Close, 20), talib.Cci(s.Close, s.Close, s.Close, 20), 19, 1e-9)
	compareFrom(t, "W%R", WilliamsR(s.High, s.Low, s.Close, 14), talib.WillR(s.High, s.Low, s.Close, 14), 13, 1e-9)
	compareFrom(t, "UO", UltimateOscillator(s.High, s.Low, s.Close, 7, 14, 28), talib.UltOsc(s.High, s.Low, s.Close, 7, 14, 28), 28, 1e-9)
	k, d := Stoch(s.High, s.Low, s.Close, 14, 3, 3)
	tk, td := talib.Stoch(s.High, s.Low, s.Close, 14, 3, talib.SMA, 3, talib.SMA)
	compareFrom(t, "Stoch K", k, tk, 17, 1e-9)
	compareFrom(t, "Stoch D", d, td, 17, 1e-9)
	compareFrom(t, "MOM", Momentum(s.Close, 10), talib.Mom(s.Close, 10), 10, 1e-12)
	compareFrom(t, "OBV", OBV(s.Close, s.Volume), talib.Obv(s.Close, s.Volume), 0, 1e-12)
}

func TestWarmUps(t *testing.T) {
	t.Parallel()
	s := randomWalk(120, 3)
	_, sig, _ := MACD(s.Close, 12, 26, 9)
	plus, _, adx := DMI(s.High, s.Low, s.Close, 14, 14)
	_, stochRSID := StochRSI(s.Close, 14, 14, 3, 3)
	tests := []struct {
		name  string
		got   []float64
		first int // index of the first defined value
	}{
		{"SMA200", SMA(s.Close, 200), 120},
		{"EMA10", EMA(s.Close, 10), 9},
		{"HMA9", HMA(s.Close, 9), 10},
		{"RSI14", RSI(s.Close, 14), 14},
		{"CCI20", CCI(s.Close, 20), 19},
		{"ATR14", ATR(s.High, s.Low, s.Close, 14), 13},
		{"AO", AwesomeOscillator(s.High, s.Low, 5, 34), 33},
		{"UO", UltimateOscillator(s.High, s.Low, s.Close, 7, 14, 28), 28},
		{"MOM10", Momentum(s.Close, 10), 10},
		{"+DI", plus, 14},
		{"ADX", adx, 27},
		{"MACD signal", sig, 33},
		{"StochRSI D", stochRSID, 14 + 13 + 2 + 2},
	}
	for _, tt := range tests {
		if got := firstValid(tt.got); got != tt.first {
			t.Errorf("%s: first value at %d, want %d", tt.name, got, tt.first)
		}
	}
}

func TestFlatRangeIsNaN(t *testing.T) {
	t.Parallel()
	flat := []float64{5, 5, 5, 5, 5, 5}
	if v := Last(WilliamsR(flat, flat, flat, 3), 0); !math.IsNaN(v) {
		t.Errorf("W%%R over a flat range = %v, want NaN", v)
	}
	if v := Last(StochK(flat, flat, flat, 3), 0); !math.IsNaN(v) {
		t.Errorf("stoch over a flat range = %v, want NaN", v)
	}
	if v := Last(UltimateOscillator(flat, flat, flat, 1, 2, 3), 0); !math.IsNaN(v) {
		t.Errorf("UO over a flat range = %v, want NaN", v)
	}
	if v := Last(CCI(flat, 3), 0); !math.IsNaN(v) {
		t.Errorf("CCI over a flat range = %v, want NaN", v)
	}
}

func TestIchimoku(t *testing.T) {
	t.Parallel()
	n := 60
	h, l := make([]float64, n), make([]float64, n)
	for i := range n {
		h[i], l[i] = float64(i+2), float64(i)
	}
	ic := Ichimoku(h, l, 9, 26, 52)
	// Last bar 59: conv = (61 + 51)/2 = 56, base = (61 + 34)/2 = 47.5,
	// spanA = 51.75, spanB = (61 + 8)/2 = 34.5.
	if Last(ic.Conversion, 0) != 56 || Last(ic.Base, 0) != 47.5 || Last(ic.SpanA, 0) != 51.75 || Last(ic.SpanB, 0) != 34.5 {
		t.Errorf("Ichimoku = %v %v %v %v", Last(ic.Conversion, 0), Last(ic.Base, 0), Last(ic.SpanA, 0), Last(ic.SpanB, 0))
	}
	if !math.IsNaN(ic.SpanB[50]) || math.IsNaN(ic.SpanB[51]) {
		t.Error("spanB must start at bar 51")
	}
}

func TestSwingPivots(t *testing.T) {
	t.Parallel()
	h := []float64{1, 2, 5, 2, 1, 2, 3, 3, 2, 1}
	l := []float64{0, 1, 4, 1, 0, 1, 2, 2, 1, 0}
	got := SwingPivots(h, l, 2, 2)
	want := []Pivot{{2, 5, true}, {4, 0, false}, {6, 3, true}}
	if len(got) != len(want) {
		t.Fatalf("pivots = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pivot %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// SwingPivots equals its definition, written out plainly, on walks with
// many ties (prices rounded), gaps (NaN) and several window sizes (an
// empty side included, where a gap can be a pivot).
func TestSwingPivotsMatchDefinition(t *testing.T) {
	t.Parallel()
	beats := func(x []float64, i, left, right int, gt func(a, b float64) bool) bool {
		for j := i - left; j < i; j++ {
			if !gt(x[i], x[j]) {
				return false
			}
		}
		for j := i + 1; j <= i+right; j++ {
			if gt(x[j], x[i]) {
				return false
			}
		}
		return true
	}
	for seed := range uint64(6) {
		s := randomWalk(400, seed)
		high, low := append([]float64(nil), s.High...), append([]float64(nil), s.Low...)
		for i := range high {
			high[i], low[i] = math.Round(high[i]), math.Round(low[i])
		}
		high[50], low[120] = nan, nan
		for _, w := range [][2]int{{0, 2}, {2, 0}, {1, 1}, {2, 2}, {3, 1}, {1, 4}, {5, 5}} {
			var want []Pivot
			for i := w[0]; i+w[1] < len(high); i++ {
				if beats(high, i, w[0], w[1], func(a, b float64) bool { return a > b }) {
					want = append(want, Pivot{Index: i, Price: high[i], High: true})
				}
				if beats(low, i, w[0], w[1], func(a, b float64) bool { return a < b }) {
					want = append(want, Pivot{Index: i, Price: low[i]})
				}
			}
			same := func(a, b Pivot) bool {
				return a.Index == b.Index && a.High == b.High && (a.Price == b.Price || math.IsNaN(a.Price) && math.IsNaN(b.Price))
			}
			if got := SwingPivots(high, low, w[0], w[1]); !slices.EqualFunc(got, want, same) || len(want) == 0 {
				t.Fatalf("seed %d, window %v: %d pivots, want %d (%v)", seed, w, len(got), len(want), want)
			}
		}
	}
}

func TestLast(t *testing.T) {
	t.Parallel()
	x := []float64{1, 2, 3}
	if Last(x, 0) != 3 || Last(x, 2) != 1 || !math.IsNaN(Last(x, 3)) || !math.IsNaN(Last(nil, 0)) {
		t.Error("Last indexes from the end and returns NaN out of range")
	}
}

func TestHighestLowestMatchNaive(t *testing.T) {
	t.Parallel()
	s := randomWalk(300, 5)
	x := append([]float64(nil), s.Close...)
	x[100] = nan // a gap: windows holding it are NaN
	for _, n := range []int{1, 3, 14, 52} {
		hh, ll := Highest(x, n), Lowest(x, n)
		for i := range x {
			wantH, wantL := nan, nan
			if i >= n-1 {
				wantH, wantL = math.Inf(-1), math.Inf(1)
				for j := i - n + 1; j <= i; j++ {
					if math.IsNaN(x[j]) {
						wantH, wantL = nan, nan
						break
					}
					wantH, wantL = math.Max(wantH, x[j]), math.Min(wantL, x[j])
				}
			}
			if !near(hh[i], wantH, 0) || !near(ll[i], wantL, 0) {
				t.Fatalf("n=%d i=%d: highest %v lowest %v, want %v %v", n, i, hh[i], ll[i], wantH, wantL)
			}
		}
	}
}

func TestEMALastMatchesEMA(t *testing.T) {
	t.Parallel()
	s := randomWalk(500, 9)
	for _, n := range []int{1, 10, 13, 50, 200, 500} {
		if got, want := EMALast(s.Close, n), Last(EMA(s.Close, n), 0); got != want {
			t.Errorf("EMALast(%d) = %v, EMA %v", n, got, want)
		}
	}
	if !math.IsNaN(EMALast(s.Close[:5], 10)) {
		t.Error("EMALast of a short series must be NaN")
	}
}

// The scorer computes bounded-window indicators on a tail of the series;
// their latest values must equal those over the whole series.
func TestTailGivesSameLatestValues(t *testing.T) {
	t.Parallel()
	s := randomWalk(500, 13)
	w := s.Tail(40)
	if w.Len() != 40 || s.Tail(1000).Len() != 500 {
		t.Fatal("Tail length")
	}
	for i := range 3 {
		k, d := Stoch(s.High, s.Low, s.Close, 14, 3, 3)
		wk, wd := Stoch(w.High, w.Low, w.Close, 14, 3, 3)
		pairs := [][2]float64{
			{Last(k, i), Last(wk, i)}, {Last(d, i), Last(wd, i)},
			{Last(CCI(s.Close, 20), i), Last(CCI(w.Close, 20), i)},
			{Last(WilliamsR(s.High, s.Low, s.Close, 14), i), Last(WilliamsR(w.High, w.Low, w.Close, 14), i)},
			{Last(AwesomeOscillator(s.High, s.Low, 5, 34), i), Last(AwesomeOscillator(w.High, w.Low, 5, 34), i)},
			{Last(UltimateOscillator(s.High, s.Low, s.Close, 7, 14, 28), i), Last(UltimateOscillator(w.High, w.Low, w.Close, 7, 14, 28), i)},
			{Last(HMA(s.Close, 9), i), Last(HMA(w.Close, 9), i)},
		}
		for j, p := range pairs {
			if !near(p[0], p[1], 1e-9) {
				t.Errorf("bar -%d indicator %d: full %v, tail %v", i, j, p[0], p[1])
			}
		}
	}
}
