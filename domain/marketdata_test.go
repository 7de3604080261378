package domain

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Candle.Validate refuses every non-finite value of every field, a zero
// open time, a non-positive price, a negative volume and a high/low that
// do not bound the open and close; a valid candle passes.
func TestCandleValidate(t *testing.T) {
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ok := Candle{Time: at, Open: 10, High: 12, Low: 9, Close: 11, Volume: 0}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid candle: %v", err)
	}
	fields := []func(*Candle) *float64{
		func(c *Candle) *float64 { return &c.Open }, func(c *Candle) *float64 { return &c.High },
		func(c *Candle) *float64 { return &c.Low }, func(c *Candle) *float64 { return &c.Close },
		func(c *Candle) *float64 { return &c.Volume },
	}
	for i, f := range fields {
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			c := ok
			*f(&c) = v
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "non-finite") {
				t.Errorf("field %d = %v: %v, want a non-finite value refused", i, v, err)
			}
		}
	}
	for name, c := range map[string]Candle{
		"open time":    {Open: 10, High: 12, Low: 9, Close: 11},
		"non-positive": {Time: at, Open: 0, High: 12, Low: 9, Close: 11},
		"negative":     {Time: at, Open: 10, High: 12, Low: 9, Close: 11, Volume: -1},
		"bound":        {Time: at, Open: 10, High: 10.5, Low: 9, Close: 11},
	} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%+v: %v, want an error naming %q", c, err, name)
		}
	}
}
