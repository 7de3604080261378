package readcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
)

var binanceSpot = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}

// Every scope a writer can announce survives the bus's wire form, and each
// key lies in the scope its writer announces.
func TestScopeWireFormRoundTrips(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scope readcache.Scope
		wire  string
		keys  []readcache.Key
	}{
		{readcache.Tickers(binanceSpot), "tickers:crypto/binance/spot", []readcache.Key{readcache.TickerSnapshot(binanceSpot)}},
		{readcache.Candles(domain.Crypto, "binance"), "candles:crypto/binance", []readcache.Key{
			readcache.CandleSeries(domain.Crypto, "binance", "BTC_USDT", domain.TF1h),
			readcache.CandleBody(domain.Crypto, "binance", "BTC_USDT", domain.TF1h, 200),
			readcache.CandleSymbols(domain.Crypto, "binance", domain.TF1h)}},
		{readcache.Analytics(domain.Stocks), "analytics:stocks", []readcache.Key{
			readcache.AnalyticsList(domain.Stocks, analytics.Swing), readcache.AnalyticsListBody(domain.Stocks, analytics.Swing),
			readcache.AnalyticsReport(domain.Stocks, analytics.Swing, "AAPL", analytics.DefaultLang), readcache.MarketStats(domain.Stocks)}},
		{readcache.TopSetups(), "top-setups", []readcache.Key{readcache.TopSetupsBody("crypto,forex", "growth", 20)}},
	}
	for _, c := range cases {
		if got := c.scope.String(); got != c.wire {
			t.Errorf("%v.String() = %q, want %q", c.scope, got, c.wire)
		}
		back, err := readcache.ParseScope(c.wire)
		if err != nil || back != c.scope {
			t.Errorf("ParseScope(%q) = %v, %v; want %v", c.wire, back, err, c.scope)
		}
		for _, k := range c.keys {
			if k.Scope != c.scope {
				t.Errorf("key %v is in scope %v, want %v", k, k.Scope, c.scope)
			}
		}
	}
	for _, bad := range []string{"", "tickers:crypto/binance", "candles:crypto", "analytics:", "top-setups:x", "nope:crypto", "tickers:a/b/c/d"} {
		if _, err := readcache.ParseScope(bad); err == nil {
			t.Errorf("ParseScope(%q) accepted a malformed scope", bad)
		}
	}
}

func newCache() (*readcache.Cache, *time.Time) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	return readcache.New(10*time.Second, func() time.Time { return now }), &now
}

func value(v string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return v, nil }
}

func TestInvalidateDropsOnlyItsScope(t *testing.T) {
	t.Parallel()
	c, now := newCache()
	ctx := context.Background()
	series := readcache.CandleSeries(domain.Crypto, "binance", "BTC_USDT", domain.TF1h)
	other := readcache.CandleSeries(domain.Crypto, "kraken", "BTC_USD", domain.TF1h)
	snap := readcache.TickerSnapshot(binanceSpot)
	for _, k := range []readcache.Key{series, other, snap} {
		if _, err := readcache.Load(ctx, c, k, value("old")); err != nil {
			t.Fatal(err)
		}
	}
	c.Invalidate(readcache.Candles(domain.Crypto, "binance"))
	for k, want := range map[readcache.Key]string{series: "new", other: "old", snap: "old"} {
		if got, _ := readcache.Load(ctx, c, k, value("new")); got != want {
			t.Errorf("%v after invalidating candles:crypto/binance: %q, want %q", k, got, want)
		}
	}
	*now = now.Add(11 * time.Second)
	if got, _ := readcache.Load(ctx, c, snap, value("fresh")); got != "fresh" {
		t.Errorf("after the TTL: %q, want a reload", got)
	}
}

// A client that disconnects while its request runs the shared load does
// not turn the other waiters' requests into errors: the load runs on a
// context it cannot cancel, and they get its value.
func TestSharedLoadSurvivesTheFirstCallerLeaving(t *testing.T) {
	t.Parallel()
	c, _ := newCache()
	k := readcache.AnalyticsReport(domain.Crypto, analytics.Swing, "BTC_USDT", analytics.DefaultLang)
	first, leave := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	var loads atomic.Int32
	var loadErr error
	load := func(ctx context.Context) (string, error) {
		loads.Add(1)
		close(started)
		<-release
		loadErr = ctx.Err() // the first caller has left by now
		return "report", ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = readcache.Load(first, c, k, load)
	}()
	<-started
	const waiters = 8
	got := make([]string, waiters)
	errs := make([]error, waiters)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = readcache.Load(context.Background(), c, k, func(context.Context) (string, error) {
				loads.Add(1)
				return "second load", nil
			})
		}()
	}
	leave()
	// A waiter with a context of its own that ends stops waiting at once.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := readcache.Load(gone, c, k, value("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose own request ended: %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if loadErr != nil {
		t.Fatalf("the shared load saw its context end (%v) when the first caller left", loadErr)
	}
	for i := range waiters {
		if errs[i] != nil || (got[i] != "report" && got[i] != "second load") {
			t.Errorf("waiter %d: %q, %v; want the shared load's value", i, got[i], errs[i])
		}
	}
	if got, _ := readcache.Load(context.Background(), c, k, value("x")); got != "report" {
		t.Errorf("after the load: %q, want the cached report", got)
	}
}

// A load that started before an invalidation of its scope may have read
// the old data: it answers its callers but is not cached.
func TestLoadRacingAnInvalidationIsNotCached(t *testing.T) {
	t.Parallel()
	c, _ := newCache()
	k := readcache.TickerSnapshot(binanceSpot)
	v, err := readcache.Load(context.Background(), c, k, func(context.Context) (string, error) {
		c.Invalidate(readcache.Tickers(binanceSpot)) // the write lands while the load reads
		return "read before the write", nil
	})
	if err != nil || v != "read before the write" {
		t.Fatalf("load: %q, %v", v, err)
	}
	if got, _ := readcache.Load(context.Background(), c, k, value("after")); got != "after" {
		t.Errorf("next read: %q, want a fresh load", got)
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	c, _ := newCache()
	k := readcache.MarketStats(domain.Crypto)
	boom := errors.New("boom")
	if _, err := readcache.Load(context.Background(), c, k, func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if got, err := readcache.Load(context.Background(), c, k, func(context.Context) (int, error) { return 7, nil }); err != nil || got != 7 {
		t.Errorf("after an error: %d, %v; want a new load", got, err)
	}
}

// A generation moves with every invalidation of its scope, also for a
// scope nothing was cached in, and only then.
func TestGenerationMovesWithInvalidation(t *testing.T) {
	t.Parallel()
	c := readcache.New(time.Minute, time.Now)
	a, b := readcache.Analytics(domain.Crypto), readcache.Analytics(domain.Stocks)
	g0 := c.Generation(a)
	if c.Generation(a) != g0 {
		t.Fatal("generation moved without an invalidation")
	}
	c.Invalidate(b)
	if c.Generation(a) != g0 {
		t.Fatal("another scope's invalidation moved the generation")
	}
	c.Invalidate(a)
	g1 := c.Generation(a)
	if g1 == g0 {
		t.Fatal("Invalidate did not move the generation")
	}
	c.InvalidateAll()
	if c.Generation(a) == g1 {
		t.Fatal("InvalidateAll did not move the generation")
	}
}
