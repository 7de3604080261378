package stats

import (
	"math"
	"math/rand/v2"
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

// sameFloat reports whether two optional numbers are both nil or equal.
func sameFloat(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// newRand returns a deterministic generator: simulations are never flaky.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }
