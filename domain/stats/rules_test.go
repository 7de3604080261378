package stats

import "testing"

func TestVerdictWins(t *testing.T) {
	t.Parallel()
	tests := []struct {
		verdict string
		ret     float64
		median  float64
		want    bool
	}{
		{VerdictGrowth, 0.01, 1, true},
		{VerdictGrowth, 0, 1, false}, // flat is not growth
		{VerdictGrowth, -0.01, 1, false},
		{VerdictDecline, -0.01, 1, true},
		{VerdictDecline, 0, 1, false}, // flat is not decline
		{VerdictDecline, 0.01, 1, false},
		{VerdictNeutral, 0.99, 1, true},
		{VerdictNeutral, -0.99, 1, true},
		{VerdictNeutral, 1, 1, false}, // |r| equal to the median loses
		{VerdictNeutral, -1, 1, false},
		{VerdictNeutral, 0, 0, false}, // flat asset: nothing is below a 0 median
		{"sideways", 0.5, 1, false},
	}
	for _, tt := range tests {
		if got := VerdictWins(tt.verdict, tt.ret, tt.median); got != tt.want {
			t.Errorf("VerdictWins(%q, %v, %v) = %v, want %v", tt.verdict, tt.ret, tt.median, got, tt.want)
		}
	}
}

func TestFactorHits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sign        int
		ret         float64
		hit, counts bool
	}{
		{1, 2, true, true},
		{1, -2, false, true},
		{1, 0, false, true}, // zero return is a miss
		{-1, -2, true, true},
		{-1, 2, false, true},
		{-1, 0, false, true},
		{0, 2, false, false}, // neutral is not counted
		{3, 1, true, true},   // any positive sign is bullish
	}
	for _, tt := range tests {
		hit, counted := FactorHits(tt.sign, tt.ret)
		if hit != tt.hit || counted != tt.counts {
			t.Errorf("FactorHits(%d, %v) = %v, %v; want %v, %v", tt.sign, tt.ret, hit, counted, tt.hit, tt.counts)
		}
	}
}

func TestSentimentSign(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"bullish": 1, "bearish": -1, "neutral": 0, "": 0, "Bullish": 0} {
		if got := SentimentSign(s); got != want {
			t.Errorf("SentimentSign(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestBaseRate(t *testing.T) {
	t.Parallel()
	// 1-bar moves: +25, -20, +50, -50, 0 → median |move| 25.
	closes := []float64{100, 125, 100, 150, 75, 75}
	tests := []struct {
		verdict string
		want    float64
	}{
		{VerdictGrowth, 2.0 / 5},  // the flat move is not growth
		{VerdictDecline, 2.0 / 5}, // nor decline
		{VerdictNeutral, 2.0 / 5}, // -20 and 0; +25 equals the median and loses
	}
	for _, tt := range tests {
		got, n, ok := BaseRate(tt.verdict, closes, 1)
		if !ok || n != 5 {
			t.Fatalf("BaseRate(%q): n = %d, ok = %v; want 5, true", tt.verdict, n, ok)
		}
		approx(t, "base rate "+tt.verdict, got, tt.want, 1e-12)
	}
	if _, _, ok := BaseRate(VerdictGrowth, []float64{1}, 1); ok {
		t.Error("BaseRate on one close gave ok")
	}
}
