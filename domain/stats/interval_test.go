package stats

import (
	"math"
	"testing"
)

func TestWilson(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		k, n      int
		low, high float64
	}{
		{"8 of 10", 8, 10, 0.490, 0.943},
		{"no trials", 0, 0, 0, 1},
		{"0 of 10", 0, 10, 0, 0.278},
		{"10 of 10", 10, 10, 0.722, 1},
		{"50 of 100", 50, 100, 0.404, 0.596},
		{"negative n", 3, -1, 0, 1},
		{"successes above n clamp", 12, 10, 0.722, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			low, high := Wilson(tt.k, tt.n)
			approx(t, "low", low, tt.low, 5e-4)
			approx(t, "high", high, tt.high, 5e-4)
		})
	}
}

func TestWilsonIntervalEffective(t *testing.T) {
	t.Parallel()
	low, high := Wilson(8, 10)
	l2, h2 := wilsonInterval(0.8, 10, Z95)
	if low != l2 || high != h2 {
		t.Errorf("wilsonInterval(0.8, 10, z) = %v..%v, Wilson(8, 10) = %v..%v", l2, h2, low, high)
	}
	// Fewer effective trials or a larger critical value widen it.
	l3, h3 := wilsonInterval(0.8, 2.5, Z95)
	l4, h4 := wilsonInterval(0.8, 10, tCritical95(4))
	if !(l3 < low && h3 > high && l4 < low && h4 > high) {
		t.Errorf("n 2.5: %v..%v, t(4): %v..%v; both should contain %v..%v", l3, h3, l4, h4, low, high)
	}
	for _, c := range []struct{ n, z float64 }{{0, Z95}, {-1, Z95}, {10, math.Inf(1)}, {nan(), Z95}} {
		if l, h := wilsonInterval(0.5, c.n, c.z); l != 0 || h != 1 {
			t.Errorf("wilsonInterval(0.5, %v, %v) = %v..%v, want 0..1", c.n, c.z, l, h)
		}
	}
}

func TestStudentT(t *testing.T) {
	t.Parallel()
	// Two-sided 95 % critical values from the tables.
	for df, want := range map[float64]float64{1: 12.7062047, 2: 4.30265273, 4: 2.77644511, 10: 2.22813885, 30: 2.04227246, 120: 1.97993040, 1e9: Z95} {
		approx(t, "t crit", tCritical95(df), want, 1e-6)
	}
	if !math.IsInf(tCritical95(0), 1) {
		t.Error("0 degrees of freedom have a critical value")
	}
	approx(t, "P(|T1| ≥ 1)", tTwoSidedP(1, 1), 0.5, 1e-12)
	approx(t, "P(|T10| ≥ 2)", tTwoSidedP(2, 10), 0.0733880347, 1e-9)
	approx(t, "P(|T10| ≥ 0)", tTwoSidedP(0, 10), 1, 1e-12)
	approx(t, "P(|T10| ≥ -2)", tTwoSidedP(-2, 10), 0.0733880347, 1e-9)
	approx(t, "P(|T5| ≥ ∞)", tTwoSidedP(math.Inf(1), 5), 0, 0)
	approx(t, "no df", tTwoSidedP(3, 0), 1, 0)
}

func TestBenjaminiHochberg(t *testing.T) {
	t.Parallel()
	// Sorted 0.005, 0.01, 0.03, 0.04 → ×4/rank 0.02, 0.02, 0.04, 0.04.
	got := BenjaminiHochberg([]float64{0.01, 0.04, 0.03, 0.005})
	for i, want := range []float64{0.02, 0.04, 0.04, 0.02} {
		approx(t, "adjusted", got[i], want, 1e-12)
	}
	// Monotone in the raw p-values, capped at 1, NaN as 1.
	got = BenjaminiHochberg([]float64{0.9, 0.8, nan(), 0.2})
	for i, want := range []float64{1, 1, 1, 0.8} {
		approx(t, "adjusted", got[i], want, 1e-12)
	}
	if len(BenjaminiHochberg(nil)) != 0 {
		t.Error("adjusting nothing gave something")
	}
}

// TestEstimateRateIndependentDays: one observation per day, no overlap, no
// other asset: the effective sample size is close to the observations and
// the interval close to the plain Wilson one.
func TestEstimateRateIndependentDays(t *testing.T) {
	t.Parallel()
	var tl tallies
	var days daySet
	r := newRand(11)
	k := 0
	for day := range 400 {
		win := r.Float64() < 0.6
		tl.add(day, win)
		days.add(day)
		if win {
			k++
		}
	}
	e := estimateRate(tl, days.calendar(), 1)
	if e.n != 400 || e.k != k || e.blocks != 200 || e.effN < 300 || e.effN > 400 {
		t.Errorf("estimate %+v, want 400 observations in 200 blocks worth 300..400", e)
	}
	low, high := Wilson(k, 400)
	approx(t, "low", e.low, low, 0.02)
	approx(t, "high", e.high, high, 0.02)
}

// TestEstimateRateExcludesIffPValue: the interval excludes a rate exactly
// when the p-value against it is below 0.05, so is_significant can be read
// off either.
func TestEstimateRateExcludesIffPValue(t *testing.T) {
	t.Parallel()
	r := newRand(5)
	for range 300 {
		var tl tallies
		var days daySet
		for day := range 5 + r.IntN(80) {
			days.add(day)
			for range r.IntN(4) {
				tl.add(day, r.Float64() < 0.55)
			}
		}
		e := estimateRate(tl, days.calendar(), 1+r.IntN(5))
		p0 := r.Float64()
		p, ok := e.pValue(p0)
		if !ok {
			if e.n != 0 {
				t.Fatalf("no p-value for %+v", e)
			}
			continue
		}
		// Skip knife-edge cases within rounding of the boundary.
		if math.Abs(p-0.05) < 1e-6 {
			continue
		}
		if (p < 0.05) != e.excludes(p0) {
			t.Fatalf("p-value %v against %v, interval %v..%v (%+v)", p, p0, e.low, e.high, e)
		}
	}
}
