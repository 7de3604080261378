package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// reply is one raw HTTP exchange.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do GETs path with the fixture's key and extra request headers.
func (f *marketFixture) do(t *testing.T, path string, headers ...string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/v1/public"+path, nil)
	req.Header.Set("X-API-Key", f.key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// seedMarketData stores screener rows, candles, two scored assets and
// statistics, so every data GET answers 200.
func seedMarketData(t testing.TB, f *marketFixture) {
	t.Helper()
	ctx := context.Background()
	rows := []domain.Ticker{
		{Symbol: "BTC_USDT", Price: 97000, ChangePct: 1.5, Volume: 1e9, UpdatedAt: f.now.Add(-3 * time.Second)},
		{Symbol: "ETH_USDT", Price: 3100, ChangePct: -2, Volume: 4e8, UpdatedAt: f.now.Add(-3 * time.Second)},
		{Symbol: "SOL_USDT", Price: 180, ChangePct: 4, Volume: 1e8, UpdatedAt: f.now.Add(-3 * time.Second)},
	}
	if err := f.db.ReplaceTickers(ctx, binanceSpot, rows); err != nil {
		t.Fatal(err)
	}
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF1h}
	var cs []domain.Candle
	for i := range 30 {
		p := 3000 + float64(i)
		cs = append(cs, domain.Candle{Time: f.now.Truncate(time.Hour).Add(time.Duration(i-29) * time.Hour), Open: p, High: p + 5, Low: p - 5, Close: p + 1, Volume: 10})
	}
	if err := f.db.UpsertCandles(ctx, k, cs); err != nil {
		t.Fatal(err)
	}
	seedAnalytics(t, f, "BTC_USDT", 0.004)
	seedAnalytics(t, f, "ETH_USDT", -0.004)
	if err := f.db.SaveStats(ctx, domain.Crypto, "backtest",
		[]stats.VerdictStat{{Verdict: "growth", HorizonDays: 5, SampleSize: 40, Source: "backtest"}},
		[]stats.FactorStat{{Factor: "rsi_14", HorizonDays: 5, SampleSize: 40, Source: "backtest"}}, 2, f.now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.cache.InvalidateAll()
}

// withRefresh replaces the fixture's server by one with a worker schedule.
func withRefresh(t *testing.T, f *marketFixture, r api.RefreshIntervals) {
	t.Helper()
	now := func() time.Time { return f.now }
	srv := api.New(api.Config{Region: "global", Now: now, Cache: f.cache, Refresh: r}, f.db, storeGate{f.db})
	f.srv = httptest.NewServer(srv.Handler())
	t.Cleanup(f.srv.Close)
}

// Every data GET carries a strong ETag, Last-Modified and a private
// max-age up to the next refresh of its data; the validators sent back
// give 304 without a body, and anything else the full answer.
func TestConditionalRequestsOnEveryDataGET(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)
	// 12:00:17.5: the next ticker tick (10 s) is 2.5 s away, the next
	// candle and score tick (1 min) 42.5 s, the next statistics tick
	// (15 min) 882.5 s; max-age rounds up.
	f.now = f.now.Add(17500 * time.Millisecond)
	withRefresh(t, f, api.RefreshIntervals{Tickers: 10 * time.Second, Candles: time.Minute, Scores: time.Minute, Stats: 15 * time.Minute})

	// weak: the body carries data_age_seconds, which moves with the clock
	// under the same tag, so the tag is weak (W/"…").
	cases := []struct {
		path, cacheControl string
		weak               bool
	}{
		{"/screener/crypto/binance/spot", "private, max-age=3", false},
		{"/screener/crypto/binance/spot?volume_min=2e8", "private, max-age=3", false},
		{"/screener/crypto/binance/spot?symbols=eth/usdt,BTC_USDT", "private, max-age=3", false},
		{"/ohlcv/crypto/binance/ETH_USDT/1h", "private, max-age=43", false},
		{"/ohlcv/crypto/binance/ETH/USDT/1h?limit=5", "private, max-age=43", false},
		{"/analytics/crypto/list", "private, max-age=43", true},
		{"/analytics/crypto/list?symbols=ETH_USDT", "private, max-age=43", true},
		{"/analytics/crypto/BTC_USDT?lang=en", "private, max-age=43", true},
		{"/analytics/crypto/BTC_USDT/history", "private, max-age=43", false},
		{"/analytics/top-setups", "private, max-age=43", true},
		{"/analytics/reports?market=crypto&symbols=BTC_USDT,ETH_USDT", "private, max-age=43", true},
		{"/analytics/crypto/stats", "private, max-age=883", false},
		{"/analytics/crypto/factor-stats?horizon_days=5", "private, max-age=883", false},
	}
	for _, c := range cases {
		first := f.do(t, c.path)
		etag, lastMod := first.header.Get("ETag"), first.header.Get("Last-Modified")
		if first.status != 200 || len(first.body) == 0 {
			t.Fatalf("%s: %d %s", c.path, first.status, first.body)
		}
		opaque, weak := strings.CutPrefix(etag, "W/")
		if len(opaque) < 3 || opaque[0] != '"' || opaque[len(opaque)-1] != '"' || weak != c.weak {
			t.Errorf("%s: ETag %q, want a tag, weak: %v", c.path, etag, c.weak)
		}
		if lm, err := http.ParseTime(lastMod); err != nil || lm.After(f.now) {
			t.Errorf("%s: Last-Modified %q (%v), want an HTTP-date not after now", c.path, lastMod, err)
		}
		if got := first.header.Get("Cache-Control"); got != c.cacheControl {
			t.Errorf("%s: Cache-Control %q, want %q", c.path, got, c.cacheControl)
		}
		if again := f.do(t, c.path); again.header.Get("ETag") != etag || string(again.body) != string(first.body) {
			t.Errorf("%s: a second read has ETag %q (first %q) or another body", c.path, again.header.Get("ETag"), etag)
		}

		for _, hdrs := range [][]string{
			{"If-None-Match", etag},
			{"If-None-Match", opaque},
			{"If-None-Match", "W/" + opaque},
			{"If-None-Match", `"other", ` + etag},
			{"If-None-Match", "*"},
			{"If-Modified-Since", lastMod},
			{"If-Modified-Since", f.now.Add(time.Hour).Format(http.TimeFormat)},
		} {
			r := f.do(t, c.path, hdrs...)
			if r.status != http.StatusNotModified || len(r.body) != 0 {
				t.Errorf("%s with %v: %d %q, want 304 without a body", c.path, hdrs, r.status, r.body)
				continue
			}
			if r.header.Get("ETag") != etag || r.header.Get("Cache-Control") != c.cacheControl || r.header.Get("Content-Type") != "" {
				t.Errorf("%s with %v: 304 headers %v, want ETag %s, Cache-Control and no Content-Type", c.path, hdrs, r.header, etag)
			}
			if r.header.Get("RateLimit") == "" || r.header.Get("X-Request-Id") == "" {
				t.Errorf("%s with %v: 304 without the gate's headers: %v", c.path, hdrs, r.header)
			}
		}
		lm, _ := http.ParseTime(lastMod)
		for _, hdrs := range [][]string{
			{"If-None-Match", `"other"`},
			{"If-None-Match", etag[:len(etag)-2] + `x"`},
			{"If-Modified-Since", lm.Add(-time.Second).Format(http.TimeFormat)},
			{"If-Modified-Since", "not a date"},
			{"If-None-Match", `"other"`, "If-Modified-Since", lastMod}, // If-None-Match wins
		} {
			r := f.do(t, c.path, hdrs...)
			if r.status != 200 || string(r.body) != string(first.body) || r.header.Get("ETag") != etag {
				t.Errorf("%s with %v: %d, want the full 200", c.path, hdrs, r.status)
			}
		}
	}
}

// A new body has a new tag: the old one no longer matches.
func TestETagFollowsTheData(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)
	first := f.do(t, "/screener/crypto/binance/spot")
	rows := []domain.Ticker{{Symbol: "BTC_USDT", Price: 98000, ChangePct: 1.5, Volume: 1e9, UpdatedAt: f.now}}
	if err := f.db.ReplaceTickers(context.Background(), binanceSpot, rows); err != nil {
		t.Fatal(err)
	}
	f.cache.Invalidate(readcache.Tickers(binanceSpot))
	r := f.do(t, "/screener/crypto/binance/spot", "If-None-Match", first.header.Get("ETag"))
	if r.status != 200 || r.header.Get("ETag") == first.header.Get("ETag") || !strings.Contains(string(r.body), "98000") {
		t.Fatalf("after new data: %d ETag %s (was %s) %s, want 200 with a new tag", r.status, r.header.Get("ETag"), first.header.Get("ETag"), r.body)
	}
	if r := f.do(t, "/screener/crypto/binance/spot", "If-Modified-Since", first.header.Get("Last-Modified")); r.status != 200 {
		t.Fatalf("If-Modified-Since before the new data: %d, want 200", r.status)
	}
}

