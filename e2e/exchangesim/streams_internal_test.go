package exchangesim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// marshalKlineEvent is klineEvent as it was written with encoding/json
// (a map, keys in byte order): the reference the hand-written encoder is
// held to.
func marshalKlineEvent(sym *symbol, iv interval, k candle, now time.Time, closed bool) string {
	b, _ := json.Marshal(map[string]any{"e": "kline", "E": now.UnixMilli(), "s": sym.name, "k": map[string]any{
		"t": k.open.UnixMilli(), "T": k.close.UnixMilli(), "s": sym.name, "i": iv.name, "f": int64(100), "L": 100 + k.trades,
		"o": num(k.o), "c": num(k.c), "h": num(k.h), "l": num(k.l), "v": num(k.volume), "n": k.trades, "x": closed,
		"q": num(k.quoteV), "V": num(k.volume / 2), "Q": num(k.quoteV / 2), "B": "0"}})
	return string(b)
}

// Every kline push is byte for byte what encoding/json wrote: the
// simulator's candles at random instants of every interval, and candles of
// extreme values and names JSON must escape.
func TestKlineEventIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 34))
	syms := []*symbol{
		{name: "BTCUSDT", price0: 60_000, seed: 1},
		{name: "ETHUSDT_261225", price0: 3_000, seed: 2},
		{name: "<&>\"\\\u2028é", price0: 0.000_01, seed: 3},
	}
	now := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	n := 0
	for _, iv := range intervals {
		for _, sym := range syms {
			for range 50 {
				at := now.Add(-time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))))
				k := sym.candleAt(iv.truncate(at), iv, at)
				closed := rng.IntN(2) == 0
				if got, want := klineEvent(sym, iv, k, at, closed), marshalKlineEvent(sym, iv, k, at, closed); got != want {
					t.Fatalf("%s %s at %s:\n got %s\nwant %s", sym.name, iv.name, at, got, want)
				}
				n++
			}
		}
	}
	odd := []float64{0, -0.0, 1e-9, 123456789.123456789, 1e21, -42.5, math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, v := range odd {
		k := candle{open: now, close: now.Add(time.Minute - time.Millisecond), o: v, h: v, l: -v, c: v, volume: v, quoteV: v, trades: math.MaxInt32}
		if got, want := klineEvent(syms[2], intervals["1m"], k, now, true), marshalKlineEvent(syms[2], intervals["1m"], k, now, true); got != want {
			t.Fatalf("value %g:\n got %s\nwant %s", v, got, want)
		}
		n++
	}
	t.Logf("%d pushes compared", n)
}

// go test ./e2e/exchangesim -run '^$' -bench KlineEvent -benchmem
func BenchmarkKlineEvent(b *testing.B) {
	sym := &symbol{name: "BTCUSDT", price0: 60_000, seed: 1}
	iv := intervals["1m"]
	now := time.Date(2026, 12, 1, 21, 0, 30, 0, time.UTC)
	k := sym.candleAt(iv.truncate(now), iv, now)
	b.Run("hand-written", func(b *testing.B) {
		for b.Loop() {
			_ = klineEvent(sym, iv, k, now, false)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_ = marshalKlineEvent(sym, iv, k, now, false)
		}
	})
}
