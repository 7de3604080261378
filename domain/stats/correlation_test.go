package stats

import (
	"math"
	"testing"
)

func TestPearson(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		x, y []float64
		want float64
	}{
		{"perfect positive", []float64{1, 2, 3, 4}, []float64{2, 4, 6, 8}, 1},
		{"perfect negative", []float64{1, 2, 3, 4}, []float64{8, 6, 4, 2}, -1},
		// Hand computed: mean x 3, mean y 4; Sxy 6, Sxx 10, Syy 6 → 6/√60.
		{"known value", []float64{1, 2, 3, 4, 5}, []float64{2, 4, 5, 4, 5}, 0.7745966692414834},
		{"empty", nil, nil, 0},
		{"one pair", []float64{1}, []float64{2}, 0},
		{"constant x", []float64{3, 3, 3}, []float64{1, 2, 3}, 0},
		{"constant y", []float64{1, 2, 3}, []float64{7, 7, 7}, 0},
		{"longer y ignored", []float64{1, 2, 3}, []float64{1, 2, 3, -100}, 1},
		{"NaN pair skipped", []float64{1, math.NaN(), 2, 3}, []float64{1, 5, 2, 3}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			approx(t, "r", Pearson(tt.x, tt.y), tt.want, 1e-12)
		})
	}
}

func TestMomentsMergeMatchesOnePass(t *testing.T) {
	t.Parallel()
	x := []float64{1, 4, 2, 8, 5, 7, 3, 9, 6}
	y := []float64{2, 3, 2, 9, 4, 8, 1, 7, 6}
	var all, a, b moments
	for i := range x {
		all.add(x[i], y[i])
		if i < 4 {
			a.add(x[i], y[i])
		} else {
			b.add(x[i], y[i])
		}
	}
	a.merge(b)
	approx(t, "merged r", a.correlation(), all.correlation(), 1e-12)
	approx(t, "merged r vs Pearson", a.correlation(), Pearson(x, y), 1e-12)
}