// Errors are never conditional: they carry no validators, and a matching
// If-None-Match does not turn them into a 304.
func TestErrorsAreNotConditional(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)
	for _, path := range []string{"/analytics/crypto/NOPE_USDT", "/ohlcv/crypto/binance/ETH_USDT/2h", "/screener/crypto/binance/spot?symbols="} {
		r := f.do(t, path, "If-None-Match", "*")
		if r.status < 400 || r.header.Get("ETag") != "" || r.header.Get("Last-Modified") != "" {
			t.Errorf("%s: %d ETag %q Last-Modified %q, want an error without validators", path, r.status, r.header.Get("ETag"), r.header.Get("Last-Modified"))
		}
	}
}

// /usage and /webhooks are never stored by a cache.
func TestUsageAndWebhooksAreNoStore(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	for _, path := range []string{"/usage", "/webhooks"} {
		r := f.do(t, path)
		if r.status != 200 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("ETag") != "" {
			t.Errorf("%s: %d Cache-Control %q ETag %q, want 200 no-store without a tag", path, r.status, r.header.Get("Cache-Control"), r.header.Get("ETag"))
		}
	}
}

// Without a statistics schedule (MARKET_STATS_INTERVAL=0) a client must
// revalidate, cheaply with the tag.
func TestStatsWithoutScheduleMustRevalidate(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)
	if r := f.do(t, "/analytics/crypto/stats"); r.status != 200 || r.header.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("stats: %d Cache-Control %q, want private, no-cache", r.status, r.header.Get("Cache-Control"))
	}
}
