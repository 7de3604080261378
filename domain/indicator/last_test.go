package indicator

import (
	"math"
	"math/rand/v2"
	"testing"
)

// same reports whether a and b are the same float64, bit for bit (NaN
// equal to NaN).
func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// The latest-value functions give exactly the last values of their series
// functions, bit for bit, on random series of every length from empty to
// past every warm-up, with flat stretches (zero true range: NaN DI).
func TestLastValuesMatchTheSeries(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for n := 0; n <= 120; n++ {
		for trial := range 5 {
			high, low, close := make([]float64, n), make([]float64, n), make([]float64, n)
			p := 1 + r.Float64()*1000
			for i := range n {
				if trial == 4 && i%7 < 3 { // flat bars
					high[i], low[i], close[i] = p, p, p
					continue
				}
				p *= math.Exp(r.NormFloat64() * 0.02)
				close[i] = p
				high[i], low[i] = p*(1+r.Float64()*0.01), p*(1-r.Float64()*0.01)
			}
			plus, minus, adx := DMI(high, low, close, 14, 14)
			gp, gm, ga, ga1 := DMILast(high, low, close, 14, 14)
			if !same(gp, Last(plus, 0)) || !same(gm, Last(minus, 0)) || !same(ga, Last(adx, 0)) || !same(ga1, Last(adx, 1)) {
				t.Fatalf("n=%d trial %d: DMILast = %v %v %v %v, DMI's last = %v %v %v %v", n, trial, gp, gm, ga, ga1,
					Last(plus, 0), Last(minus, 0), Last(adx, 0), Last(adx, 1))
			}
			macd, sig, _ := MACD(close, 12, 26, 9)
			if gm, gs := MACDLast(close, 12, 26, 9); !same(gm, Last(macd, 0)) || !same(gs, Last(sig, 0)) {
				t.Fatalf("n=%d trial %d: MACDLast = %v %v, MACD's last = %v %v", n, trial, gm, gs, Last(macd, 0), Last(sig, 0))
			}
			bull, bear := BullBearPower(high, low, close, 13)
			b0, b1, r0, r1 := BullBearPowerLast(high, low, close, 13)
			if !same(b0, Last(bull, 0)) || !same(b1, Last(bull, 1)) || !same(r0, Last(bear, 0)) || !same(r1, Last(bear, 1)) {
				t.Fatalf("n=%d trial %d: BullBearPowerLast = %v %v %v %v, BullBearPower's last = %v %v %v %v", n, trial, b0, b1, r0, r1,
					Last(bull, 0), Last(bull, 1), Last(bear, 0), Last(bear, 1))
			}
			ema := EMA(close, 13)
			if e0, e1 := EMALast2(close, 13); !same(e0, Last(ema, 0)) || !same(e1, Last(ema, 1)) {
				t.Fatalf("n=%d trial %d: EMALast2 = %v %v, EMA's last = %v %v", n, trial, e0, e1, Last(ema, 0), Last(ema, 1))
			}
		}
	}
}

// EMALasts is EMALast of every length, bit for bit: lengths shorter and
// longer than the series, repeated, 1, 0 and negative, more than it runs
// side by side, over random walks of every scale.
func TestEMALastsIsEMALast(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	sets := [][]int{{10, 20, 30, 50, 100, 200}, {1}, {0, -3, 5}, {13, 13}, {500, 499, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {}}
	for c := range 300 {
		x := make([]float64, r.IntN(520))
		p := math.Pow(10, -6+11*r.Float64())
		for i := range x {
			p *= math.Exp(r.NormFloat64() * 0.02)
			x[i] = p
		}
		for _, ns := range sets {
			out := make([]float64, len(ns))
			EMALasts(x, ns, out)
			for i, n := range ns {
				if want := EMALast(x, n); math.Float64bits(out[i]) != math.Float64bits(want) && !(math.IsNaN(out[i]) && math.IsNaN(want)) {
					t.Fatalf("case %d, %d values, lengths %v: EMALasts %v for %d, EMALast %v", c, len(x), ns, out[i], n, want)
				}
			}
		}
	}
}

func BenchmarkEMALasts(b *testing.B) {
	x := make([]float64, 500)
	for i := range x {
		x[i] = 100 + math.Sin(float64(i)/7)
	}
	ns := []int{10, 20, 30, 50, 100, 200}
	out := make([]float64, len(ns))
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			EMALasts(x, ns, out)
		}
	})
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			for i, n := range ns {
				out[i] = EMALast(x, n)
			}
		}
	})
}

// IchimokuLast reads what the series give, bit for bit: every length of
// series around the windows, lines of every length, with NaN now and
// then (a window that holds one is NaN) and flat stretches (equal
// extremes).
func TestIchimokuLastIsIchimoku(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for c := range 2000 {
		n := r.IntN(120)
		high, low := make([]float64, n), make([]float64, n)
		p := 100.0
		for i := range high {
			if r.IntN(5) > 0 {
				p *= math.Exp(r.NormFloat64() * 0.02)
			}
			high[i], low[i] = p*(1+r.Float64()*0.01), p*(1-r.Float64()*0.01)
			if r.IntN(4) == 0 {
				high[i], low[i] = p, p
			}
		}
		if n > 0 && r.IntN(5) == 0 {
			high[r.IntN(n)] = math.NaN()
		}
		if n > 0 && r.IntN(5) == 0 {
			low[r.IntN(n)] = math.NaN()
		}
		conv, base, spanB, disp := 1+r.IntN(12), 1+r.IntN(30), 1+r.IntN(60), r.IntN(40)
		if c%3 == 0 {
			conv, base, spanB, disp = 9, 26, 52, 26
		}
		ic := Ichimoku(high, low, conv, base, spanB)
		want := [5]float64{Last(ic.Conversion, 0), Last(ic.Base, 0), Last(ic.SpanA, disp), Last(ic.SpanB, disp), Last(ic.SpanB, 0)}
		var got [5]float64
		got[0], got[1], got[2], got[3], got[4] = IchimokuLast(high, low, conv, base, spanB, disp)
		for i := range got {
			if !same(got[i], want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
				t.Fatalf("case %d (%d bars, %d/%d/%d, displaced %d): value %d is %v, the series give %v", c, n, conv, base, spanB, disp, i, got[i], want[i])
			}
		}
	}
}
