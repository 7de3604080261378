package exchangesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/redistest"
)

var (
	spot = domain.Combination{Market: domain.Crypto, Exchange: feeds.NameBinance, Instrument: "spot"}
	perp = domain.Combination{Market: domain.Crypto, Exchange: feeds.NameBinance, Instrument: "perpetual"}
)

// serve mounts a simulator in an httptest server.
func serve(t *testing.T, cfg exchangesim.Config) (*exchangesim.Sim, *httptest.Server) {
	t.Helper()
	sim := exchangesim.New(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv
}

// binance is feeds' Binance adapter pointed at srv, booking its requests
// in budget.
func binance(t *testing.T, srv *httptest.Server, budget *hostbudget.Budget, limits map[string]hostbudget.Limit) *feeds.Registry {
	t.Helper()
	reg, err := feeds.New(feeds.Config{Names: []string{feeds.NameBinance},
		BaseURLs: map[string]string{"binance": srv.URL, "binance-futures": srv.URL},
		Budget:   budget, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func provider(t *testing.T, reg *feeds.Registry) feeds.Provider {
	t.Helper()
	p, ok := reg.For(spot)
	if !ok {
		t.Fatal("no provider for binance spot")
	}
	return p
}

// TestAdapterReadsTheSimulator: the Binance adapter, unchanged but for its
// base URLs, lists the simulator's whole universe, reads every ticker and
// the newest candles.
func TestAdapterReadsTheSimulator(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, exchangesim.Config{Seed: 3})
	p := provider(t, binance(t, srv, nil, nil))
	ctx := context.Background()
	for _, c := range []struct {
		combo domain.Combination
		want  int
	}{{spot, 1200}, {perp, 400}} {
		syms, err := p.Symbols(ctx, c.combo)
		if err != nil || len(syms) != c.want {
			t.Fatalf("%s symbols: %d, %v; want %d", c.combo.Instrument, len(syms), err, c.want)
		}
		tickers, err := p.Tickers(ctx, c.combo)
		if err != nil || len(tickers) != c.want {
			t.Fatalf("%s tickers: %d, %v; want %d", c.combo.Instrument, len(tickers), err, c.want)
		}
	}
	now := time.Now().UTC()
	cs, err := p.Candles(ctx, spot, "BTC_USDT", domain.TF1h, time.Time{}, 100)
	if err != nil || len(cs) != 100 {
		t.Fatalf("candles: %d, %v", len(cs), err)
	}
	if last := cs[len(cs)-1].Time; !last.Equal(now.Truncate(time.Hour)) && !last.Equal(now.Add(time.Minute).Truncate(time.Hour)) {
		t.Errorf("newest candle opens at %s, want the current hour %s", last, now.Truncate(time.Hour))
	}
	// Paging forward from a start time, as a backfill does.
	since := now.Truncate(time.Minute).Add(-1500 * time.Minute)
	cs, err = p.Candles(ctx, perp, "ETH_USDT", domain.TF1m, since, 1200)
	if err != nil || len(cs) != 1200 || !cs[0].Time.Equal(since) {
		t.Fatalf("paged candles: %d from %v, %v", len(cs), first(cs), err)
	}
}

func first(cs []domain.Candle) time.Time {
	if len(cs) == 0 {
		return time.Time{}
	}
	return cs[0].Time
}

// klines fetches raw klines rows.
func klines(t *testing.T, h http.Handler, query string) [][]any {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v3/klines?"+query, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("klines %s: %d %s", query, rec.Code, rec.Body)
	}
	var rows [][]any
	if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestCandlesFollowTheClock: closed candles never change; the current one
// keeps its open and moves its close; a new candle opens on the boundary.
func TestCandlesFollowTheClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 15, 7, 20, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sim := exchangesim.New(exchangesim.Config{Seed: 9, Now: clock})
	before := klines(t, sim, "symbol=ETHUSDT&interval=1m&limit=5")
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	after := klines(t, sim, "symbol=ETHUSDT&interval=1m&limit=5")
	if diff := cmp.Diff(before[:4], after[:4]); diff != "" {
		t.Errorf("closed candles changed (-before +after):\n%s", diff)
	}
	if before[4][0] != after[4][0] || before[4][1] != after[4][1] || before[4][4] == after[4][4] {
		t.Errorf("current candle: before %v, after %v: want the same open time and open, a new close", before[4], after[4])
	}
	mu.Lock()
	now = now.Add(15 * time.Second) // 15:08:05
	mu.Unlock()
	next := klines(t, sim, "symbol=ETHUSDT&interval=1m&limit=5")
	if want := float64(time.Date(2026, 11, 26, 15, 8, 0, 0, time.UTC).UnixMilli()); next[4][0] != want {
		t.Errorf("newest open %v, want 15:08", next[4][0])
	}
	if diff := cmp.Diff(after[1:4], next[0:3]); diff != "" {
		t.Errorf("closed candles changed across the boundary:\n%s", diff)
	}
	// Another simulator of the same seed serves the same history.
	if diff := cmp.Diff(next, klines(t, exchangesim.New(exchangesim.Config{Seed: 9, Now: clock}), "symbol=ETHUSDT&interval=1m&limit=5")); diff != "" {
		t.Errorf("same seed, other candles:\n%s", diff)
	}
}

// TestLimitsAsDocumented: weights are counted per IP in the window and
// reported in X-MBX-USED-WEIGHT-1M; past the limit a 429 says when the
// window ends; a request inside that back-off is banned (418) for the
// first ban's time, and the next ban doubles it.
func TestLimitsAsDocumented(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 15, 0, 40, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	sim := exchangesim.New(exchangesim.Config{Spot: 30, Perpetual: 10, SpotLimit: 10, Now: clock})
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=2", nil))
		return rec
	}
	for i := 1; i <= 5; i++ { // weight 2 each: 10
		if rec := get(); rec.Code != 200 || rec.Header().Get("X-MBX-USED-WEIGHT-1M") != fmt.Sprint(2*i) {
			t.Fatalf("request %d: %d, used %q", i, rec.Code, rec.Header().Get("X-MBX-USED-WEIGHT-1M"))
		}
	}
	if rec := get(); rec.Code != 429 || rec.Header().Get("Retry-After") != "20" {
		t.Fatalf("over the limit: %d, Retry-After %q; want 429, 20 (s to the minute's end)", rec.Code, rec.Header().Get("Retry-After"))
	}
	advance(5 * time.Second)
	if rec := get(); rec.Code != 418 || rec.Header().Get("Retry-After") != "120" {
		t.Fatalf("inside the back-off: %d, Retry-After %q; want 418, 120", rec.Code, rec.Header().Get("Retry-After"))
	}
	advance(time.Minute)
	if rec := get(); rec.Code != 418 || rec.Header().Get("Retry-After") != "60" {
		t.Fatalf("during the ban: %d, Retry-After %q; want 418, 60", rec.Code, rec.Header().Get("Retry-After"))
	}
	advance(time.Minute)
	for range 5 {
		if rec := get(); rec.Code != 200 {
			t.Fatalf("after the ban: %d", rec.Code)
		}
	}
	_ = get() // 429
	if rec := get(); rec.Code != 418 || rec.Header().Get("Retry-After") != "240" {
		t.Fatalf("second ban: %d, Retry-After %q; want 418, 240", rec.Code, rec.Header().Get("Retry-After"))
	}
	st := sim.Stats().Spot
	if st.PeakWeight != 10 || st.Refused429 != 2 || st.Banned418 != 3 {
		t.Errorf("stats %+v: want peak 10, two 429s, three 418s", st)
	}
}

// TestBurstStaysWithinTheBudget: two worker processes fetch the newest
// candles of all 1,600 symbols at once, through one budget in Redis; the
// simulator (a 2 s window, so the test takes seconds) never sees more
// than 80 % of either limit, and answers no 429 and no 418.
//
// The budget books 80 %, minus each window's last eighth (250 ms here),
// and the simulator counts a request when it arrives: one booked before
// that last eighth but slowed past the window's end (a loaded CI host)
// counts in the next window. Only the requests in flight at an edge can
// cross it, so the simulator may see 80 % plus their weight (the 16
// fetchers', one kline request each, weighing at most 2), and never the
// limit.
func TestBurstStaysWithinTheBudget(t *testing.T) {
	t.Parallel()
	window := 2 * time.Second
	cfg := exchangesim.Config{Seed: 5, Window: window, SpotLimit: 1000, FuturesLimit: 250}
	sim, srv := serve(t, cfg)
	limits := map[string]hostbudget.Limit{
		"binance":         {Window: window, Max: cfg.SpotLimit},
		"binance-futures": {Window: window, Max: cfg.FuturesLimit},
	}
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	var procs []feeds.Provider
	for range 2 {
		budget := hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix})
		procs = append(procs, provider(t, binance(t, srv, budget, limits)))
	}
	ctx := context.Background()
	type job struct {
		c      domain.Combination
		symbol string
	}
	var jobs []job
	for _, c := range []domain.Combination{spot, perp} {
		syms, err := procs[0].Symbols(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			jobs = append(jobs, job{c, s})
		}
		// The other process reads its symbols now too: the fetchers send
		// kline requests only (the bound on the weight in flight below).
		if _, err := procs[1].Symbols(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if len(jobs) != 1600 {
		t.Fatalf("%d symbols, want 1,600", len(jobs))
	}
	const fetchers, klineWeight = 16, 2
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range fetchers {
		p := procs[i%2]
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= len(jobs) {
					return
				}
				if _, err := p.Candles(ctx, jobs[n].c, jobs[n].symbol, domain.TF1m, time.Time{}, 5); err != nil {
					t.Errorf("%s %s: %v", jobs[n].c.Instrument, jobs[n].symbol, err)
				}
			}
		})
	}
	wg.Wait()
	st := sim.Stats()
	t.Logf("1,600 candle requests in %s; peak weight spot %d/%d, futures %d/%d",
		time.Since(start).Round(time.Millisecond), st.Spot.PeakWeight, st.Spot.Limit, st.Futures.PeakWeight, st.Futures.Limit)
	for name, f := range map[string]exchangesim.FamilyStats{"spot": st.Spot, "futures": st.Futures} {
		if f.PeakWeight*10 > f.Limit*8+fetchers*klineWeight*10 {
			t.Errorf("%s: peak weight %d in a window, over 80 %% of %d and the %d weight of the requests in flight at an edge",
				name, f.PeakWeight, f.Limit, fetchers*klineWeight)
		}
		if f.Refused429 != 0 || f.Banned418 != 0 {
			t.Errorf("%s: %d 429s and %d 418s, want none", name, f.Refused429, f.Banned418)
		}
	}
}

