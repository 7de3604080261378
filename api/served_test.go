package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// okxOnly serves what MARKET_FEEDS=okx serves in the global region.
func okxOnly(c domain.Combination) bool { return c.Market == domain.Crypto && c.Exchange == "okx" }

// problemDetail is the detail of a problem+json body.
func problemDetail(t *testing.T, body []byte) string {
	t.Helper()
	var p struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %s: %v", body, err)
	}
	return p.Detail
}

// TestUnservedCombinationIs404: with okx alone served, the screener and
// OHLCV of a combination of the catalogue no feed serves are a 404 whose
// detail lists what is served, as for an unknown combination, even with
// rows left in the database; the served ones answer as usual.
func TestUnservedCombinationIs404(t *testing.T) {
	t.Parallel()
	f := newServedFixture(t, okxOnly)
	ctx := context.Background()
	okxSpot := domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"}
	rows := []domain.Ticker{{Symbol: "BTC_USDT", Price: 97000, Volume: 1e9, UpdatedAt: f.now}}
	candles := []domain.Candle{{Time: f.now.Add(-time.Hour), Open: 1, High: 2, Low: 1, Close: 2, Volume: 3}}
	for _, c := range []domain.Combination{binanceSpot, okxSpot} {
		if err := f.db.ReplaceTickers(ctx, c, rows); err != nil {
			t.Fatal(err)
		}
		k := store.CandleKey{Market: domain.Crypto, Exchange: c.Exchange, Symbol: "BTC_USDT", Timeframe: domain.TF1h}
		if err := f.db.UpsertCandles(ctx, k, candles); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ path, available string }{
		{"/screener/crypto/binance/spot", "available for crypto: okx/spot, okx/perpetual"},
		{"/screener/crypto/binance/perpetual", "available for crypto: okx/spot, okx/perpetual"},
		{"/screener/crypto/kraken/spot", "available for crypto: okx/spot, okx/perpetual"},
		{"/screener/forex/oanda/major", "available for forex: none"},
		{"/ohlcv/crypto/binance/BTC_USDT/1h", "available for crypto: okx/spot, okx/perpetual"},
		{"/ohlcv/stocks/nasdaq/AAPL/1h", "available for stocks: none"},
	} {
		status, body := f.get(t, c.path)
		if status != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", c.path, status, body)
			continue
		}
		if d := problemDetail(t, body); !strings.HasSuffix(d, c.available) || !strings.Contains(d, "(global)") {
			t.Errorf("%s: detail %q, want the region and %q", c.path, d, c.available)
		}
	}
	if status, body := f.get(t, "/screener/crypto/binance/spot"); !strings.Contains(problemDetail(t, body), "crypto/binance/spot is not served") {
		t.Errorf("unserved screener: %d %s, want it said to be not served", status, body)
	}
	if status, body := f.get(t, "/screener/crypto/kraken/spot"); !strings.Contains(problemDetail(t, body), "no crypto/kraken/spot in this region") {
		t.Errorf("unknown screener: %d %s, want it said to be unknown", status, body)
	}
	for _, path := range []string{"/screener/crypto/okx/spot", "/ohlcv/crypto/okx/BTC_USDT/1h"} {
		if status, body := f.get(t, path); status != http.StatusOK {
			t.Errorf("%s (served): %d %s, want 200", path, status, body)
		}
	}
	if status, body := f.get(t, "/screener/crypto/okx/perpetual"); status != http.StatusServiceUnavailable {
		t.Errorf("served, nothing ingested yet: %d %s, want 503", status, body)
	}

	every := newMarketFixture(t)
	if status, body := every.get(t, "/screener/forex/oanda/major"); status != http.StatusServiceUnavailable {
		t.Errorf("every combination served, nothing ingested: %d %s, want 503", status, body)
	}
}

// TestAnalyticsFollowTheServedSource: a market with an analytics source
// among the served combinations is warming up (503) until scored; one
// without (nothing serves its candles) is never scored, so it is not
// reported as warming up forever.
func TestAnalyticsFollowTheServedSource(t *testing.T) {
	t.Parallel()
	okx := newServedFixture(t, okxOnly)
	every := newMarketFixture(t)
	for _, c := range []struct {
		f    *marketFixture
		path string
		want int
	}{
		{okx, "/analytics/crypto/list", http.StatusServiceUnavailable},
		{okx, "/analytics/forex/list", http.StatusOK},
		{okx, "/analytics/forex/stats", http.StatusOK},
		{every, "/analytics/forex/list", http.StatusServiceUnavailable},
		{every, "/analytics/forex/stats", http.StatusServiceUnavailable},
	} {
		if status, body := c.f.get(t, c.path); status != c.want {
			t.Errorf("%s (okx alone %v): %d %s, want %d", c.path, c.f == okx, status, body, c.want)
		}
	}
	if _, body := okx.get(t, "/analytics/forex/list"); string(body) != "[]" {
		t.Errorf("forex list with nothing serving forex: %s, want []", body)
	}
}
