package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// countingRetention records every batch the retention job deletes.
type countingRetention struct {
	*store.DB
	mu      sync.Mutex
	batches []int64
}

func (c *countingRetention) DeleteCandlesBefore(ctx context.Context, tf domain.Timeframe, before time.Time, limit int) (int64, error) {
	n, err := c.DB.DeleteCandlesBefore(ctx, tf, before, limit)
	c.mu.Lock()
	c.batches = append(c.batches, n)
	c.mu.Unlock()
	return n, err
}

// flatCandles are n candles of tf from start.
func flatCandles(n int, start time.Time, tf domain.Timeframe) []domain.Candle {
	out := make([]domain.Candle, n)
	for i := range out {
		out[i] = domain.Candle{Time: start.Add(time.Duration(i) * tf.Duration()), Open: 10, High: 11, Low: 9, Close: 10.5, Volume: 1}
	}
	return out
}

// The retention job deletes, across every series, the candles of a
// timeframe older than its retention, keeps the newer ones and every
// timeframe kept forever, in batches no larger than its batch size and no
// more of them per run than its bound; the next run goes on, and a run
// with nothing left deletes nothing.
func TestRetentionDeletesPastRetentionInBoundedBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	_, db := newIngester(t, clk)
	keep := 24 * time.Hour
	cut := domain.TF1m.Truncate(clk.t.Add(-keep))
	start := cut.Add(-30 * time.Minute) // 30 candles past the retention, 30 kept
	keys := []store.CandleKey{
		{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1m},
		{Market: domain.Crypto, Exchange: "okx", Symbol: "SOL_USDT", Timeframe: domain.TF1m},
		{Market: domain.Stocks, Exchange: "nasdaq", Symbol: "AAPL", Timeframe: domain.TF1m},
	}
	for _, k := range keys {
		if err := db.UpsertCandles(ctx, k, flatCandles(60, start, domain.TF1m)); err != nil {
			t.Fatal(err)
		}
	}
	daily := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1d}
	if err := db.UpsertCandles(ctx, daily, flatCandles(60, start.AddDate(-3, 0, 0), domain.TF1d)); err != nil {
		t.Fatal(err)
	}
	counting := &countingRetention{DB: db}
	job := &worker.RetentionJob{Store: counting, Now: clk.now, Batch: 8, MaxBatches: 5,
		Retention: map[domain.Timeframe]time.Duration{domain.TF1m: keep}}

	// 90 candles to go: the first run stops after 5 batches of 8.
	deleted, err := job.Run(ctx)
	if err != nil || deleted[domain.TF1m] != 40 {
		t.Fatalf("first run deleted %v (%v), want 40 of 1m (5 batches of 8)", deleted, err)
	}
	total := deleted[domain.TF1m]
	for range 3 {
		d, err := job.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += d[domain.TF1m]
	}
	if total != 90 {
		t.Fatalf("runs deleted %d candles in all, want the 90 past the retention", total)
	}
	for _, n := range counting.batches {
		if n > 8 {
			t.Errorf("a batch deleted %d candles, more than the batch size 8", n)
		}
	}
	if d, err := job.Run(ctx); err != nil || d[domain.TF1m] != 0 {
		t.Errorf("a run with nothing past the retention deleted %v (%v)", d, err)
	}
	for _, k := range keys {
		left, err := db.Candles(ctx, k, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 30 || !left[0].Time.Equal(cut) {
			t.Errorf("%s %s: %d candles left from %v, want 30 from the cut-off %v", k.Exchange, k.Symbol, len(left), left[0].Time, cut)
		}
	}
	if left, _ := db.Candles(ctx, daily, 1000); len(left) != 60 {
		t.Errorf("daily candles (kept forever): %d left, want 60", len(left))
	}
}

// Backfill never loads what retention deletes: a start older than the
// timeframe's retention begins at its cut-off. A timeframe kept forever
// is backfilled from the start asked.
func TestBackfillStartsAtRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	in.Retention = map[domain.Timeframe]time.Duration{domain.TF1h: 10 * 24 * time.Hour}
	start := clk.t.AddDate(0, 0, -30)
	if _, err := in.Backfill(ctx, db, spot, domain.TF1h, []string{"BTC_USDT"}, start, nil); err != nil {
		t.Fatal(err)
	}
	cs, _ := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}, 5000)
	cut := domain.TF1h.Truncate(clk.t.AddDate(0, 0, -10))
	if len(cs) == 0 || !cs[0].Time.Equal(cut) {
		t.Fatalf("1h backfill stored %d candles from %v, want from the retention's cut-off %v", len(cs), cs[0].Time, cut)
	}
	if _, err := in.Backfill(ctx, db, spot, domain.TF4h, []string{"BTC_USDT"}, start, nil); err != nil {
		t.Fatal(err)
	}
	cs, _ = db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF4h}, 5000)
	if len(cs) == 0 || !cs[0].Time.Equal(domain.TF4h.Truncate(start)) {
		t.Fatalf("4h backfill (no retention) stored %d candles from %v, want from %v", len(cs), cs[0].Time, domain.TF4h.Truncate(start))
	}
}

// A series whose newest candle is older than its retention resumes at the
// cut-off, not from that candle: the older ones would only be deleted again.
func TestIngestResumesAtRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	keep := 24 * time.Hour
	in.Retention = map[domain.Timeframe]time.Duration{domain.TF1m: keep}
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1m}
	stale := domain.TF1m.Truncate(clk.t.Add(-3 * keep))
	if err := db.UpsertCandles(ctx, k, flatCandles(1, stale, domain.TF1m)); err != nil {
		t.Fatal(err)
	}
	if _, err := in.IngestCandles(ctx, spot, domain.TF1m, []string{"BTC_USDT"}); err != nil {
		t.Fatal(err)
	}
	cs, _ := db.Candles(ctx, k, 5000)
	cut := domain.TF1m.Truncate(clk.t.Add(-keep))
	if len(cs) < 2 || !cs[1].Time.Equal(cut) {
		t.Fatalf("ingest after a stale candle stored %d candles, the second at %v; want the rest from the cut-off %v", len(cs), cs[min(1, len(cs)-1)].Time, cut)
	}
}
