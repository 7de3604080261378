package stats

import (
	"math"
	"testing"
)

func approx(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) {
		t.Errorf("%s = %v, want %v (±%v)", name, got, want, tol)
	}
}

func nan() float64 { return math.NaN() }

func inf() float64 { return math.Inf(1) }
