package stats

import (
	"math"
	"testing"
)

func TestForwardReturn(t *testing.T) {
	t.Parallel()
	closes := []float64{100, 110, 99, 0, 121}
	tests := []struct {
		name   string
		i, h   int
		want   float64
		wantOK bool
	}{
		{"one bar up", 0, 1, 10, true},
		{"one bar down", 1, 1, -10, true},
		{"two bars", 0, 2, -1, true},
		{"last bar has no future", 4, 1, 0, false},
		{"exactly enough future", 1, 3, 10, true},
		{"past the end", 2, 3, 0, false},
		{"zero horizon", 0, 0, 0, false},
		{"negative index", -1, 1, 0, false},
		{"zero close at start", 3, 1, 0, false},
		{"zero close at end", 2, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ForwardReturn(closes, tt.i, tt.h)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			approx(t, "return", got, tt.want, 1e-9)
		})
	}
	if _, ok := ForwardReturn([]float64{math.NaN(), 1}, 0, 1); ok {
		t.Error("NaN close gave ok")
	}
	if _, ok := ForwardReturn(nil, 0, 1); ok {
		t.Error("empty series gave ok")
	}
}

func TestForwardReturns(t *testing.T) {
	t.Parallel()
	got := ForwardReturns([]float64{100, 110, 99, 0, 121}, 1)
	want := []float64{10, -10} // 99→0 and 0→121 are not defined
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		approx(t, "return", got[i], want[i], 1e-9)
	}
}

func TestMedianAbsMove(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		closes []float64
		h      int
		want   float64
		wantOK bool
	}{
		// 1-bar moves: +10, -10, +20, -50 → |.| sorted 10,10,20,50 → 15.
		{"even count", []float64{100, 110, 99, 118.8, 59.4}, 1, 15, true},
		// 1-bar moves: +10, -10, +20 → 10,10,20 → 10.
		{"odd count", []float64{100, 110, 99, 118.8}, 1, 10, true},
		// 2-bar moves: 100→99 = -1, 110→118.8 = +8 → 4.5.
		{"two bars", []float64{100, 110, 99, 118.8}, 2, 4.5, true},
		{"flat", []float64{5, 5, 5}, 1, 0, true},
		{"too short", []float64{100, 110}, 2, 0, false},
		{"empty", nil, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := MedianAbsMove(tt.closes, tt.h)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			approx(t, "median", got, tt.want, 1e-9)
		})
	}
}
