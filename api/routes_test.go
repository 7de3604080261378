package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/readcache"
)

// A hot route's hand-written decoder and encoder answer exactly what
// huma's decoding and encoding answer: status, every header but Date, and
// the body, for a matrix of requests the decoders take and of requests
// they leave to huma (answered the same, with the gate asked once). Each
// server has its own cache, so the answers are also computed
// independently.
func TestHotRoutesAnswerExactlyAsHuma(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)
	ctx := context.Background()
	starter := &domain.Client{OrgName: "Starter", Tier: domain.Starter, Markets: []domain.Market{domain.Crypto}}
	if err := f.db.CreateClient(ctx, starter); err != nil {
		t.Fatal(err)
	}
	starterKey, _, err := f.db.IssueKey(ctx, starter.ID)
	if err != nil {
		t.Fatal(err)
	}

	gate := &countingGate{inner: storeGate{f.db}}
	start := func(hot bool) (*api.Server, *httptest.Server) {
		now := func() time.Time { return f.now }
		s := api.New(api.Config{Region: "global", Now: now, Cache: readcache.New(10*time.Second, now),
			Refresh: api.RefreshIntervals{Tickers: 10 * time.Second}}, f.db, gate)
		if !hot {
			api.DisableHotDecoders(s)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		return s, hs
	}
	hotS, hotHTTP := start(true)
	_, humaHTTP := start(false)

	send := func(base, method, path string, headers []string) (reply, error) {
		req, err := http.NewRequest(method, base+"/api/v1/public"+path, nil)
		if err != nil {
			return reply{}, err
		}
		req.Header.Set("X-Request-Id", "fixed-request-id")
		req.Header.Set("X-API-Key", f.key)
		for i := 0; i+1 < len(headers); i += 2 {
			if headers[i+1] == "" {
				req.Header.Del(headers[i])
			} else {
				req.Header.Set(headers[i], headers[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		resp.Header.Del("Date")
		return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
	}
	validators := func(path string) (etag, lastMod string) {
		r, err := send(humaHTTP.URL, http.MethodGet, path, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("%s: %d %v", path, r.status, err)
		}
		return r.header.Get("ETag"), r.header.Get("Last-Modified")
	}
	scrTag, scrMod := validators("/screener/crypto/binance/spot")
	ohlcvTag, ohlcvMod := validators("/ohlcv/crypto/binance/ETH_USDT/1h?limit=5")
	repTag, repMod := validators("/analytics/crypto/BTC_USDT?lang=en")

	type req struct {
		method, path string
		headers      []string
		hot          bool // taken by the route's hand-written decoder (else decoded by huma)
	}
	get := func(path string, hot bool, headers ...string) req {
		return req{method: http.MethodGet, path: path, headers: headers, hot: hot}
	}
	noKey := []string{"X-API-Key", ""}
	badKey := []string{"X-API-Key", "msk_notakey"}
	starterH := []string{"X-API-Key", starterKey}
	matrix := []req{
		get("/usage", true),
		get("/usage", true, starterH...),
		get("/usage?pretty=1", false),
		get("/usage/", false),
		get("/usage", false, noKey...),
		get("/usage", false, badKey...),
		{method: http.MethodHead, path: "/usage", hot: true},
		{method: http.MethodPost, path: "/usage"},

		get("/screener/crypto/binance/spot", true),
		get("/screener/crypto/binance/spot", true, "If-None-Match", scrTag),
		get("/screener/crypto/binance/spot", true, "If-None-Match", "W/"+scrTag+", \"x\""),
		get("/screener/crypto/binance/spot", true, "If-None-Match", `"stale"`),
		get("/screener/crypto/binance/spot", true, "If-Modified-Since", scrMod),
		get("/screener/crypto/binance/spot", true, "If-Modified-Since", "garbage"),
		get("/screener/crypto/binance/spot", true, "If-None-Match", `"stale"`, "If-Modified-Since", scrMod),
		get("/screener/crypto/binance/spot", false, "If-None-Match", strings.Repeat("x", 2049)),
		get("/screener/crypto/binance/spot?volume_min=2e8", false),
		get("/screener/crypto/binance/spot?symbols=BTC_USDT,NOPE_USDT", false),
		get("/screener/crypto/binance/spot?volume_min=", false),
		get("/screener/crypto/binance/spot?change_max=x", false),
		get("/screener/crypto/binance/perpetual", true),
		get("/screener/crypto/nope/spot", true),
		get("/screener/crypto/BINANCE/spot", true),
		get("/screener/bonds/binance/spot", false),
		get("/screener/stocks/alpaca/stock", true, starterH...),
		get("/screener/crypto/binance/spot/", false),
		get("/screener/crypto/binance/"+strings.Repeat("s", 33), false),
		get("/screener/crypto/binance/spot", false, noKey...),

		get("/ohlcv/crypto/binance/ETH_USDT/1h", true),
		get("/ohlcv/crypto/binance/eth_usdt/1h?limit=5", true),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=5", true, "If-None-Match", ohlcvTag),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=5", true, "If-Modified-Since", ohlcvMod),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=1000", true),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=1001", false),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=0", false),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=05", false),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=-5", false),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=abc", false),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=5&limit=6", false),
		get("/ohlcv/crypto/binance/ETH_USDT/1h?limit=%35", false),
		get("/ohlcv/crypto/binance/ETH/USDT/1h", false),
		get("/ohlcv/crypto/binance/ETH%2FUSDT/1h", true),
		get("/ohlcv/crypto/binance/ETH_USDT/2h", false),
		get("/ohlcv/crypto/binance/NOPE_USDT/1h", true),
		get("/ohlcv/crypto/binance/BAD-SYM!/1h", true),
		get("/ohlcv/crypto/binance/ETH_USDT/4h", true),
		get("/ohlcv/stocks/alpaca/AAPL/1h", true, starterH...),
		get("/ohlcv/crypto/nope/ETH_USDT/1h", true),

		get("/analytics/crypto/BTC_USDT", true),
		get("/analytics/crypto/btc_usdt?lang=en", true),
		get("/analytics/crypto/BTC_USDT?lang=en&style=swing", true),
		get("/analytics/crypto/BTC_USDT?style=swing&lang=ja", true),
		get("/analytics/crypto/BTC_USDT?lang=en", true, "If-None-Match", repTag),
		get("/analytics/crypto/BTC_USDT?lang=en", true, "If-Modified-Since", repMod),
		get("/analytics/crypto/BTC_USDT?lang=en", true, starterH...),
		get("/analytics/crypto/BTC_USDT?style=scalp", true),
		get("/analytics/crypto/BTC_USDT?lang=xx", false),
		get("/analytics/crypto/BTC_USDT?lang=en&lang=ja", false),
		get("/analytics/crypto/BTC_USDT?lang=", false),
		get("/analytics/crypto/BTC%2FUSDT", true),
		get("/analytics/crypto/NOPE_USDT", true),
		get("/analytics/crypto/list", false),
		get("/analytics/crypto/stats", false),
		get("/analytics/crypto/factor-stats", false),
		get("/analytics/crypto/BTC_USDT/history", false),
		get("/analytics/stocks/AAPL", true, starterH...),
		get("/analytics/forex/EUR_USD", true),
		get("/analytics/top-setups", false),
		get("/analytics/bonds/BTC_USDT", false),
	}
	for _, m := range matrix {
		name := m.method + " " + m.path + " " + strings.Join(m.headers, " ")
		decodedBefore := api.HotDecoded(hotS)
		asked := gate.n.Load()
		got, err := send(hotHTTP.URL, m.method, m.path, m.headers)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		decodedAfter := api.HotDecoded(hotS)
		if asks := gate.n.Load() - asked; asks > 1 {
			t.Errorf("%s: the gate was asked %d times", name, asks)
		}
		if hot := decodedAfter > decodedBefore; hot != m.hot {
			t.Errorf("%s: taken by the hot decoder: %v, want %v (%d)", name, hot, m.hot, got.status)
		}
		want, err := send(humaHTTP.URL, m.method, m.path, m.headers)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.status != want.status || !reflect.DeepEqual(got.header, want.header) || string(got.body) != string(want.body) {
			t.Errorf("%s:\nhot route: %d %v\n%s\nhuma:      %d %v\n%s", name, got.status, got.header, got.body, want.status, want.header, want.body)
		}
	}
}

// countingGate counts the gate's answers.
type countingGate struct {
	inner storeGate
	n     atomic.Int64
}

func (g *countingGate) Admit(ctx context.Context, r admission.Request) (admission.Outcome, error) {
	g.n.Add(1)
	return g.inner.Admit(ctx, r)
}
