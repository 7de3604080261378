package store_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

var spot = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}

func makeTickers(n int, at time.Time, scale float64) []domain.Ticker {
	out := make([]domain.Ticker, n)
	for i := range out {
		out[i] = domain.Ticker{Symbol: fmt.Sprintf("S%04d_USDT", i), Price: scale * float64(i+1),
			ChangePct: float64(i%21 - 10), Volume: float64(1000 * i), UpdatedAt: at}
	}
	return out
}

func makeCandles(n int, start time.Time, tf domain.Timeframe, seed float64) []domain.Candle {
	out := make([]domain.Candle, n)
	for i := range out {
		p := 100 + 10*math.Sin(float64(i)/7+seed)
		out[i] = domain.Candle{Time: start.Add(time.Duration(i) * tf.Duration()), Open: p, High: p + 2, Low: p - 2, Close: p + 1, Volume: float64(i)}
	}
	return out
}

func TestReplaceTickersIsAtomicSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := db.ReplaceTickers(ctx, spot, makeTickers(5, at, 1)); err != nil {
		t.Fatal(err)
	}
	next := makeTickers(3, at.Add(time.Minute), 2)
	if err := db.ReplaceTickers(ctx, spot, next); err != nil {
		t.Fatal(err)
	}
	got, err := db.Tickers(ctx, spot)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(next, got); diff != "" {
		t.Fatalf("tickers after replace (-want +got):\n%s", diff)
	}
	bad := makeTickers(2, at, 1)
	bad[1].Price = math.NaN()
	if err := db.ReplaceTickers(ctx, spot, bad); domain.ErrorCode(err) != domain.EINVALID {
		t.Fatalf("NaN ticker: err = %v, want invalid", err)
	}
	if got, _ := db.Tickers(ctx, spot); len(got) != 3 {
		t.Fatalf("a rejected snapshot changed the rows: %d", len(got))
	}
	other := spot
	other.Instrument = "perpetual"
	if got, _ := db.Tickers(ctx, other); len(got) != 0 {
		t.Fatalf("combinations leak: %d rows", len(got))
	}
}

func TestUpsertCandlesIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cs := makeCandles(300, start, domain.TF1h, 0)
	for range 2 {
		if err := db.UpsertCandles(ctx, k, cs); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Candles(ctx, k, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cs, got); diff != "" {
		t.Fatalf("candles (-want +got):\n%s", diff)
	}
	// The open candle changes: the upsert updates it.
	last := cs[len(cs)-1]
	last.Close, last.High = last.Close+1, last.High+1
	if err := db.UpsertCandles(ctx, k, []domain.Candle{last}); err != nil {
		t.Fatal(err)
	}
	got, _ = db.Candles(ctx, k, 2)
	if len(got) != 2 || got[1] != last || !got[0].Time.Before(got[1].Time) {
		t.Fatalf("newest 2 = %+v", got)
	}
	other := k
	other.Symbol = "ETH_USDT"
	if got, err := db.Candles(ctx, other, 500); err != nil || len(got) != 0 {
		t.Fatalf("candles of a series never stored = %v, %v; want none", got, err)
	}
	if got, _ = db.Candles(ctx, k, 500); len(got) != 300 || got[0] != cs[0] || got[299] != last {
		t.Fatalf("newest 500 of 300: %d candles, first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
	latest, err := db.LatestCandleTimes(ctx, domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT", "ETH_USDT"})
	if _, ok := latest["ETH_USDT"]; err != nil || !latest["BTC_USDT"].Equal(last.Time) || ok || len(latest) != 1 {
		t.Fatalf("LatestCandleTimes = %v %v", latest, err)
	}
	counts, err := db.CandleCounts(ctx, domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT", "ETH_USDT"}, 75)
	if _, ok := counts["ETH_USDT"]; err != nil || counts["BTC_USDT"] != 75 || ok {
		t.Fatalf("CandleCounts at most 75 = %v %v", counts, err)
	}
	outOfOrder := []domain.Candle{cs[1], cs[0]}
	if err := db.UpsertCandles(ctx, k, outOfOrder); err == nil {
		t.Fatal("out-of-order candles stored")
	}
}

func TestFeedHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	h, err := db.FeedHealthOf(ctx, spot, "tickers")
	if err != nil || h.Failing() || h.LastSuccessAt != nil {
		t.Fatalf("fresh health = %+v %v", h, err)
	}
	_ = db.RecordFeedSuccess(ctx, spot, "tickers", at)
	_ = db.RecordFeedError(ctx, spot, "tickers", at.Add(time.Minute), "binance: 503")
	h, _ = db.FeedHealthOf(ctx, spot, "tickers")
	if !h.Failing() || h.LastError != "binance: 503" || !h.LastSuccessAt.Equal(at) {
		t.Fatalf("health = %+v", h)
	}
	_ = db.RecordFeedSuccess(ctx, spot, "tickers", at.Add(2*time.Minute))
	if h, _ = db.FeedHealthOf(ctx, spot, "tickers"); h.Failing() {
		t.Fatalf("recovered feed still failing: %+v", h)
	}
}

func BenchmarkReplaceTickers2000(b *testing.B) {
	db := storetest.New(b)
	ctx := context.Background()
	snap := makeTickers(2000, time.Now(), 1)
	b.ResetTimer()
	for b.Loop() {
		if err := db.ReplaceTickers(ctx, spot, snap); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpsertCandles1000(b *testing.B) {
	db := storetest.New(b)
	ctx := context.Background()
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1m}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	b.ResetTimer()
	for b.Loop() {
		// Alternate between fresh and identical batches: inserts and no-op upserts.
		cs := makeCandles(1000, start.Add(time.Duration(i/2)*1000*time.Minute), domain.TF1m, float64(i/2))
		if err := db.UpsertCandles(ctx, k, cs); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkUpsertCloseWrites is the stream's writes of 2,000 scored series
// (15m) at a close, one statement each as the sink writes them: the closed
// candle's final values, then the new open candle, then the open candle
// moving. On a scored timeframe each write also keeps the series'
// versions (migration 00023's triggers), which this measures per series.
func BenchmarkUpsertCloseWrites(b *testing.B) {
	db := storetest.New(b)
	ctx := context.Background()
	const series = 2000
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	newest := start
	write := func(at time.Time, seed float64) {
		batch := make(map[store.CandleKey][]domain.Candle, series)
		for s := range series {
			k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: fmt.Sprintf("S%04d_USDT", s), Timeframe: domain.TF15m}
			batch[k] = makeCandles(1, at, domain.TF15m, seed+float64(s))
		}
		if _, err := db.UpsertChangedCandles(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	write(newest, 0)
	cpu := storetest.StartCPU(b, db)
	i := 0
	for b.Loop() {
		i++
		write(newest, float64(i)) // the closed candle's final values
		newest = newest.Add(15 * time.Minute)
		write(newest, float64(i))     // the new open candle
		write(newest, float64(i)+0.5) // the open candle moved
	}
	pg, _ := cpu.Used()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*3*series), "µs/series-write")
	b.ReportMetric(float64(pg.Microseconds())/float64(b.N*3*series), "pg-cpu-µs/series-write")
}

// TestConcurrentReplaceTickersTakeTurns: writers of one combination at
// once (the REST refresh and the stream's ticker sink) each succeed, and
// the rows are one writer's whole snapshot; without turns the second
// delete-then-copy collided with the first's rows (a unique violation).
func TestConcurrentReplaceTickersTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	const writers, rounds = 4, 25
	errs := make(chan error, writers*rounds)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				errs <- db.ReplaceTickers(ctx, spot, makeTickers(20, at.Add(time.Duration(r)*time.Second), float64(w+1)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent replace failed: %v", err)
		}
	}
	got, err := db.Tickers(ctx, spot)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 {
		t.Fatalf("%d rows after the replaces, want one snapshot of 20", len(got))
	}
	// makeTickers' row i of a writer's snapshot has price scale×(i+1).
	scale := got[0].Price
	for i, tk := range got {
		if tk.Price != scale*float64(i+1) || !tk.UpdatedAt.Equal(got[0].UpdatedAt) {
			t.Fatalf("rows of two snapshots: %+v and %+v", got[0], tk)
		}
	}
}

func TestTickerFilterInclusive(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	row := domain.Ticker{Volume: 100, ChangePct: -2.5}
	for name, tc := range map[string]struct {
		filter store.TickerFilter
		want   bool
	}{
		"no bounds":           {store.TickerFilter{}, true},
		"volume_min equal":    {store.TickerFilter{VolumeMin: f(100)}, true},
		"volume_max equal":    {store.TickerFilter{VolumeMax: f(100)}, true},
		"volume_min above":    {store.TickerFilter{VolumeMin: f(100.0001)}, false},
		"volume_max below":    {store.TickerFilter{VolumeMax: f(99.9999)}, false},
		"change_min equal":    {store.TickerFilter{ChangeMin: f(-2.5)}, true},
		"change_max equal":    {store.TickerFilter{ChangeMax: f(-2.5)}, true},
		"change_min above":    {store.TickerFilter{ChangeMin: f(-2.4)}, false},
		"change range inside": {store.TickerFilter{ChangeMin: f(-3), ChangeMax: f(0)}, true},
	} {
		if got := tc.filter.Match(row); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", name, got, tc.want)
		}
	}
}

// DeleteCandlesBefore deletes only the given timeframe's candles older
// than the cut-off, of every series, at most limit a call, and nothing
// once they are gone.
func TestDeleteCandlesBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	keys := []store.CandleKey{
		{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1m},
		{Market: domain.Crypto, Exchange: "okx", Symbol: "ETH_USDT", Timeframe: domain.TF1m},
		{Market: domain.Forex, Exchange: "oanda", Symbol: "EUR_USD", Timeframe: domain.TF1m},
	}
	other := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF5m}
	for i, k := range keys {
		if err := db.UpsertCandles(ctx, k, makeCandles(100, start, domain.TF1m, float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.UpsertCandles(ctx, other, makeCandles(100, start.Add(-24*time.Hour), domain.TF5m, 0)); err != nil {
		t.Fatal(err)
	}
	cut := start.Add(40 * time.Minute)
	var batches []int64
	for range 5 {
		n, err := db.DeleteCandlesBefore(ctx, domain.TF1m, cut, 50)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, n)
	}
	// 3 series × 40 old candles: two full batches, the rest, then nothing.
	if want := []int64{50, 50, 20, 0, 0}; !slices.Equal(batches, want) {
		t.Fatalf("batches deleted %v, want %v", batches, want)
	}
	for _, k := range keys {
		left, err := db.Candles(ctx, k, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 60 || !left[0].Time.Equal(cut) {
			t.Errorf("%s: %d candles left from %v, want 60 from %v", k.Symbol, len(left), left[0].Time, cut)
		}
	}
	if left, _ := db.Candles(ctx, other, 1000); len(left) != 100 {
		t.Errorf("5m series: %d candles left, want all 100 (another timeframe)", len(left))
	}
}

// UpsertChangedCandles names the series that changed (what triggers
// scoring): new candles or a changed one, each series once; identical
// candles change nothing and name nothing.
func TestUpsertChangedCandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	btc := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF4h}
	eth := btc
	eth.Symbol = "ETH_USDT"
	series := map[store.CandleKey][]domain.Candle{btc: makeCandles(100, start, domain.TF4h, 0), eth: makeCandles(100, start, domain.TF4h, 1)}
	changed, err := db.UpsertChangedCandles(ctx, series, nil)
	if err != nil || len(changed) != 2 {
		t.Fatalf("first upsert: changed %v, %v; want both series once", changed, err)
	}
	if changed, err = db.UpsertChangedCandles(ctx, series, nil); err != nil || len(changed) != 0 {
		t.Fatalf("same candles again: changed %v, %v; want none", changed, err)
	}
	last := series[eth][99]
	last.Close++
	series[eth] = []domain.Candle{last}
	series[btc] = series[btc][99:]
	if changed, err = db.UpsertChangedCandles(ctx, series, nil); err != nil || !cmp.Equal(changed, []store.CandleKey{eth}) {
		t.Fatalf("ETH's open candle moved: changed %v, %v; want ETH only", changed, err)
	}

	// Its final state, equal to the stored one, marks it (and the ones
	// before it in the write) closed: a change; once closed, it stays so.
	closedOf := func(k store.CandleKey) []time.Time {
		t.Helper()
		rows, err := db.Pool.Query(ctx, `SELECT open_time FROM candles WHERE market = $1 AND exchange = $2 AND symbol = $3
			AND timeframe = $4 AND closed ORDER BY open_time`, string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe))
		if err != nil {
			t.Fatal(err)
		}
		ts, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	final := map[store.CandleKey]time.Time{eth: last.Time}
	prev := makeCandles(100, start, domain.TF4h, 1)[98]
	series[eth] = []domain.Candle{prev, last}
	if changed, err = db.UpsertChangedCandles(ctx, series, final); err != nil || !cmp.Equal(changed, []store.CandleKey{eth}) {
		t.Fatalf("ETH's candle final, same values: changed %v, %v; want ETH only", changed, err)
	}
	if got := closedOf(eth); !cmp.Equal(got, []time.Time{prev.Time.UTC(), last.Time.UTC()}) || len(closedOf(btc)) != 0 {
		t.Fatalf("closed ETH candles %v, BTC %v; want ETH's two written final, no BTC", got, closedOf(btc))
	}
	if changed, err = db.UpsertChangedCandles(ctx, series, nil); err != nil || len(changed) != 0 || len(closedOf(eth)) != 2 {
		t.Fatalf("the same candles written again, not final: changed %v, %v, closed %v; want no change, still closed",
			changed, err, closedOf(eth))
	}
}

// CandlesOf reads several series in one statement and gives each series
// what Candles gives it: its newest candles, oldest first, of its own
// timeframe and exchange only; a symbol without candles is absent.
func TestCandlesOfMatchesCandles(t *testing.T) {
	ctx := context.Background()
	db := storetest.New(t)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	key := func(sym, exchange string, tf domain.Timeframe) store.CandleKey {
		return store.CandleKey{Market: domain.Crypto, Exchange: exchange, Symbol: sym, Timeframe: tf}
	}
	for i, k := range []store.CandleKey{key("BTC_USDT", "binance", domain.TF15m), key("ETH_USDT", "binance", domain.TF15m),
		key("BTC_USDT", "binance", domain.TF1h), key("ETH_USDT", "okx", domain.TF15m), key("SOL_USDT", "binance", domain.TF15m)} {
		n := 60 + 10*i
		if err := db.UpsertCandles(ctx, k, makeCandles(n, start, k.Timeframe, float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.CandlesOf(ctx, domain.Crypto, "binance", domain.TF15m, []string{"BTC_USDT", "ETH_USDT", "NONE_USDT", "SOL_USDT"}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["NONE_USDT"] != nil {
		t.Fatalf("series read: %d (%v); want BTC, ETH and SOL", len(got), slices.Collect(maps.Keys(got)))
	}
	for _, sym := range []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"} {
		want, err := db.Candles(ctx, key(sym, "binance", domain.TF15m), 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 50 || !cmp.Equal(got[sym], want) {
			t.Errorf("%s: CandlesOf gives %d candles, Candles %d, or they differ", sym, len(got[sym]), len(want))
		}
	}
	if got, err := db.CandlesOf(ctx, domain.Crypto, "binance", domain.TF15m, nil, 50); err != nil || len(got) != 0 {
		t.Fatalf("no symbols: %v, %v", got, err)
	}
}

// BenchmarkCandles500 reads what scoring reads per asset: the newest 500
// candles of a series of 1000, as Candles reads them (arrays) and as it
// read them before (rows, the baseline).
func BenchmarkCandles500(b *testing.B) {
	db := storetest.New(b)
	ctx := context.Background()
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF15m}
	cs := makeCandles(1000, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), domain.TF15m, 0)
	if err := db.UpsertCandles(ctx, k, cs); err != nil {
		b.Fatal(err)
	}
	for name, read := range map[string]func(context.Context, store.CandleKey, int) ([]domain.Candle, error){
		"arrays": db.Candles,
		"rows": func(ctx context.Context, k store.CandleKey, n int) ([]domain.Candle, error) {
			return store.CandlesByRows(db, ctx, k, n)
		},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := read(ctx, k, 500)
				if err != nil || len(got) != 500 {
					b.Fatalf("%d candles, %v", len(got), err)
				}
			}
		})
	}
	// A scoring run's read: 32 series per statement, per series.
	syms := make([]string, 32)
	for i := range syms {
		syms[i] = fmt.Sprintf("S%02d_USDT", i)
		k.Symbol = syms[i]
		if err := db.UpsertCandles(ctx, k, cs); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("batch32", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, err := db.CandlesOf(ctx, k.Market, k.Exchange, k.Timeframe, syms, 500)
			if err != nil || len(got) != 32 {
				b.Fatalf("%d series, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/32, "ns/series")
	})
}
