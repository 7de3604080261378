package worker_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// scoresStocks4h is a change sink that wants the stocks' scored series
// (4h, the swing style's) and records nothing.
type scoresStocks4h struct{}

func (scoresStocks4h) WantsCandles(m domain.Market, _ string, tf domain.Timeframe) bool {
	return m == domain.Stocks && tf == domain.TF4h
}
func (scoresStocks4h) CandlesChanged(context.Context, []store.CandleKey)            {}
func (scoresStocks4h) FundamentalsChanged(context.Context, domain.Market, []string) {}

// TestAlpacaBulkIngest: against the Alpaca simulator, one candle task reads
// every stock of an exchange in a few multi-symbol requests and stores
// what the simulator serves; on a cold start the display-only timeframes
// wait for the scored one's first complete pass; and once a poll has
// completed, the next starts every series at that poll (less two bars and
// a minute), so stocks that stopped trading hours ago cost no request of
// their own.
func TestAlpacaBulkIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Wednesday 25 November 2026, 14:30 New York: in the session.
	now := time.Date(2026, 11, 25, 19, 30, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	sim := exchangesim.New(exchangesim.Config{Seed: 11, Spot: 2, Perpetual: 1, Now: clock,
		Alpaca: exchangesim.AlpacaConfig{Assets: 120, Inactive: 5, Plan: exchangesim.AlpacaPaid}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{"alpaca"}, AlpacaKeyID: "k", AlpacaSecret: "s", AlpacaFeed: feeds.AlpacaSIP,
		BaseURLs: map[string]string{"alpaca": srv.URL, "alpaca-data": srv.URL}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	syms, err := reg.Providers()[0].Symbols(ctx, nasdaq)
	if err != nil || len(syms) < 30 {
		t.Fatalf("nasdaq: %d symbols, %v", len(syms), err)
	}
	requests := func() int64 { return sim.Stats().Alpaca.Data.Requests }
	stored := func(tf domain.Timeframe) int {
		t.Helper()
		latest, err := db.LatestCandleTimes(ctx, domain.Stocks, "nasdaq", tf, syms)
		if err != nil {
			t.Fatal(err)
		}
		return len(latest)
	}

	// A display-only timeframe first: nothing is loaded yet.
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if n := stored(domain.TF1m); n != 0 {
		t.Fatalf("1m before the scored 4h: %d series loaded, want none", n)
	}

	before := requests()
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF4h, now)); err != nil {
		t.Fatal(err)
	}
	if n, sent := stored(domain.TF4h), requests()-before; n < len(syms)*9/10 || sent > 12 {
		t.Fatalf("4h: %d of %d series in %d requests; want (nearly) every one in a few multi-symbol requests", n, len(syms), sent)
	}
	got, err := db.Candles(ctx, store.CandleKey{Market: domain.Stocks, Exchange: "nasdaq", Symbol: syms[0], Timeframe: domain.TF4h}, 3)
	if err != nil || len(got) == 0 {
		t.Fatalf("%s 4h: %v, %v", syms[0], got, err)
	}

	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if n := stored(domain.TF1m); n < len(syms)/2 {
		t.Fatalf("1m after the 4h pass: %d series, want them loaded", n)
	}

	// Two hours on: the first poll of this timeframe by a fresh process
	// starts each series where it stands; the next one starts them all at
	// that poll, one request for the exchange.
	now = now.Add(2 * time.Hour)
	fresh := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}}
	for range 2 {
		now = now.Add(time.Minute)
		if err := fresh.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Minute)
	before = requests()
	if err := fresh.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if sent := requests() - before; sent != 1 {
		t.Errorf("a poll after a complete one: %d requests, want 1 (every series from that poll)", sent)
	}
	latest, err := db.LatestCandleTimes(ctx, domain.Stocks, "nasdaq", domain.TF1m, syms[:1])
	if err != nil || !latest[syms[0]].After(now.Add(-5*time.Minute)) {
		t.Errorf("%s: newest 1m candle %v at %v", syms[0], latest[syms[0]], now)
	}
}
