package indicator

import (
	"slices"
	"testing"
)

// bars builds a Series from {open, high, low, close} rows.
func bars(rows ...[4]float64) Series {
	var s Series
	for _, r := range rows {
		s.Open = append(s.Open, r[0])
		s.High = append(s.High, r[1])
		s.Low = append(s.Low, r[2])
		s.Close = append(s.Close, r[3])
		s.Volume = append(s.Volume, 1)
	}
	return s
}

// downtrend and uptrend are five ordinary bars before the pattern bars.
var (
	downtrend = [][4]float64{{110, 111, 107, 108}, {108, 109, 105, 106}, {106, 107, 103, 104}, {104, 105, 101, 102}, {102, 103, 99, 100}}
	uptrend   = [][4]float64{{90, 93, 89, 92}, {92, 95, 91, 94}, {94, 97, 93, 96}, {96, 99, 95, 98}, {98, 101, 97, 100}}
)

func withTrend(trend [][4]float64, rows ...[4]float64) Series {
	return bars(append(slices.Clone(trend), rows...)...)
}

func TestDetectPatterns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    Series
		want []Pattern
	}{
		{"bullish engulfing", withTrend(downtrend, [4]float64{100, 100.5, 98.5, 99}, [4]float64{98.8, 101.5, 98.5, 101.2}), []Pattern{BullishEngulfing}},
		{"bearish engulfing", withTrend(uptrend, [4]float64{100, 101.5, 99.5, 101}, [4]float64{101.2, 101.5, 98.5, 99.5}), []Pattern{BearishEngulfing}},
		// Small body at the top, lower shadow 4× the body, after a decline.
		{"hammer", withTrend(downtrend, [4]float64{99.5, 100.1, 97.5, 100}), []Pattern{Hammer}},
		// The same candle after a rise is a hanging man, not reported.
		{"no hammer in uptrend", withTrend(uptrend, [4]float64{99.5, 100.1, 97.5, 100}), nil},
		{"shooting star", withTrend(uptrend, [4]float64{100.5, 103, 99.9, 100}), []Pattern{ShootingStar}},
		{"doji", withTrend(uptrend, [4]float64{100, 102, 98, 100.1}), []Pattern{Doji}},
		{"morning star", withTrend(downtrend, [4]float64{100, 100.5, 95, 95.5}, [4]float64{95.2, 95.8, 94.5, 95}, [4]float64{95.5, 99, 95.3, 98.8}), []Pattern{MorningStar}},
		{"evening star", withTrend(uptrend, [4]float64{100, 105, 99.8, 104.5}, [4]float64{104.8, 105.5, 104.2, 105}, [4]float64{104.5, 104.7, 101, 101.2}), []Pattern{EveningStar}},
		{"three white soldiers", withTrend(downtrend, [4]float64{100, 102.2, 99.8, 102}, [4]float64{101, 104.3, 100.9, 104}, [4]float64{103, 106.2, 102.9, 106}), []Pattern{ThreeWhiteSoldiers}},
		{"three black crows", withTrend(uptrend, [4]float64{100, 100.2, 97.8, 98}, [4]float64{99, 99.1, 95.8, 96}, [4]float64{97, 97.1, 93.7, 94}), []Pattern{ThreeBlackCrows}},
		{"plain candle", withTrend(uptrend, [4]float64{100, 102.5, 99.5, 102}), nil},
		// Engulfing needs a strictly larger body.
		{"equal bodies do not engulf", withTrend(downtrend, [4]float64{100, 100.5, 98.5, 99}, [4]float64{99, 100.5, 98.5, 100}), nil},
		{"zero-range bar", withTrend(uptrend, [4]float64{100, 100, 100, 100}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := DetectPatterns(tt.s, tt.s.Len()-1)
			if !slices.Equal(got, tt.want) {
				t.Errorf("DetectPatterns = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDetectPatternsOutOfRange(t *testing.T) {
	t.Parallel()
	s := bars([4]float64{1, 2, 0.5, 1.5})
	if DetectPatterns(s, 5) != nil || DetectPatterns(s, -1) != nil {
		t.Error("out-of-range index must yield no patterns")
	}
	if got := DetectPatterns(s, 0); got != nil {
		t.Errorf("single bar = %v", got)
	}
}

func TestPatternDirection(t *testing.T) {
	t.Parallel()
	for _, p := range Patterns {
		d := p.Direction()
		if d < -1 || d > 1 || (p == Doji) != (d == 0) {
			t.Errorf("%s direction %d", p, d)
		}
	}
}
