package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// The cut-off of the mover is the start of the block period of now minus
// the hot window: whole blocks only, and none of a timeframe without a
// window.
func TestCompactCutoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 2, 10, 15, 0, 0, time.UTC)
	hot := worker.DefaultCandleHotWindow()
	for _, c := range []struct {
		tf   domain.Timeframe
		want time.Time
	}{
		{domain.TF1m, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{domain.TF1h, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{domain.TF1d, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{domain.TF1w, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		got, ok := worker.CompactCutoff(hot, c.tf, now)
		if !ok || !got.Equal(c.want) {
			t.Errorf("%s: cut-off %v (%v), want %v", c.tf, got, ok, c.want)
		}
	}
	early := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC) // a day back is still October
	if got, _ := worker.CompactCutoff(hot, domain.TF1h, early); !got.Equal(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("on the 1st, 1h cut-off %v, want October 1st", got)
	}
	if _, ok := worker.CompactCutoff(map[domain.Timeframe]time.Duration{}, domain.TF1h, now); ok {
		t.Error("a timeframe without a hot window has a cut-off")
	}
}

// The retention tick's mover packs a backlog of several series over runs
// bounded by its row budget, leaves the hot window and each series'
// newest candle as rows, and every read returns the same candles.
func TestCompactJobPacksBacklogInBoundedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	_, db := newIngester(t, clk)
	keys := []store.CandleKey{
		{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h},
		{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF1h},
		{Market: domain.Stocks, Exchange: "nasdaq", Symbol: "AAPL", Timeframe: domain.TF1d},
	}
	starts := map[domain.Timeframe]time.Time{domain.TF1h: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC),
		domain.TF1d: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	before := map[store.CandleKey][]domain.Candle{}
	for _, k := range keys {
		start := starts[k.Timeframe]
		n := int(clk.t.Sub(start) / k.Timeframe.Duration())
		if err := db.UpsertCandles(ctx, k, flatCandles(n, start, k.Timeframe)); err != nil {
			t.Fatal(err)
		}
		cs, err := db.Candles(ctx, k, 100000)
		if err != nil {
			t.Fatal(err)
		}
		before[k] = cs
	}
	job := &worker.CompactJob{Store: db, HotWindow: worker.DefaultCandleHotWindow(), Now: clk.now, Batch: 300, MaxRows: 1000}
	runs, total := 0, int64(0)
	for ; runs < 20; runs++ {
		moved, err := job.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := moved[domain.TF1h] + moved[domain.TF1d]
		if n > 1000 {
			t.Fatalf("a run moved %d candles, more than its budget 1000", n)
		}
		if n == 0 {
			break
		}
		total += n
	}
	// 1h: September and October of two series (61 days × 24 each); 1d:
	// January 2024 to October 2026.
	want := int64(2*61*24) + int64(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Sub(starts[domain.TF1d])/(24*time.Hour))
	if total != want || runs < 3 {
		t.Fatalf("%d runs moved %d candles, want %d in several runs", runs, total, want)
	}
	for _, k := range keys {
		var hot int
		var oldest time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT count(*), min(open_time) FROM candles WHERE symbol = $1 AND timeframe = $2`,
			k.Symbol, string(k.Timeframe)).Scan(&hot, &oldest); err != nil {
			t.Fatal(err)
		}
		if cut, _ := worker.CompactCutoff(job.HotWindow, k.Timeframe, clk.t); !oldest.Equal(cut) {
			t.Errorf("%s: the oldest row opened at %v, want the cut-off %v", k, oldest, cut)
		}
		cs, err := db.Candles(ctx, k, 100000)
		if err != nil || len(cs) != len(before[k]) {
			t.Fatalf("%s: %d candles read after packing (%v), want %d", k, len(cs), err, len(before[k]))
		}
		for i := range cs {
			if cs[i] != before[k][i] {
				t.Fatalf("%s: candle %d reads %+v after packing, want %+v", k, i, cs[i], before[k][i])
			}
		}
	}
}

// The retention run deletes packed candles past the retention too: whole
// blocks whose newest candle is past the cut-off.
func TestRetentionDeletesPackedBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	_, db := newIngester(t, clk)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	n := int(clk.t.Sub(start) / time.Hour)
	if err := db.UpsertCandles(ctx, k, flatCandles(n, start, domain.TF1h)); err != nil {
		t.Fatal(err)
	}
	compact := &worker.CompactJob{Store: db, HotWindow: worker.DefaultCandleHotWindow(), Now: clk.now}
	if moved, err := compact.Run(ctx); err != nil || moved[domain.TF1h] == 0 {
		t.Fatalf("packed %v (%v)", moved, err)
	}
	// 100 days back from Nov 22 is Aug 14: July's block goes, August's
	// (straddling the cut-off) stays whole.
	job := &worker.RetentionJob{Store: db, Now: clk.now, Retention: map[domain.Timeframe]time.Duration{domain.TF1h: 100 * 24 * time.Hour}}
	deleted, err := job.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deleted[domain.TF1h] != 31*24 {
		t.Fatalf("retention deleted %v, want July's 744 packed candles", deleted)
	}
	cs, err := db.Candles(ctx, k, 100000)
	if err != nil || len(cs) != n-31*24 || !cs[0].Time.Equal(time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("after retention: %d candles (%v), want %d from August 1st", len(cs), err, n-31*24)
	}
}
