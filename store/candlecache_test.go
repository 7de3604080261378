package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// candleWriter changes candle series the ways writers do: the open candle
// moving, a new candle, a correction of an older candle, a backfill before
// the oldest, a gap filled, deletes (retention, or of the newest), each
// through the store's upsert or plain SQL.
type candleWriter struct {
	db  *store.DB
	rng *rand.Rand
	k   store.CandleKey
	// concurrent: only changes that concurrent writers cannot collide on
	// (no open time moved by hand)
	concurrent bool
}

func (w candleWriter) exec(t testing.TB, q string, args ...any) {
	t.Helper()
	if _, err := w.db.Pool.Exec(context.Background(), q, args...); err != nil {
		t.Error(err)
	}
}

func (w candleWriter) newest(t testing.TB) (time.Time, bool) {
	t.Helper()
	var at *time.Time
	if err := w.db.Pool.QueryRow(context.Background(), `SELECT max(open_time) FROM candles
		WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4`,
		string(w.k.Market), w.k.Exchange, w.k.Symbol, string(w.k.Timeframe)).Scan(&at); err != nil {
		t.Error(err)
	}
	if at == nil {
		return time.Time{}, false
	}
	return *at, true
}

// step makes one random change and names it.
func (w candleWriter) step(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	tf := w.k.Timeframe.Duration()
	newest, ok := w.newest(t)
	if !ok {
		newest = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	}
	p := 100 + 10*w.rng.Float64()
	candle := func(at time.Time) domain.Candle {
		return domain.Candle{Time: at, Open: p, High: p + 1, Low: p - 1, Close: p + w.rng.Float64()/2, Volume: w.rng.Float64() * 100}
	}
	upsert := func(cs ...domain.Candle) {
		if err := w.db.UpsertCandles(ctx, w.k, cs); err != nil {
			t.Error(err)
		}
	}
	key := []any{string(w.k.Market), w.k.Exchange, w.k.Symbol, string(w.k.Timeframe)}
	n := w.rng.IntN(100)
	if w.concurrent {
		n = w.rng.IntN(97)
	}
	switch {
	case n < 40:
		upsert(candle(newest))
		return "open candle moved"
	case n < 60:
		upsert(candle(newest), candle(newest.Add(tf)))
		return "close and a new candle in one write"
	case n < 70:
		upsert(candle(newest.Add(tf)))
		return "new candle"
	case n < 76:
		upsert(candle(newest.Add(-time.Duration(1+w.rng.IntN(5)) * tf)))
		return "correction of a closed candle"
	case n < 80:
		upsert(candle(newest.Add(-time.Duration(1+w.rng.IntN(3))*tf)), candle(newest))
		return "correction with the open candle"
	case n < 84:
		w.exec(t, `INSERT INTO candles (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
			SELECT $1, $2, $3, $4, min(open_time) - $5::interval, 1, 2, 0.5, 1.5, 1 FROM candles
			WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 HAVING count(*) > 0
			ON CONFLICT DO NOTHING`, append(key, tf)...)
		return "backfill before the oldest"
	case n < 88:
		w.exec(t, `DELETE FROM candles WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4
			AND open_time = (SELECT min(open_time) FROM candles WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4)`, key...)
		return "retention deleted the oldest"
	case n < 91:
		w.exec(t, `DELETE FROM candles WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND open_time = $5`,
			append(key, newest)...)
		return "newest deleted"
	case n < 94:
		at := newest.Add(-time.Duration(2+w.rng.IntN(4)) * tf)
		w.exec(t, `DELETE FROM candles WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND open_time = $5`,
			append(key, at)...)
		upsert(candle(at))
		return "gap filled (two statements)"
	case n < 97:
		w.exec(t, `UPDATE candles SET close = close + 0.25 WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4
			AND open_time = $5`, append(key, newest.Add(-tf))...)
		return "operator's UPDATE of a closed candle"
	default:
		w.exec(t, `UPDATE candles SET open_time = open_time + interval '1 minute' WHERE market = $1 AND exchange = $2
			AND symbol = $3 AND timeframe = $4 AND open_time = $5 AND NOT EXISTS (SELECT 1 FROM candles WHERE market = $1
				AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND open_time = $5::timestamptz + interval '1 minute')`,
			append(key, newest.Add(-2*tf))...)
		return "operator moved a candle's open time"
	}
}

