package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// TestPushIngestLoadsTheHistoryOfNewSeries: against the local exchange
// simulator, whose streams push every series' open candle long before the
// REST catch-up (slowed here) reaches it, every new series still gets its
// initial history (worker.InitialCandles), not just the pushed candles.
func TestPushIngestLoadsTheHistoryOfNewSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := exchangesim.New(exchangesim.Config{Spot: 3, Perpetual: 1, KlineEvery: 20 * time.Millisecond})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/klines") {
			time.Sleep(50 * time.Millisecond)
		}
		sim.ServeHTTP(w, r)
	})
	t.Cleanup(sim.Close)
	db, in := runPushIngest(t, slow)

	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	pushtest.Eventually(t, "spot candles marked live", func() bool { return in.Pushed(ctx, spot, domain.TF1m).All })
	// The mark is set while the catch-up loads the history: every series
	// gets its initial history, though its pushed candles are stored
	// meanwhile (the catch-up read where each series starts before).
	stored := func(sym string, tf domain.Timeframe) int {
		cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: tf}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, sym := range []string{"BTC_USDT", "ETH_USDT", "BTC_FDUSD"} {
		for _, tf := range domain.Timeframes {
			for stored(sym, tf) < worker.InitialCandles && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := stored(sym, tf); n < worker.InitialCandles {
				t.Errorf("%s %s: %d candles stored, want the initial %d", sym, tf, n, worker.InitialCandles)
			}
		}
	}
}

// TestPushIngestStoresPushesWhileCatchingUp: the pushed candles are
// stored while the REST catch-up is still loading the history (blocked
// here until the test has seen them), so a candle that closes then is
// stored and scored at its close; the history still arrives once REST
// answers.
func TestPushIngestStoresPushesWhileCatchingUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := exchangesim.New(exchangesim.Config{Spot: 3, Perpetual: 1, KlineEvery: 20 * time.Millisecond})
	unblock := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(unblock) }) }
	blocked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/klines") {
			select {
			case <-unblock:
			case <-r.Context().Done():
				return
			}
		}
		sim.ServeHTTP(w, r)
	})
	t.Cleanup(sim.Close)
	db, _ := runPushIngest(t, blocked)
	t.Cleanup(open) // before the server closes: a blocked request ends

	stored := func(tf domain.Timeframe) int {
		cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: tf}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	// Every kline request is blocked: whatever is stored was pushed.
	for _, tf := range []domain.Timeframe{domain.TF1m, domain.TF15m, domain.TF1d} {
		pushtest.Eventually(t, "BTC_USDT "+string(tf)+" pushes stored during the catch-up", func() bool { return stored(tf) > 0 })
	}
	open()
	pushtest.Eventually(t, "BTC_USDT 15m history once REST answers", func() bool { return stored(domain.TF15m) >= worker.InitialCandles })
}

// TestPushIngestLoadsHistoryAfterACutCatchUp: a catch-up lets the pushes
// through before it loads; when it is cut short (here every kline request
// is refused, then the push ingest stops: in production a new plan
// restarts the push feeds, or the worker dies), the series keep their
// pushed candles and no history. The next push ingest's catch-up must
// still load their history: started from the newest (pushed) candle, it
// loaded nothing, and neither did the scheduled REST ingest (it loads only
// series with nothing stored), so the series were never scored.
func TestPushIngestLoadsHistoryAfterACutCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := exchangesim.New(exchangesim.Config{Spot: 3, Perpetual: 1, KlineEvery: 20 * time.Millisecond})
	t.Cleanup(sim.Close)
	var refuse atomic.Bool
	refuse.Store(true)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/klines") && refuse.Load() {
			http.Error(w, `{"code":-1003,"msg":"busy"}`, http.StatusServiceUnavailable)
			return
		}
		sim.ServeHTTP(w, r)
	})
	db := storetest.New(t)
	stored := func(tf domain.Timeframe) int {
		cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: tf}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	_, _, stop := startPushIngest(t, db, h, push.Config{}, 10*time.Millisecond, 10*time.Millisecond)
	t.Cleanup(stop)
	for _, tf := range []domain.Timeframe{domain.TF15m, domain.TF1h} {
		pushtest.Eventually(t, "BTC_USDT "+string(tf)+" pushes stored while the catch-up fails", func() bool { return stored(tf) > 0 })
	}
	stop()
	if n := stored(domain.TF1h); n >= worker.InitialCandles {
		t.Fatalf("%d 1h candles stored with every kline request refused", n)
	}

	refuse.Store(false)
	_, _, stop2 := startPushIngest(t, db, h, push.Config{}, 10*time.Millisecond, 10*time.Millisecond)
	t.Cleanup(stop2)
	for _, tf := range []domain.Timeframe{domain.TF15m, domain.TF1h, domain.TF1d} {
		pushtest.Eventually(t, "BTC_USDT "+string(tf)+" history after the cut catch-up", func() bool { return stored(tf) >= worker.InitialCandles })
	}
}

// runPushIngest runs the push ingest of the eu region against the
// simulator behind h (its REST and its streams), and returns its store.
func runPushIngest(t *testing.T, h http.Handler) (*store.DB, *worker.Ingester) {
	t.Helper()
	db, in, _ := runPushIngestWith(t, h, push.Config{}, 10*time.Millisecond, 10*time.Millisecond)
	return db, in
}

// runPushIngestWith is runPushIngest with the push feeds' settings
// (their base URLs set here) and the sink's FlushEvery and OpenEvery; it
// also returns the feeds.
func runPushIngestWith(t *testing.T, h http.Handler, pcfg push.Config, flush, open time.Duration) (*store.DB, *worker.Ingester, *feeds.Registry) {
	t.Helper()
	db := storetest.New(t)
	in, reg, stop := startPushIngest(t, db, h, pcfg, flush, open)
	t.Cleanup(stop)
	return db, in, reg
}

// startPushIngest runs a push ingest on db as runPushIngestWith does, until
// stop.
func startPushIngest(t *testing.T, db *store.DB, h http.Handler, pcfg push.Config, flush, open time.Duration) (in *worker.Ingester, reg *feeds.Registry, stop func()) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	reg, err := feeds.New(feeds.Config{Names: []string{"binance"}, BaseURLs: map[string]string{"binance": srv.URL, "binance-futures": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	in = &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: time.Now}
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	in.Pushed = worker.PushedCandles(rdb, prefix)
	pcfg.BaseURLs = map[string]string{push.NameBinanceStream: ws, push.NameBinanceFuturesStream: ws}
	s := &worker.PushIngest{In: in, Region: "eu", Redis: rdb, KeyPrefix: prefix, Logger: discard(),
		FlushEvery: flush, OpenEvery: open, Push: pcfg}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	var once sync.Once
	return in, reg, func() { once.Do(func() { cancel(); <-done }) }
}
