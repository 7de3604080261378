package domain

import "time"

// Bars is a candle series by column, oldest first: the shape the scorer
// computes on and the scoring worker's candle cache keeps, so that a
// series read from the cache reaches the indicators without being turned
// into Candles and back. Every slice has the same length.
//
// Bars handed out by a cache are shared with it and with other readers:
// nothing may write into their slices.
type Bars struct {
	Times                          []int64 // open times, Unix microseconds (Postgres's precision)
	Open, High, Low, Close, Volume []float64
}

// BarsOf lays candles (oldest first) out by column, in one allocation.
func BarsOf(cs []Candle) *Bars {
	n := len(cs)
	buf := make([]float64, 5*n)
	b := &Bars{Times: make([]int64, n),
		Open: buf[0:n:n], High: buf[n : 2*n : 2*n], Low: buf[2*n : 3*n : 3*n], Close: buf[3*n : 4*n : 4*n], Volume: buf[4*n : 5*n : 5*n]}
	for i, c := range cs {
		b.Times[i] = c.Time.UnixMicro()
		b.Open[i], b.High[i], b.Low[i], b.Close[i], b.Volume[i] = c.Open, c.High, c.Low, c.Close, c.Volume
	}
	return b
}

// Len is the number of bars.
func (b *Bars) Len() int { return len(b.Times) }

// Time is bar i's open time, UTC.
func (b *Bars) Time(i int) time.Time { return time.UnixMicro(b.Times[i]).UTC() }

// Candle is bar i as a Candle.
func (b *Bars) Candle(i int) Candle {
	return Candle{Time: b.Time(i), Open: b.Open[i], High: b.High[i], Low: b.Low[i], Close: b.Close[i], Volume: b.Volume[i]}
}

// Candles turns the bars into Candles, oldest first.
func (b *Bars) Candles() []Candle {
	out := make([]Candle, b.Len())
	for i := range out {
		out[i] = b.Candle(i)
	}
	return out
}

// Validate is ValidateCandles over the columns: each bar checked by
// Candle.Validate, and open times strictly increasing. The columns are
// read directly, a bar at a time (a close scores 500 bars of thousands of
// series, each checked again); a bar that fails the direct test (or sits
// at the zero time) is checked as a Candle, for Candle.Validate's verdict
// and error.
func (b *Bars) Validate() error {
	n := len(b.Times)
	if len(b.Open) != n || len(b.High) != n || len(b.Low) != n || len(b.Close) != n || len(b.Volume) != n {
		return Errorf(EINVALID, "bars of different lengths")
	}
	open, high, low, cls, vol := b.Open[:n], b.High[:n], b.Low[:n], b.Close[:n], b.Volume[:n]
	for i := range n {
		o, h, l, c, v := open[i], high[i], low[i], cls[i], vol[i]
		// Finite (x−x is 0), positive prices, volume ≥ 0, high and low
		// bound open and close; comparisons with NaN are false.
		if o-o == 0 && h-h == 0 && l-l == 0 && c-c == 0 && v-v == 0 && o > 0 && l > 0 && v >= 0 &&
			h >= l && h >= o && h >= c && l <= o && l <= c && b.Times[i] != zeroTimeMicros &&
			(i == 0 || b.Times[i] > b.Times[i-1]) {
			continue
		}
		if err := b.Candle(i).Validate(); err != nil {
			return err
		}
		if i > 0 && b.Times[i] <= b.Times[i-1] {
			return Errorf(EINVALID, "candles out of order at %s", b.Time(i).Format(time.RFC3339))
		}
	}
	return nil
}

// zeroTimeMicros is the zero time.Time in Bars.Times' unit.
var zeroTimeMicros = time.Time{}.UnixMicro()
