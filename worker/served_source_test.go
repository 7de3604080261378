package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
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
