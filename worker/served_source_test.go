package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// okxOnly serves what MARKET_FEEDS=okx serves in the global region.
func okxOnly(c domain.Combination) bool { return c.Market == domain.Crypto && c.Exchange == "okx" }

// TestAnalyticsSourceIsTheFirstServedOne: with okx alone served, crypto's
// analytics source is okx spot for the scorer, the statistics and the
// score trigger alike; with every combination served it stays binance, the
// catalogue's first.
func TestAnalyticsSourceIsTheFirstServedOne(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.MaxCandleSymbols = 3
	ctx := context.Background()
	okxSpot := domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"}
	for _, tf := range []domain.Timeframe{domain.TF4h, domain.TF1d} {
		if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(okxSpot, tf, clk.t)); err != nil {
			t.Fatal(err)
		}
	}

	if srcs := domain.AnalyticsSources("global", domain.Crypto, okxOnly); len(srcs) != 1 || srcs[0] != okxSpot {
		t.Fatalf("okx alone: crypto sources %v; want %v", srcs, okxSpot)
	}
	if domain.Scored("global", domain.Forex, okxOnly) {
		t.Errorf("okx alone: forex has an analytics source, want none (nothing serves it)")
	}

	every := &worker.Scorer{Store: db, Region: "global", Logger: discard(), Now: clk.now}
	if n, _, err := every.Score(ctx, domain.Crypto, analytics.Swing); err != nil || n != 0 {
		t.Fatalf("every combination served: scored %d, %v; want 0 (binance, the source, has no candles)", n, err)
	}
	sc := &worker.Scorer{Store: db, Region: "global", Served: okxOnly, Logger: discard(), Now: clk.now}
	if n, _, err := sc.Score(ctx, domain.Crypto, analytics.Swing); err != nil || n != 3 {
		t.Fatalf("okx alone: scored %d, %v; want okx's 3 assets", n, err)
	}
	list, err := db.AnalyticsList(ctx, domain.Crypto, analytics.Swing)
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %d reports, %v", len(list), err)
	}
	for _, rec := range list {
		if rec.Exchange != "okx" {
			t.Errorf("report of %s scored from %q, want okx", rec.Symbol, rec.Exchange)
		}
	}

	job := &worker.StatsJob{Store: db, Region: "global", Served: okxOnly, Logger: discard(), Now: clk.now}
	if n, err := job.Compute(ctx, domain.Crypto); err != nil || n != 3 {
		t.Errorf("okx alone: statistics over %d assets, %v; want okx's 3", n, err)
	}

	okxTrigger := &worker.ScoreTrigger{Region: "global", Served: okxOnly}
	everyTrigger := &worker.ScoreTrigger{Region: "global"}
	for _, c := range []struct {
		tr   *worker.ScoreTrigger
		ex   string
		want bool
	}{
		{okxTrigger, "okx", true}, {okxTrigger, "binance", false},
		{everyTrigger, "binance", true}, {everyTrigger, "okx", false},
	} {
		if got := c.tr.WantsCandles(domain.Crypto, c.ex, domain.TF4h); got != c.want {
			t.Errorf("served %v: WantsCandles(crypto, %s, 4h) = %v, want %v", c.tr.Served != nil, c.ex, got, c.want)
		}
	}
}

// countingSaves counts the save transactions of a run.
type countingSaves struct {
	*store.DB
	mu    sync.Mutex
	saves int
}

func (c *countingSaves) SaveAnalytics(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord) (int, error) {
	c.mu.Lock()
	c.saves++
	c.mu.Unlock()
	return c.DB.SaveAnalytics(ctx, recs, prev)
}

// TestOneRunScoresEveryExchangeOfAMarket: a stock market's exchanges are
// one scoring run, one pipeline from the first asset to the last (its
// assets, fewer than a save batch, go in one save: a run of a pipeline per
// exchange saved each exchange's apart, after its own last read), and each
// report keeps the exchange its candles came from.
func TestOneRunScoresEveryExchangeOfAMarket(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 24, 15, 15, 30, 0, time.UTC)} // a Tuesday's session
	in, db := newIngester(t, clk)
	in.MaxCandleSymbols = 3
	ctx := context.Background()
	srcs := domain.AnalyticsSources("global", domain.Stocks, nil)
	if len(srcs) < 2 {
		t.Fatalf("stock sources %v: want several exchanges", srcs)
	}
	want := map[string]string{} // symbol → exchange
	for _, src := range srcs {
		if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(src, domain.TF4h, clk.t)); err != nil {
			t.Fatal(err)
		}
		syms, err := db.CandleSymbols(ctx, domain.Stocks, src.Exchange, domain.TF4h)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			if _, dup := want[s]; !dup {
				want[s] = src.Exchange
			}
		}
	}
	exchanges := map[string]bool{}
	for _, ex := range want {
		exchanges[ex] = true
	}
	if len(exchanges) < 2 {
		t.Fatalf("candles on %d exchange(s); want several", len(exchanges))
	}
	lines := &phaseSums{}
	saves := &countingSaves{DB: db}
	sc := &worker.Scorer{Store: saves, Region: "global", Logger: slog.New(lines), Now: clk.now}
	n, _, err := sc.Score(ctx, domain.Stocks, analytics.Swing)
	if err != nil || n != len(want) {
		t.Fatalf("scored %d, %v; want the %d assets of %d exchanges", n, err, len(want), len(exchanges))
	}
	if saves.saves != 1 {
		t.Errorf("%d save transactions for %d assets; want 1 (one pipeline for every exchange)", saves.saves, len(want))
	}
	if len(lines.candidates) != 1 || lines.candidates[0] != int64(len(want)) {
		t.Errorf("scoring runs logged with candidates %v; want one run of %d", lines.candidates, len(want))
	}
	list, err := db.AnalyticsList(ctx, domain.Stocks, analytics.Swing)
	if err != nil || len(list) != len(want) {
		t.Fatalf("list: %d reports, %v; want %d", len(list), err, len(want))
	}
	for _, rec := range list {
		if rec.Exchange != want[rec.Symbol] {
			t.Errorf("report of %s scored from %q, want %q", rec.Symbol, rec.Exchange, want[rec.Symbol])
		}
	}
}