// TestWeightsPerEndpoint: the documented weight of each request is what
// X-MBX-USED-WEIGHT-1M grows by, bad requests included (Binance counts
// them), and a bad symbol is Binance's -1121.
func TestWeightsPerEndpoint(t *testing.T) {
	t.Parallel()
	sim := exchangesim.New(exchangesim.Config{Spot: 30, Perpetual: 10, Window: time.Hour})
	used := map[string]int{}
	for _, c := range []struct {
		path   string
		weight int
		status int
	}{
		{"/api/v3/exchangeInfo", 20, 200},
		{"/api/v3/ticker/24hr", 80, 200},
		{"/api/v3/ticker/24hr?symbol=BTCUSDT", 2, 200},
		{`/api/v3/ticker/24hr?symbols=["BTCUSDT","ETHUSDT"]`, 2, 200},
		{"/api/v3/klines?symbol=NOPEUSDT&interval=1h", 2, 400},
		{"/fapi/v1/exchangeInfo", 1, 200},
		{"/fapi/v1/ticker/24hr", 40, 200},
		{"/fapi/v1/klines?symbol=BTCUSDT&interval=1m&limit=99", 1, 200},
		{"/fapi/v1/klines?symbol=BTCUSDT&interval=1m", 5, 200},
		{"/fapi/v1/klines?symbol=BTCUSDT&interval=1m&limit=1500", 10, 200},
		{"/fapi/v1/premiumIndex", 10, 200},
	} {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		family := c.path[:5]
		used[family] += c.weight
		if rec.Code != c.status || rec.Header().Get("X-MBX-USED-WEIGHT-1M") != fmt.Sprint(used[family]) {
			t.Errorf("%s: %d, used %s; want %d, %d", c.path, rec.Code, rec.Header().Get("X-MBX-USED-WEIGHT-1M"), c.status, used[family])
		}
		if c.status == 400 && !json.Valid(rec.Body.Bytes()) || c.status == 400 && !strings.Contains(rec.Body.String(), "-1121") {
			t.Errorf("%s: body %s, want Binance's -1121 Invalid symbol", c.path, rec.Body)
		}
	}
}
