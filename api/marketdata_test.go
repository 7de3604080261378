package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// storeGate admits every request of a stored key (the gate itself, with
// its limits, is tested in package admission and through marketd).
type storeGate struct{ db *store.DB }

func (g storeGate) Admit(ctx context.Context, r admission.Request) (admission.Outcome, error) {
	if !domain.CheckKeyFormat(r.Key) {
		return admission.Outcome{Status: http.StatusUnauthorized, Detail: "invalid API key"}, nil
	}
	c, k, err := g.db.Authenticate(ctx, domain.HashKey(r.Key))
	if domain.ErrorCode(err) == domain.ENOTFOUND {
		return admission.Outcome{Status: http.StatusUnauthorized, Detail: "invalid API key: unknown key"}, nil
	}
	if err != nil {
		return admission.Outcome{}, err
	}
	return admission.Outcome{Status: http.StatusOK, Client: c, Key: k, Used: 1,
		RateLimitPolicy: `"minute";q=1000;w=60`, RateLimit: `"minute";r=999;t=60`}, nil
}

type marketFixture struct {
	db    *store.DB
	srv   *httptest.Server
	key   string
	now   time.Time
	apiS  *api.Server
	cache *readcache.Cache
}

func newMarketFixture(t testing.TB) *marketFixture {
	t.Helper()
	return newServedFixture(t, nil)
}

// newServedFixture is newMarketFixture's api with served as what the
// deployment's feeds serve (nil: every combination of the catalogue).
func newServedFixture(t testing.TB, served domain.Served) *marketFixture {
	t.Helper()
	db := storetest.New(t)
	c := &domain.Client{OrgName: "Fixture", Tier: domain.Business, Markets: domain.Markets}
	if err := db.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key, _, err := db.IssueKey(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	f := &marketFixture{db: db, key: key, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	now := func() time.Time { return f.now }
	f.cache = readcache.New(10*time.Second, now)
	f.apiS = api.New(api.Config{Region: "global", Served: served, Now: now, Cache: f.cache}, db, storeGate{db})
	f.srv = httptest.NewServer(f.apiS.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

func (f *marketFixture) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/v1/public"+path, nil)
	req.Header.Set("X-API-Key", f.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

var binanceSpot = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}

func TestScreenerServesStaleDataUntilItsBoundThen502(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	ctx := context.Background()
	if status, _ := f.get(t, "/screener/crypto/binance/spot"); status != http.StatusServiceUnavailable {
		t.Fatalf("before any ingest: %d, want 503", status)
	}
	at := f.now.Add(-time.Minute)
	rows := []domain.Ticker{{Symbol: "BTC_USDT", Price: 97000, ChangePct: 1.5, Volume: 1e9, UpdatedAt: at}}
	if err := f.db.ReplaceTickers(ctx, binanceSpot, rows); err != nil {
		t.Fatal(err)
	}
	_ = f.db.RecordFeedSuccess(ctx, binanceSpot, "tickers", at)
	_ = f.db.RecordFeedError(ctx, binanceSpot, "tickers", f.now, "binance: 503 Service Unavailable")
	status, body := f.get(t, "/screener/crypto/binance/spot")
	var got []api.ScreenerRecord
	_ = json.Unmarshal(body, &got)
	if status != 200 || len(got) != 1 || !got[0].UpdatedAt.Equal(at) {
		t.Fatalf("failing feed, fresh data: %d %s, want the last good rows with their updated_at", status, body)
	}
	f.now = at.Add(6 * time.Minute) // past the 5-minute bound
	f.cache.InvalidateAll()
	if status, body := f.get(t, "/screener/crypto/binance/spot"); status != http.StatusBadGateway {
		t.Fatalf("failing feed, stale data: %d %s, want 502", status, body)
	}
	_ = f.db.RecordFeedSuccess(ctx, binanceSpot, "tickers", f.now)
	f.cache.Invalidate(readcache.Tickers(binanceSpot))
	if status, _ := f.get(t, "/screener/crypto/binance/spot"); status != 200 {
		t.Fatalf("recovered feed: %d, want 200", status)
	}
}

func TestReadCacheIsInvalidatedByIngest(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	ctx := context.Background()
	put := func(price float64) {
		rows := []domain.Ticker{{Symbol: "BTC_USDT", Price: price, Volume: 1, UpdatedAt: f.now}}
		if err := f.db.ReplaceTickers(ctx, binanceSpot, rows); err != nil {
			t.Fatal(err)
		}
	}
	price := func() float64 {
		_, body := f.get(t, "/screener/crypto/binance/spot")
		var got []api.ScreenerRecord
		_ = json.Unmarshal(body, &got)
		if len(got) != 1 {
			t.Fatalf("rows: %s", body)
		}
		return got[0].Price
	}
	put(100)
	if p := price(); p != 100 {
		t.Fatalf("price %v", p)
	}
	put(200)
	if p := price(); p != 100 {
		t.Fatalf("the hot read was not cached: %v", p)
	}
	f.cache.Invalidate(readcache.Tickers(binanceSpot))
	if p := price(); p != 200 {
		t.Fatalf("after invalidation: %v, want 200", p)
	}
}

func TestOHLCVLimitAndOrder(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF1h}
	var cs []domain.Candle
	for i := range 300 {
		p := 3000 + float64(i)
		cs = append(cs, domain.Candle{Time: f.now.Add(time.Duration(i-300) * time.Hour), Open: p, High: p + 5, Low: p - 5, Close: p + 1, Volume: 10})
	}
	if err := f.db.UpsertCandles(context.Background(), k, cs); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"": 200, "?limit=1": 1, "?limit=1000": 300} {
		status, body := f.get(t, "/ohlcv/crypto/binance/ETH_USDT/1h"+path)
		var got []api.Candle
		_ = json.Unmarshal(body, &got)
		if status != 200 || len(got) != want {
			t.Fatalf("limit %q: %d, %d candles, want %d", path, status, len(got), want)
		}
		last := got[len(got)-1]
		if !last.Time.Equal(cs[299].Time) || last.Close != cs[299].Close {
			t.Fatalf("limit %q: newest candle %+v, want %+v", path, last, cs[299])
		}
	}
}
