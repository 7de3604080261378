package domain_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// TestBarsValidateIsValidateCandles holds the columns' check to the
// candles' one: the same verdict and the same error for every way a
// series can be wrong, wherever in the series it is.
func TestBarsValidateIsValidateCandles(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	good := func() []domain.Candle {
		cs := make([]domain.Candle, 5)
		for i := range cs {
			cs[i] = domain.Candle{Time: t0.Add(time.Duration(i) * time.Hour), Open: 10, High: 12, Low: 9, Close: 11, Volume: 100}
		}
		return cs
	}
	breaks := map[string]func(*domain.Candle, *domain.Candle){
		"none":          func(*domain.Candle, *domain.Candle) {},
		"nan open":      func(c, _ *domain.Candle) { c.Open = math.NaN() },
		"inf high":      func(c, _ *domain.Candle) { c.High = math.Inf(1) },
		"nan volume":    func(c, _ *domain.Candle) { c.Volume = math.NaN() },
		"zero time":     func(c, _ *domain.Candle) { c.Time = time.Time{} },
		"zero close":    func(c, _ *domain.Candle) { c.Close = 0 },
		"negative low":  func(c, _ *domain.Candle) { c.Low = -1 },
		"negative vol":  func(c, _ *domain.Candle) { c.Volume = -1 },
		"high < close":  func(c, _ *domain.Candle) { c.High = 10.5 },
		"low > open":    func(c, _ *domain.Candle) { c.Low = 10.5 },
		"same time":     func(c, prev *domain.Candle) { c.Time = prev.Time },
		"earlier time":  func(c, prev *domain.Candle) { c.Time = prev.Time.Add(-time.Minute) },
		"two faults":    func(c, prev *domain.Candle) { c.Time, c.Close = prev.Time, math.NaN() },
		"zero volume":   func(c, _ *domain.Candle) { c.Volume = 0 },
		"flat bar":      func(c, _ *domain.Candle) { c.Open, c.High, c.Low, c.Close = 11, 11, 11, 11 },
		"no volume nan": func(c, _ *domain.Candle) { c.Volume, c.High = 0, math.Inf(-1) },
	}
	for name, br := range breaks {
		for at := 0; at < 5; at++ {
			cs := good()
			prev := &domain.Candle{Time: t0.Add(-time.Hour)} // for the first bar: an order break is none
			if at > 0 {
				prev = &cs[at-1]
			}
			br(&cs[at], prev)
			want := domain.ValidateCandles(cs)
			got := domain.BarsOf(cs).Validate()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s at %d: Bars.Validate %v, ValidateCandles %v", name, at, got, want)
			}
			if name != "none" && name != "zero volume" && name != "flat bar" && (at > 0 || name != "same time" && name != "earlier time") && got == nil {
				t.Errorf("%s at %d: accepted", name, at)
			}
		}
	}
	if err := (&domain.Bars{Times: []int64{1}, Open: []float64{1}}).Validate(); err == nil {
		t.Error("bars of different lengths accepted")
	}
}

// TestBarsRoundTrip: candles by column and back are the same candles.
func TestBarsRoundTrip(t *testing.T) {
	cs := []domain.Candle{
		{Time: time.Date(2026, 3, 1, 0, 0, 0, 123000, time.UTC), Open: 1, High: 2, Low: 0.5, Close: 1.5, Volume: 7},
		{Time: time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), Open: 1.5, High: 1.5, Low: 1.5, Close: 1.5},
	}
	b := domain.BarsOf(cs)
	if b.Len() != 2 {
		t.Fatalf("Len %d", b.Len())
	}
	back := b.Candles()
	for i := range cs {
		if back[i] != cs[i] {
			t.Errorf("candle %d: %+v, want %+v", i, back[i], cs[i])
		}
	}
}
