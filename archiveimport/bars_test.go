package archiveimport_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/marketscreener/market/archiveimport"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// TestImportStockBars: against the Alpaca simulator, two years of daily
// bars of an exchange's every stock come in multi-symbol requests (a few
// for the whole exchange, not one per symbol); a second run skips every
// series and sends no bars request.
func TestImportStockBars(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 19, 30, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	sim := exchangesim.New(exchangesim.Config{Seed: 5, Spot: 2, Perpetual: 1, Now: clock,
		Alpaca: exchangesim.AlpacaConfig{Assets: 120, Inactive: 5, Plan: exchangesim.AlpacaPaid}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{"alpaca"}, AlpacaKeyID: "k", AlpacaSecret: "s", AlpacaFeed: feeds.AlpacaSIP,
		BaseURLs: map[string]string{"alpaca": srv.URL, "alpaca-data": srv.URL}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	src := reg.Providers()[0].(archiveimport.BarsSource)
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	db := storetest.New(t)
	o := archiveimport.Options{Timeframes: []domain.Timeframe{domain.TF1d}, Now: clock,
		From: time.Date(2024, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	requests := func() int64 { return sim.Stats().Alpaca.Data.Requests }
	before := requests()
	rep, err := archiveimport.RunBars(ctx, src, db, "alpaca", []domain.Combination{nasdaq}, o)
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := src.Symbols(ctx, nasdaq)
	if rep.Series != len(syms) || rep.SeriesDone != len(syms) || len(rep.Refused) != 0 || len(syms) < 20 {
		t.Fatalf("series %d, done %d, refused %v; want every one of %d", rep.Series, rep.SeriesDone, rep.Refused, len(syms))
	}
	if n := requests() - before; n > int64(len(syms))/2 {
		t.Errorf("%d bars requests for %d symbols: not multi-symbol", n, len(syms))
	}
	cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Stocks, Exchange: "nasdaq", Symbol: syms[0], Timeframe: domain.TF1d}, 10_000)
	if err != nil || len(cs) < 400 || cs[0].Time.Before(o.From) {
		t.Fatalf("%s: %d daily bars from %v (%v); want two years' sessions from 2024-11", syms[0], len(cs), cs[0].Time, err)
	}
	before = requests()
	again, err := archiveimport.RunBars(ctx, src, db, "alpaca", []domain.Combination{nasdaq}, o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Files != 0 || again.Skipped != len(syms) || requests() != before {
		t.Errorf("second run: %d loaded, %d skipped, %d requests; want 0, %d, 0", again.Files, again.Skipped, requests()-before, len(syms))
	}
}