// A kept series is served only as Postgres has it: after every kind of
// write (tail, deep, deletes, plain SQL), a read through the cache equals a
// fresh read, and the cache is used (extended reads) where the writes allow.
func TestCachedCandlesOfMatchesPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	const limit = 40
	cache := store.NewCandleCache(100)
	syms := []string{"A_USDT", "B_USDT", "C_USDT"}
	var writers []candleWriter
	for i, sym := range syms {
		k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF1h}
		if err := db.UpsertCandles(ctx, k, makeCandles(30+20*i, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), domain.TF1h, float64(i))); err != nil {
			t.Fatal(err)
		}
		writers = append(writers, candleWriter{db: db, rng: rand.New(rand.NewPCG(uint64(i), 7)), k: k})
	}
	var total store.CandleReads
	for round := range 400 {
		var did []string
		for _, w := range writers {
			if w.rng.IntN(3) > 0 {
				did = append(did, w.k.Symbol+": "+w.step(t))
			}
		}
		if round%97 == 96 {
			if _, err := db.Pool.Exec(ctx, `TRUNCATE candles`); err != nil {
				t.Fatal(err)
			}
			did = append(did, "TRUNCATE")
			for i, w := range writers { // fewer than a read's limit: kept candles would show
				if err := db.UpsertCandles(ctx, w.k, makeCandles(5, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), domain.TF1h, float64(i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, reads, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", domain.TF1h, syms, limit)
		if err != nil {
			t.Fatal(err)
		}
		want, err := db.CandlesOf(ctx, domain.Crypto, "binance", domain.TF1h, syms, limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, candlesOfBars(got)); diff != "" {
			t.Fatalf("round %d after %q: the cache served other candles than Postgres has (-postgres +cache):\n%s", round, did, diff)
		}
		total.Extended += reads.Extended
		total.Full += reads.Full
	}
	if total.Extended < 400 || total.Full < 50 {
		t.Fatalf("reads %+v: want most reads extended from the cache and the deep changes read in full", total)
	}
}

// Writers of one series in several processes at once (the stream moving
// the open candle, REST adding and correcting candles) while a worker
// reads through its cache: once they stop, the cache serves what Postgres
// has. A change judged "tail only" by a writer whose view was overtaken by
// a concurrent newer candle must still reach the reader.
func TestCachedCandlesOfUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	const limit = 30
	cache := store.NewCandleCache(100)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "A_USDT", Timeframe: domain.TF15m}
	if err := db.UpsertCandles(ctx, k, makeCandles(50, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), domain.TF15m, 0)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		w := candleWriter{db: db, rng: rand.New(rand.NewPCG(uint64(i), 11)), k: k, concurrent: true}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.step(t)
			}
		})
	}
	stopWriters := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopWriters()
	syms := []string{k.Symbol}
	for range 300 {
		if _, _, err := db.CachedCandlesOf(ctx, cache, k.Market, k.Exchange, k.Timeframe, syms, limit); err != nil {
			t.Fatal(err)
		}
	}
	stopWriters()
	got, _, err := db.CachedCandlesOf(ctx, cache, k.Market, k.Exchange, k.Timeframe, syms, limit)
	if err != nil {
		t.Fatal(err)
	}
	want, err := db.CandlesOf(ctx, k.Market, k.Exchange, k.Timeframe, syms, limit)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, candlesOfBars(got)); diff != "" {
		t.Fatalf("after concurrent writers the cache served other candles than Postgres has (-postgres +cache):\n%s", diff)
	}
}

// The cache holds at most its size, and a timeframe without versions is
// never kept.
func TestCandleCacheBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	var syms []string
	for i := range 5 {
		sym := fmt.Sprintf("S%d_USDT", i)
		syms = append(syms, sym)
		for _, tf := range []domain.Timeframe{domain.TF4h, domain.TF5m} {
			k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: tf}
			if err := db.UpsertCandles(ctx, k, makeCandles(20, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), tf, 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cache := store.NewCandleCache(3)
	for _, tf := range []domain.Timeframe{domain.TF4h, domain.TF5m} {
		got, _, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", tf, syms, 10)
		if err != nil || len(got) != 5 || got["S0_USDT"].Len() != 10 {
			t.Fatalf("%s: %d series (%d candles of S0), %v; want 5 of 10", tf, len(got), got["S0_USDT"].Len(), err)
		}
	}
	if n := cache.Len(); n != 3 {
		t.Fatalf("cache holds %d series, want its size 3 (4h only: 5m has no versions)", n)
	}
	_, reads, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", domain.TF4h, syms, 10)
	if err != nil || reads != (store.CandleReads{Extended: 3, Full: 2}) {
		t.Fatalf("second read: %+v, %v; want the 3 kept series extended and 2 read in full", reads, err)
	}
}

// Every timeframe a style is scored in has series versions (migration
// 00023's list): without them the scorer would read every series in full.
func TestScoredTimeframesAreVersioned(t *testing.T) {
	t.Parallel()
	for _, st := range analytics.Styles {
		if !store.CandleVersioned(st.Timeframe()) {
			t.Errorf("style %s scores %s candles, which have no series versions: add the timeframe to migration 00023's list in a new migration and to versionedTimeframes",
				st, st.Timeframe())
		}
	}
}

// candlesOfBars is CachedCandlesOf's answer as CandlesOf gives it.
func candlesOfBars(bs map[string]*domain.Bars) map[string][]domain.Candle {
	out := make(map[string][]domain.Candle, len(bs))
	for sym, b := range bs {
		out[sym] = b.Candles()
	}
	return out
}
