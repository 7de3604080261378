package worker_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// TestTickerRefreshBesideABackfill: against the Binance simulator, a
// backfill (bulk work) takes the spot budget as far as bulk work may and
// is then refused; the screener's ticker refresh (ticker/24hr for every
// symbol, weight 80) still goes through in the same window.
//
// The budget's window is a day and the clock stands still at noon, so the
// next window is far past any caller's patience: whoever does not fit is
// refused at once, and nothing depends on the machine's speed. The spot
// limit is 400 (planned 320, bulk work's 240: exchangeInfo's 20 and 110
// klines pages of 2).
func TestTickerRefreshBesideABackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	sim := exchangesim.New(exchangesim.Config{Seed: 5, Spot: 150, Perpetual: 5, Now: clock})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	reg, err := feeds.New(feeds.Config{
		Names:    []string{"binance"},
		BaseURLs: map[string]string{"binance": srv.URL, "binance-futures": srv.URL},
		Now:      clock,
		Budget:   hostbudget.New(hostbudget.Options{Redis: redistest.Client(t), Prefix: redistest.Prefix(t)}),
		Limits:   map[string]hostbudget.Limit{"binance": {Window: 24 * time.Hour, Max: 400}},
	})
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock}
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	syms, err := reg.Providers()[0].Symbols(ctx, spot)
	if err != nil {
		t.Fatal(err)
	}

	n, err := in.Backfill(ctx, db, spot, domain.TF1m, syms, now.Add(-30*time.Minute), nil)
	if err == nil || !strings.Contains(err.Error(), "rate limited until") {
		t.Fatalf("backfill of %d symbols: %v, want refused by the budget", len(syms), err)
	}
	if n != 110*31 {
		t.Errorf("backfill stored %d candles before the budget refused it, want 110 symbols × 31 (11:30 to the open 12:00)", n)
	}
	if err := in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, now)); err != nil {
		t.Fatalf("ticker refresh beside the backfill: %v", err)
	}
	rows, err := db.Tickers(ctx, spot)
	if err != nil || len(rows) != len(syms) {
		t.Errorf("screener: %d rows, %v; want %d", len(rows), err, len(syms))
	}
	if st := sim.Stats().Spot; st.PeakWeight != 240+80 || st.Refused429 != 0 {
		t.Errorf("simulator: peak weight %d (want 240 + 80), 429s %d", st.PeakWeight, st.Refused429)
	}
}
