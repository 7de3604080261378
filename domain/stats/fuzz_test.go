package stats

import (
	"encoding/binary"
	"math"
	"testing"
)

// floatsFrom turns fuzz bytes into float64s, including NaN, Inf, zero,
// negatives and subnormals, which is what the outputs must survive.
func floatsFrom(b []byte) []float64 {
	out := make([]float64, 0, len(b)/8)
	for ; len(b) >= 8; b = b[8:] {
		out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return out
}

func bytesOf(xs ...float64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func FuzzWilson(f *testing.F) {
	for _, s := range [][2]int{{8, 10}, {0, 0}, {0, 10}, {10, 10}, {-5, 3}, {7, 2}, {1, math.MaxInt}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, k, n int) {
		low, high := Wilson(k, n)
		if math.IsNaN(low) || math.IsNaN(high) || low < 0 || high > 1 || low > high {
			t.Fatalf("Wilson(%d, %d) = %v..%v", k, n, low, high)
		}
		if n > 0 {
			p := float64(min(max(k, 0), n)) / float64(n)
			if p < low-1e-9 || p > high+1e-9 {
				t.Fatalf("Wilson(%d, %d) = %v..%v does not contain %v", k, n, low, high, p)
			}
		}
	})
}

func FuzzPearson(f *testing.F) {
	f.Add(bytesOf(1, 2, 3, 4), bytesOf(2, 4, 6, 8))
	f.Add(bytesOf(1e308, -1e308, 5), bytesOf(-1e308, 1e308, 1))
	f.Add(bytesOf(math.NaN(), math.Inf(1), 0), bytesOf(1, 2, 3))
	f.Add(bytesOf(5e-324, 0, 5e-324), bytesOf(1, 2, 3))
	f.Fuzz(func(t *testing.T, xb, yb []byte) {
		r := Pearson(floatsFrom(xb), floatsFrom(yb))
		if math.IsNaN(r) || r < -1 || r > 1 {
			t.Fatalf("Pearson = %v", r)
		}
	})
}

// FuzzSeries drives a close series through the whole pipeline a replay
// worker uses and checks no record carries NaN, Inf or a rate outside [0,1].
func FuzzSeries(f *testing.F) {
	f.Add(bytesOf(100, 101, 99, 105, 104, 110, 90, 91), 1)
	f.Add(bytesOf(1e-300, 1e300, 1e-300, 1e300, 5), 2)
	f.Add(bytesOf(0, -1, math.NaN(), math.Inf(1), 3, 3, 3), 1)
	f.Add(bytesOf(math.MaxFloat64, 5e-324, math.MaxFloat64, 1), 1)
	f.Fuzz(func(t *testing.T, b []byte, h int) {
		closes := floatsFrom(b)
		h = 1 + abs0(h)%8
		med, ok := MedianAbsMove(closes, h)
		if ok && (!isFinite(med) || med < 0) {
			t.Fatalf("median abs move %v", med)
		}
		var va VerdictAccumulator
		var fa FactorAccumulator
		for i := range closes {
			r, ok := ForwardReturn(closes, i, h)
			if !ok {
				continue
			}
			if !isFinite(r) {
				t.Fatalf("ForwardReturn(%d, %d) = %v with ok", i, h, r)
			}
			if err := va.Add(i, Verdicts[i%3], h, r, med); err != nil {
				t.Fatal(err)
			}
			if err := fa.Add(i, "F", h, i%3-1, closes[i], r); err != nil && isFinite(closes[i]) {
				t.Fatal(err)
			}
			if err := fa.AddMove(i, h, r); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range Verdicts {
			if rate, _, ok := BaseRate(v, closes, h); ok && (rate < 0 || rate > 1) {
				t.Fatalf("base rate %v", rate)
			}
		}
		for _, s := range va.Results(SourceBacktest) {
			checkFinite(t, s.AvgReturnPct)
			checkUnit(t, s.WinRateCILow, s.WinRateCIHigh)
			for _, p := range []*float64{s.WinRate, s.BaseRate} {
				if p != nil {
					checkUnit(t, *p)
				}
			}
			if (s.WinRate == nil) != (s.SampleSize == 0) {
				t.Fatalf("win rate %v with sample size %d", s.WinRate, s.SampleSize)
			}
			checkEffective(t, s.EffectiveSampleSize, s.SampleSize)
			if s.PValue != nil {
				checkUnit(t, *s.PValue)
			}
		}
		for _, s := range fa.Results(SourceBacktest) {
			checkUnit(t, s.HitRate, s.HitRateCILow, s.HitRateCIHigh)
			if math.IsNaN(s.Correlation) || s.Correlation < -1 || s.Correlation > 1 {
				t.Fatalf("correlation %v", s.Correlation)
			}
			checkEffective(t, s.EffectiveSampleSize, s.SampleSize)
			for _, p := range []*float64{s.BaseRate, s.PValue, s.PValueAdjusted} {
				if p != nil {
					checkUnit(t, *p)
				}
			}
			if (s.PValue == nil) != (s.PValueAdjusted == nil) || (s.PValue != nil && *s.PValueAdjusted < *s.PValue) {
				t.Fatalf("p-value %v adjusted to %v", s.PValue, s.PValueAdjusted)
			}
		}
	})
}

// checkEffective: an effective sample size is never negative nor above
// the observations it stands for.
func checkEffective(t *testing.T, eff, n int) {
	t.Helper()
	if eff < 0 || eff > n || (n > 0 && eff == 0) {
		t.Fatalf("effective sample size %d of %d observations", eff, n)
	}
}

func checkFinite(t *testing.T, xs ...float64) {
	t.Helper()
	for _, x := range xs {
		if !isFinite(x) {
			t.Fatalf("non-finite output %v", x)
		}
	}
}

func checkUnit(t *testing.T, xs ...float64) {
	t.Helper()
	for _, x := range xs {
		if math.IsNaN(x) || x < 0 || x > 1 {
			t.Fatalf("output %v outside [0,1]", x)
		}
	}
}

func abs0(h int) int {
	if h < 0 {
		return -(h + 1)
	}
	return h
}
