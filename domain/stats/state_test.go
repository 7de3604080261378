package stats

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Accumulators stored as JSON and read back give the same records, bit
// for bit, and a day merged into an empty accumulator is copied exactly:
// what the statistics job's incremental state relies on.
func TestStateRoundTripIsExact(t *testing.T) {
	t.Parallel()
	r := newRand(7)
	var va VerdictAccumulator
	var fa FactorAccumulator
	for day := 100; day < 160; day++ {
		for range 5 {
			ret := r.NormFloat64() * 3
			if err := va.Add(day, Verdicts[r.IntN(3)], []int{1, 5}[r.IntN(2)], ret, 1.5); err != nil {
				t.Fatal(err)
			}
			if err := fa.AddMove(day, 1, ret); err != nil {
				t.Fatal(err)
			}
			if err := fa.Add(day, []string{"rsi_14", "macd"}[r.IntN(2)], 1, r.IntN(3)-1, r.NormFloat64(), ret); err != nil {
				t.Fatal(err)
			}
		}
	}
	vb, err := json.Marshal(&va)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := json.Marshal(&fa)
	if err != nil {
		t.Fatal(err)
	}
	var va2 VerdictAccumulator
	var fa2 FactorAccumulator
	if err := json.Unmarshal(vb, &va2); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fb, &fa2); err != nil {
		t.Fatal(err)
	}
	var va3 VerdictAccumulator
	var fa3 FactorAccumulator
	va3.Merge(&va2)
	fa3.Merge(&fa2)
	if diff := cmp.Diff(va.Results(SourceBacktest), va3.Results(SourceBacktest)); diff != "" {
		t.Errorf("verdict records changed through JSON and a merge (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(fa.Results(SourceBacktest), fa3.Results(SourceBacktest)); diff != "" {
		t.Errorf("factor records changed through JSON and a merge (-before +after):\n%s", diff)
	}
	first, last, ok := va3.Window()
	if !ok || first != 100 || last != 159 {
		t.Errorf("window %d..%d (%v), want 100..159", first, last, ok)
	}
	if err := json.Unmarshal([]byte(`{"cells":`), &va2); err == nil {
		t.Error("truncated state read without an error")
	}
}

// The trailing median of a bar is the median of the newest MedianWindow
// moves completed by it, the same whichever bar the computation starts at.
func TestTrailingMedianMoves(t *testing.T) {
	t.Parallel()
	r := newRand(9)
	closes := make([]float64, 900)
	p := 100.0
	for i := range closes {
		p *= math.Exp(r.NormFloat64() * 0.02)
		closes[i] = p
	}
	closes[500] = math.NaN() // a bad price: its moves are skipped
	for _, h := range []int{1, 21} {
		full := TrailingMedianMoves(closes, h, 0)
		from := TrailingMedianMoves(closes, h, 600)
		for i := range closes {
			var moves []float64
			for j := max(0, i-h-MedianWindow+1); j+h <= i; j++ {
				if ret, ok := ForwardReturn(closes, j, h); ok {
					moves = append(moves, math.Abs(ret))
				}
			}
			want := math.NaN()
			if len(moves) >= MinMedianMoves {
				want, _ = median(slices.Clone(moves))
			}
			if got := full[i]; got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("h=%d bar %d: %v, want %v", h, i, got, want)
			}
			if i >= 600 && from[i] != full[i] {
				t.Fatalf("h=%d bar %d: %v from bar 600, %v from 0", h, i, from[i], full[i])
			}
		}
	}
}
