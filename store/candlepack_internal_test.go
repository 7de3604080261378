package store

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// extremeValues are float64s at the edges of what a column may hold
// (every finite value, sign of zero included, round-trips).
var extremeValues = []float64{
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	0x1p-1022, 0x1p-1023, // the smallest normal and a subnormal
	math.Copysign(0, -1), 0, 1 << 53, 1<<53 + 2, 1<<53 - 1, -(1 << 53), 1e15, 1e16, 1e-15, 1e-300,
	0.1, 0.3, 1.0 / 3, 123456.789, 9007199254740.993, math.Nextafter(1, 2), math.Nextafter(100, 0),
}

// randomValue draws a value of one of the kinds a column meets: a price
// or volume in a tick size, any finite float64 (random bits), an extreme.
func randomValue(r *rand.Rand, kind int) float64 {
	switch kind {
	case 0: // a tick size of 10^-k
		k := r.IntN(9)
		return float64(r.Int64N(1_000_000_000)) / pow10[k]
	case 1:
		for {
			if v := math.Float64frombits(r.Uint64()); !math.IsNaN(v) && !math.IsInf(v, 0) {
				return v
			}
		}
	default:
		return extremeValues[r.IntN(len(extremeValues))]
	}
}

// randomSeries draws a series of n candles of a random timeframe step,
// with holes, whose columns each mix kinds of values (a column of one kind
// only, half the time).
func randomSeries(r *rand.Rand, n int) ([]domain.Candle, time.Duration) {
	steps := []time.Duration{time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
	step := steps[r.IntN(len(steps))]
	t := time.UnixMicro(r.Int64N(1<<50) - 1<<49).UTC() // ±17,800 years around 1970, in µs
	kinds := [5]int{}
	for i := range kinds {
		kinds[i] = r.IntN(3)
	}
	if r.IntN(2) == 0 { // prices of one tick size, as exchanges quote them
		kinds = [5]int{}
	}
	mixed := r.IntN(2) == 0
	out := make([]domain.Candle, n)
	for i := range out {
		if i > 0 {
			t = t.Add(step)
			if r.IntN(10) == 0 { // a hole, or an odd open time
				t = t.Add(time.Duration(r.Int64N(int64(100*step/time.Microsecond))) * time.Microsecond)
			}
		}
		out[i].Time = t
		for f, field := range candleFields {
			kind := kinds[f]
			if mixed {
				kind = r.IntN(3)
			}
			*field(&out[i]) = randomValue(r, kind)
		}
	}
	return out, step
}

func sameBits(a, b domain.Candle) bool {
	for _, field := range candleFields {
		if math.Float64bits(*field(&a)) != math.Float64bits(*field(&b)) {
			return false
		}
	}
	return a.Time.Equal(b.Time)
}

// Packing is lossless: every series, of any finite values (extremes,
// subnormals, -0, random bits, tick sizes) and any open times (holes,
// odd times, far from 1970), unpacks to the same open times and the same
// bits.
func TestPackCandlesRoundTripsExactly(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(37, 4))
	for iter := range 3000 {
		n := 1 + r.IntN(300)
		if iter%100 == 0 {
			n = 3000
		}
		cs, step := randomSeries(r, n)
		got, err := unpackCandles(packCandles(cs, step))
		if err != nil {
			t.Fatalf("series %d: %v", iter, err)
		}
		if len(got) != len(cs) {
			t.Fatalf("series %d: %d candles back, want %d", iter, len(got), len(cs))
		}
		for i := range cs {
			if !sameBits(got[i], cs[i]) {
				t.Fatalf("series %d candle %d: got %+v, want %+v", iter, i, got[i], cs[i])
			}
		}
	}
}

// Prices and volumes in an exchange's tick sizes pack to a few bytes a
// candle (decimal columns); a column of arbitrary floats still packs
// exactly, in at most 10 bytes a value.
func TestPackCandlesSize(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	cs := make([]domain.Candle, 744)
	p := 43_000.0
	for i := range cs {
		o := p
		p = math.Round(p*(1+r.NormFloat64()*0.004)*100) / 100
		hi := math.Round(math.Max(o, p)*100+float64(r.IntN(5000))) / 100
		lo := math.Round(math.Min(o, p)*100-float64(r.IntN(5000))) / 100
		cs[i] = domain.Candle{Time: start.Add(time.Duration(i) * time.Hour), Open: o, High: hi, Low: lo, Close: p,
			Volume: float64(r.Int64N(5_000_000_000)) / 1e5}
	}
	b := packCandles(cs, time.Hour)
	if per := float64(len(b)) / float64(len(cs)); per > 20 {
		t.Errorf("a month of 1h tick-size candles packs to %.1f bytes a candle, want ≤ 20", per)
	}
	for i := range cs {
		cs[i].Volume = r.Float64() * 1e6
	}
	b = packCandles(cs, time.Hour)
	if per := float64(len(b)) / float64(len(cs)); per > 30 {
		t.Errorf("with a column of arbitrary floats: %.1f bytes a candle, want ≤ 30", per)
	}
}

// A malformed block is an error, never a panic or a wrong series.
func FuzzUnpackCandles(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 5 {
		cs, step := randomSeries(r, 1+r.IntN(20))
		f.Add(packCandles(cs, step))
	}
	f.Add([]byte{})
	f.Add([]byte{packFormat, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := unpackCandles(b)
		if err != nil {
			return
		}
		if again, err := unpackCandles(packCandles(cs, time.Minute)); err != nil || len(again) != len(cs) {
			t.Fatalf("a decoded block does not pack again: %v", err)
		}
	})
}

// mergeCandles keeps each open time once, the winner's candle where both
// have it, in order.
func TestMergeCandles(t *testing.T) {
	t.Parallel()
	at := func(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }
	older := []domain.Candle{{Time: at(0), Close: 1}, {Time: at(1), Close: 1}, {Time: at(3), Close: 1}}
	winner := []domain.Candle{{Time: at(1), Close: 2}, {Time: at(2), Close: 2}, {Time: at(4), Close: 2}}
	got := mergeCandles(older, winner)
	want := []domain.Candle{{Time: at(0), Close: 1}, {Time: at(1), Close: 2}, {Time: at(2), Close: 2}, {Time: at(3), Close: 1}, {Time: at(4), Close: 2}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Close != want[i].Close {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// BenchmarkUnpackCandles decodes a month of 1h candles on exchange ticks
// (one block of a GET /ohlcv read across the boundary).
func BenchmarkUnpackCandles(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	cs := make([]domain.Candle, 744)
	p := 43_000.0
	for i := range cs {
		o := p
		p = math.Round(p*(1+r.NormFloat64()*0.004)*100) / 100
		cs[i] = domain.Candle{Time: start.Add(time.Duration(i) * time.Hour), Open: o, High: math.Max(o, p) + 1, Low: math.Min(o, p) - 1,
			Close: p, Volume: float64(r.Int64N(5_000_000_000)) / 1e5}
	}
	packed := packCandles(cs, time.Hour)
	b.SetBytes(int64(len(packed)))
	for b.Loop() {
		if _, err := unpackCandles(packed); err != nil {
			b.Fatal(err)
		}
	}
}
