package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// TestPushIngestReadsTheSyntheticFeedAtEveryClose: on the synthetic feed
// the push ingest marks the candle combinations live (the scheduled REST
// ingest then loads only new series), loads the history over REST once,
// and at a minute close stores the closed 1m candle, final, and the new
// open one, with no REST ingest run.
func TestPushIngestReadsTheSyntheticFeedAtEveryClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if !worker.HasPushFeeds(mustSynthetic(t, nil), "us") {
		t.Fatal("the synthetic feed is not pushed")
	}
	clk := newAtomicClock(time.Date(2026, 11, 23, 12, 0, 30, 0, time.UTC))
	reg := mustSynthetic(t, clk.now)
	db := storetest.New(t)
	// Two symbols per combination keep the history load of the region short.
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clk.now, MaxCandleSymbols: 2}
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	in.Pushed = worker.PushedCandles(rdb, prefix)
	ticks := make(chan time.Time)
	s := &worker.PushIngest{In: in, Region: "us", Redis: rdb, KeyPrefix: prefix, Logger: discard(), LocalTicks: ticks,
		FlushEvery: 10 * time.Millisecond, OpenEvery: time.Hour}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	coinbase := domain.Combination{Market: domain.Crypto, Exchange: "coinbase", Instrument: "spot"}
	for _, c := range []domain.Combination{coinbase, {Market: domain.Stocks, Exchange: "nyse", Instrument: "stock"}} {
		pushtest.Eventually(t, c.String()+" marked live", func() bool { return in.Pushed(ctx, c, domain.TF1m).All })
	}
	syms, err := reg.Providers()[0].Symbols(ctx, coinbase)
	if err != nil {
		t.Fatal(err)
	}
	key1m := store.CandleKey{Market: domain.Crypto, Exchange: "coinbase", Symbol: syms[0], Timeframe: domain.TF1m}
	key1h := key1m
	key1h.Timeframe = domain.TF1h
	stored := func(k store.CandleKey) []domain.Candle {
		cs, err := db.Candles(ctx, k, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	for _, k := range []store.CandleKey{key1m, key1h} {
		pushtest.Eventually(t, "the history of "+k.String(), func() bool { return len(stored(k)) >= worker.InitialCandles })
	}

	clk.add(30*time.Second + 5*time.Millisecond) // 12:01:00.005
	ticks <- clk.now()
	minute := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	pushtest.Eventually(t, "the 12:01 candle", func() bool {
		cs := stored(key1m)
		return cs[len(cs)-1].Time.Equal(minute.Add(time.Minute))
	})
	clk.add(time.Hour)
	final, err := reg.Providers()[0].Candles(ctx, coinbase, syms[0], domain.TF1m, minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	cs := stored(key1m)
	if diff := cmp.Diff(final[0], cs[len(cs)-2]); diff != "" {
		t.Errorf("stored 12:00 candle is not the closed one (-want +got):\n%s", diff)
	}
}

func mustSynthetic(t *testing.T, now func() time.Time) *feeds.Registry {
	t.Helper()
	reg, err := feeds.New(feeds.Config{Names: []string{"synthetic"}, Now: now, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
