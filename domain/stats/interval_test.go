package stats

import "testing"

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

func TestIsSignificant(t *testing.T) {
	t.Parallel()
	if IsSignificant(SignificantSampleSize - 1) {
		t.Error("29 observations are significant")
	}
	if !IsSignificant(SignificantSampleSize) {
		t.Error("30 observations are not significant")
	}
}
