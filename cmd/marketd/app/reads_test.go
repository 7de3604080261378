package app_test

import (
	"net/http"
	"testing"
)

// A 304 and a batch of many symbols each count as one request, and the
// rate limit comes before a conditional answer: through the real program
// and its real gate.
func TestConditionalAndBatchReadsCountOnce(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	mustRun(t, env, "backfill", "--market", "crypto", "--exchange", "binance", "--symbols", "BTC_USDT", "--timeframe", "1h", "--days", "2")
	id, key := newClient(t, env, "--tier", "business", "--rate-limit", "4", "--monthly-quota", "1000")
	srv := startServer(t, env, "api")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"
	c := httpClient(t)

	send := func(path string, headers ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("X-API-Key", key)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	first := send("/ohlcv/crypto/binance/BTC_USDT/1h")
	etag := first.Header.Get("ETag")
	if first.StatusCode != 200 || etag == "" || first.Header.Get("Cache-Control") == "" {
		t.Fatalf("ohlcv: %d ETag %q Cache-Control %q", first.StatusCode, etag, first.Header.Get("Cache-Control"))
	}
	if r := send("/ohlcv/crypto/binance/BTC_USDT/1h", "If-None-Match", etag); r.StatusCode != http.StatusNotModified || r.Header.Get("RateLimit") == "" {
		t.Fatalf("conditional ohlcv: %d (RateLimit %q), want 304 with the rate-limit headers", r.StatusCode, r.Header.Get("RateLimit"))
	}
	if got := usedThisMonth(t, env, id); got != 2 {
		t.Fatalf("after a 200 and a 304: used_this_month %d, want 2", got)
	}
	if r := send("/analytics/reports?market=crypto&symbols=BTC_USDT,ETH_USDT,SOL_USDT,XRP_USDT,ADA_USDT"); r.StatusCode != 200 {
		t.Fatalf("batch: %d", r.StatusCode)
	}
	if got := usedThisMonth(t, env, id); got != 3 {
		t.Fatalf("after a batch of five symbols: used_this_month %d, want 3", got)
	}
	if r := send("/ohlcv/crypto/binance/BTC_USDT/1h", "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
		t.Fatalf("fourth request: %d, want 304", r.StatusCode)
	}
	// The fifth request in the minute is over the limit: 429, not 304.
	if r := send("/ohlcv/crypto/binance/BTC_USDT/1h", "If-None-Match", etag); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("ETag") != "" {
		t.Fatalf("over the rate limit: %d ETag %q, want 429 without a tag", r.StatusCode, r.Header.Get("ETag"))
	}
	if got := usedThisMonth(t, env, id); got != 4 {
		t.Fatalf("used_this_month %d, want 4 (the 429 is not counted)", got)
	}
}
