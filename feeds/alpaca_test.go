package feeds

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The payloads follow Alpaca's documentation: the asset object of the
// trading API's GET /v2/assets (docs.alpaca.markets/reference/get-v2-assets,
// testdata/alpaca/assets.json), the multi-symbol bars of market data v2
// (GET /v2/stocks/bars: "bars" by symbol, "next_page_token";
// docs.alpaca.markets/reference/stockbars) and the snapshots
// (GET /v2/stocks/snapshots; the SDK's fixture in alpacahq/alpaca-trade-api-go,
// marketdata/rest_test.go, TestSnapshots).

var (
	arca = domain.Combination{Market: domain.Stocks, Exchange: "arca", Instrument: "stock"}
	amex = domain.Combination{Market: domain.Stocks, Exchange: "amex", Instrument: "stock"}
	bats = domain.Combination{Market: domain.Stocks, Exchange: "bats", Instrument: "stock"}
)

func setupAlpaca(t *testing.T) (*alpaca, *testBundle) {
	t.Helper()
	tb := setup(t)
	authorized := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("APCA-API-KEY-ID") != "test-key-id" || r.Header.Get("APCA-API-SECRET-KEY") != "test-secret" {
				body(http.StatusUnauthorized, `{"message":"forbidden"}`)(w, r)
				return
			}
			h(w, r)
		}
	}
	tb.up.mux.HandleFunc("/v2/assets", authorized(file(t, "alpaca/assets.json")))
	tb.up.mux.HandleFunc("/v2/stocks/snapshots", authorized(file(t, "alpaca/snapshots.json")))
	tb.up.mux.Handle("/v2/stocks/bars", sequence(file(t, "alpaca/bars_AAPL_1Day.json"), file(t, "alpaca/bars_AAPL_1Day_page2.json")))
	return newAlpaca(tb.cfg), tb
}

// TestAlpacaUniverseFromAssets: the instruments are the active US equities
// of the asset list, split by listing exchange (NYSEARCA and ARCA are NYSE
// Arca); OTC, inactive, crypto and unparseable symbols are left out;
// class shares keep their dot. The list is read once a day, and a failed
// refresh keeps the previous one.
func TestAlpacaUniverseFromAssets(t *testing.T) {
	t.Parallel()
	a, tb := setupAlpaca(t)
	now := testNow
	a.now = func() time.Time { return now }
	ctx := context.Background()
	for c, want := range map[domain.Combination][]string{
		nasdaq: {"AAPL", "AMZN", "GOOGL", "MSFT", "NVDA"},
		nyse:   {"BRK.B", "JPM"},
		arca:   {"GLD", "SPY"},
		amex:   {"IMO"},
		bats:   {"CBOE"},
	} {
		got, err := a.Symbols(ctx, c)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", c, got, err, want)
		}
	}
	reqs := tb.up.requestsTo("/v2/assets")
	if len(reqs) != 1 {
		t.Fatalf("%d asset-list requests for five exchanges, want 1", len(reqs))
	}
	if q := reqs[0].URL.Query(); q.Get("status") != "active" || q.Get("asset_class") != "us_equity" {
		t.Errorf("query %v", q)
	}

	now = now.Add(alpacaAssetsEvery)
	failing := newAlpaca(tb.cfg)
	failing.assets, failing.assetsAt = a.assets, now.Add(-time.Second)
	failing.now = a.now
	failing.trading.baseURL = tb.up.URL + "/broken"
	got, err := failing.Symbols(ctx, nyse)
	if err != nil || !slices.Equal(got, []string{"BRK.B", "JPM"}) {
		t.Errorf("failed refresh: %v, %v; want the previous list", got, err)
	}
	if !strings.Contains(tb.logs.String(), "keeping the previous one") {
		t.Errorf("the failed refresh is not logged:\n%s", tb.logs)
	}
	if _, err := a.Symbols(ctx, nasdaq); err != nil || len(tb.up.requestsTo("/v2/assets")) != 2 {
		t.Errorf("a day later: %v, %d requests; want the list read again", err, len(tb.up.requestsTo("/v2/assets")))
	}

	fresh := newAlpaca(tb.cfg)
	fresh.trading.baseURL = tb.up.URL + "/broken"
	if _, err := fresh.Symbols(ctx, nasdaq); err == nil {
		t.Error("no list ever read: want an error")
	}
}

func TestAlpacaTickers(t *testing.T) {
	t.Parallel()
	a, tb := setupAlpaca(t)
	got, err := a.Tickers(context.Background(), nasdaq)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Ticker{
		{Symbol: "AAPL", Price: 271.49, ChangePct: (271.49/266.25 - 1) * 100, Volume: 2123456 * 270.12, UpdatedAt: time.Date(2025, 11, 21, 20, 59, 59, 871224000, time.UTC)},
		{Symbol: "MSFT", Price: 472.12, ChangePct: (472.12/478.43 - 1) * 100, Volume: 801234 * 472.9, UpdatedAt: time.Date(2025, 11, 21, 20, 59, 58, 101000000, time.UTC)},
		// No prevDailyBar: the change is against today's open.
		{Symbol: "NVDA", Price: 178.88, ChangePct: (178.88/181.2 - 1) * 100, Volume: 5000000 * 178.1, UpdatedAt: time.Date(2025, 11, 21, 20, 59, 59, 500000000, time.UTC)},
	}
	slices.SortFunc(got, func(a, b domain.Ticker) int { return strings.Compare(a.Symbol, b.Symbol) })
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// AMZN has a "NaN" price, GOOGL a negative volume.
	if n := tb.logs.count("dropping bad ticker row"); n != 2 {
		t.Errorf("%d dropped rows logged, want 2:\n%s", n, tb.logs)
	}
	q := tb.up.requestsTo("/v2/stocks/snapshots")[0].URL.Query()
	if q.Get("symbols") != "AAPL,AMZN,GOOGL,MSFT,NVDA" || q.Get("feed") != "iex" {
		t.Errorf("query %v", q)
	}
	// The free plan reuses a snapshot for a minute.
	if _, err := a.Tickers(context.Background(), nasdaq); err != nil || len(tb.up.requestsTo("/v2/stocks/snapshots")) != 1 {
		t.Errorf("a second read within the minute: %v, %d requests; want the snapshot reused", err, len(tb.up.requestsTo("/v2/stocks/snapshots")))
	}
}

// TestAlpacaSnapshotWithNullPrevDailyBar feeds the SDK's own snapshots
// fixture (alpacahq/alpaca-trade-api-go, marketdata/rest_test.go,
// TestSnapshots): MSFT has "prevDailyBar": null and "INVALID" a null
// snapshot. MSFT is kept, its change against today's open; INVALID is
// dropped alone.
func TestAlpacaSnapshotWithNullPrevDailyBar(t *testing.T) {
	t.Parallel()
	const sdkSnapshots = `{"AAPL": {"latestTrade": {"t": "2021-05-03T14:48:06.563Z","x": "D","p": 133.4201,"s": 145,"c": ["@"],"i": 62700,"z": "C"},"latestQuote": {"t": "2021-05-03T14:48:07.257820915Z","ax": "Q","ap": 133.43,"as": 7,"bx": "Q","bp": 133.42,"bs": 15,"c": ["R"]},"minuteBar": {"t": "2021-05-03T14:47:00Z","o": 133.4401,"h": 133.48,"l": 133.37,"c": 133.42,"v": 207020,"n": 1234,"vw": 133.3987},"dailyBar": {"t": "2021-05-03T04:00:00Z","o": 132.04,"h": 134.07,"l": 131.83,"c": 133.42,"v": 25846800,"n": 254678,"vw": 132.568},"prevDailyBar": {"t": "2021-04-30T04:00:00Z","o": 131.82,"h": 133.56,"l": 131.065,"c": 131.46,"v": 109506363,"n": 1012323,"vw": 132.025}},"MSFT": {"latestTrade": {"t": "2021-05-03T14:48:06.36Z","x": "D","p": 253.8738,"s": 100,"c": ["@"],"i": 22973,"z": "C"},"latestQuote": {"t": "2021-05-03T14:48:07.243353456Z","ax": "N","ap": 253.89,"as": 2,"bx": "Q","bp": 253.87,"bs": 2,"c": ["R"]},"minuteBar": {"t": "2021-05-03T14:47:00Z","o": 253.78,"h": 253.869,"l": 253.78,"c": 253.855,"v": 25717,"n": 137,"vw": 253.823},"dailyBar": {"t": "2021-05-03T04:00:00Z","o": 253.34,"h": 254.35,"l": 251.8,"c": 253.855,"v": 6100459,"n": 33453,"vw": 253.0534},"prevDailyBar": null},"INVALID": null}`
	tb := setup(t)
	tb.up.mux.Handle("/v2/stocks/snapshots", body(http.StatusOK, sdkSnapshots))
	a := newAlpaca(tb.cfg)
	a.assets, a.assetsAt = map[string][]string{"nasdaq": {"AAPL", "INVALID", "MSFT"}}, testNow.Add(time.Hour)
	got, err := a.Tickers(context.Background(), nasdaq)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Ticker{
		{Symbol: "AAPL", Price: 133.4201, ChangePct: (133.4201/131.46 - 1) * 100, Volume: 25846800 * 132.568, UpdatedAt: time.Date(2021, 5, 3, 14, 48, 6, 563000000, time.UTC)},
		{Symbol: "MSFT", Price: 253.8738, ChangePct: (253.8738/253.34 - 1) * 100, Volume: 6100459 * 253.0534, UpdatedAt: time.Date(2021, 5, 3, 14, 48, 6, 360000000, time.UTC)},
	}
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if n := tb.logs.count("dropping bad ticker row"); n != 1 || !strings.Contains(tb.logs.String(), "INVALID") {
		t.Errorf("want INVALID alone dropped:\n%s", tb.logs)
	}
}

// TestAlpacaBatchesByURLLength: thousands of symbols are split into
// requests whose URLs stay within alpacaMaxURL, each symbol in exactly
// one, in order.
func TestAlpacaBatchesByURLLength(t *testing.T) {
	t.Parallel()
	syms := make([]string, 11000)
	for i := range syms {
		syms[i] = fmt.Sprintf("S%04d.%c", i, 'A'+i%26)
	}
	base := "https://data.alpaca.markets/v2/stocks/bars"
	q := url.Values{"timeframe": {"1Min"}, "feed": {"iex"}, "limit": {"10000"}, "start": {"2026-11-27T14:30:00Z"}}
	batches := alpacaBatches(base, q, syms)
	var all []string
	for _, b := range batches {
		full := base + "?" + encodeWith(q, b) + "&page_token=" + strings.Repeat("x", 60)
		if len(full) > alpacaMaxURL {
			t.Fatalf("a URL of %d bytes, over %d", len(full), alpacaMaxURL)
		}
		all = append(all, b...)
	}
	if !slices.Equal(all, syms) {
		t.Error("the batches do not hold every symbol once, in order")
	}
	// 8 bytes a symbol with its comma: 88,000 bytes in URLs of ≈ 7,800
	// bytes of symbols. Escaped commas (%2C) took 14.
	if len(batches) > 12 {
		t.Errorf("%d requests for 11,000 symbols: the batches are too small", len(batches))
	}
}

// encodeWith is the query of a batch as the data client sends it: its
// commas as they are (apiClient.listCommas).
func encodeWith(q url.Values, symbols []string) string {
	v := url.Values{"symbols": {strings.Join(symbols, ",")}}
	for k, x := range q {
		v[k] = x
	}
	return strings.ReplaceAll(v.Encode(), "%2C", ",")
}

func TestAlpacaCandlesPaged(t *testing.T) {
	t.Parallel()
	a, tb := setupAlpaca(t)
	since := time.Date(2025, 11, 18, 0, 0, 0, 0, time.UTC)
	got, err := a.Candles(context.Background(), nasdaq, "AAPL", domain.TF1d, since, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Candle{
		{Time: since, Open: 269.99, High: 270.71, Low: 265.32, Close: 267.44, Volume: 1201233},
		{Time: since.AddDate(0, 0, 1), Open: 265.53, High: 272.21, Low: 265.5, Close: 268.56, Volume: 1100021},
		{Time: since.AddDate(0, 0, 2), Open: 270.83, High: 275.43, Low: 265.92, Close: 266.25, Volume: 1900321},
		{Time: since.AddDate(0, 0, 3), Open: 265.95, High: 273.33, Low: 265.67, Close: 271.49, Volume: 2123456},
	}
	if !slices.EqualFunc(got, want, candleEqual) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	reqs := tb.up.requestsTo("/v2/stocks/bars")
	if len(reqs) != 2 || reqs[1].URL.Query().Get("page_token") == "" || reqs[0].URL.Query().Get("timeframe") != "1Day" {
		t.Errorf("%d requests, second %v", len(reqs), reqs[len(reqs)-1].URL.Query())
	}
}

// fakeBars serves /v2/stocks/bars as the documentation describes it: bars
// of the requested symbols from start, sorted by symbol then time, at
// most limit bars a page across symbols, then a next_page_token. Each
// symbol has a 1m bar every minute from base to the clock, but "THIN",
// which last traded at thinLast.
type fakeBars struct {
	base, now, thinLast time.Time
	bad                 string // a symbol whose bars are corrupt
	requests            atomic.Int32
	escaped             atomic.Int32 // requests whose symbols' commas came escaped (%2C)
}

func (f *fakeBars) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if strings.Contains(r.URL.RawQuery, "%2C") {
		f.escaped.Add(1)
	}
	q := r.URL.Query()
	start, _ := time.Parse(time.RFC3339, q.Get("start"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	skip, _ := strconv.Atoi(q.Get("page_token"))
	syms := strings.Split(q.Get("symbols"), ",")
	slices.Sort(syms)
	out := map[string][]map[string]any{}
	n, seen := 0, 0
	for _, s := range syms {
		last := f.now
		if s == "THIN" {
			last = f.thinLast
		}
		for t := f.base; !t.After(last); t = t.Add(time.Minute) {
			if t.Before(start) {
				continue
			}
			seen++
			if seen <= skip {
				continue
			}
			if n == limit {
				b, _ := json.Marshal(map[string]any{"bars": out, "next_page_token": strconv.Itoa(skip + n)})
				w.Write(b)
				return
			}
			px := 100 + float64(t.Sub(f.base)/time.Minute)
			b := map[string]any{"t": t.Format(time.RFC3339), "o": px, "h": px + 1, "l": px - 1, "c": px + 0.5, "v": 10, "n": 3, "vw": px}
			if s == f.bad {
				b["v"] = -1
			}
			out[s] = append(out[s], b)
			n++
		}
	}
	b, _ := json.Marshal(map[string]any{"bars": out, "next_page_token": nil})
	w.Write(b)
}

// TestAlpacaBulkCandles: one call reads many symbols in few requests,
// each symbol from its own start; a new series gets its newest candles;
// a symbol with a corrupt bar fails alone; pages are followed.
func TestAlpacaBulkCandles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	now := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	fake := &fakeBars{base: now.Add(-3 * time.Hour), now: now.Add(-time.Minute), thinLast: now.Add(-150 * time.Minute), bad: "BAD"}
	tb.up.mux.Handle("/v2/stocks/bars", fake)
	a := newAlpaca(tb.cfg)
	a.now = func() time.Time { return now }
	a.assets, a.assetsAt = map[string][]string{"nasdaq": {"AAA", "BAD", "BBB", "NEW", "THIN"}}, now.Add(time.Hour)
	from := map[string]time.Time{
		"AAA": now.Add(-5 * time.Minute), "BBB": now.Add(-4 * time.Minute), "BAD": now.Add(-5 * time.Minute),
		"THIN": now.Add(-150 * time.Minute), "NEW": {},
	}
	got, failed, err := a.BulkCandles(context.Background(), nasdaq, domain.TF1m, from, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed["BAD"] == nil {
		t.Errorf("failed %v, want BAD alone", failed)
	}
	if n := len(got["AAA"]); n != 5 || !got["AAA"][0].Time.Equal(from["AAA"]) {
		t.Errorf("AAA: %d candles from %v, want 5 from its start", n, got["AAA"][0].Time)
	}
	if n := len(got["BBB"]); n != 4 {
		t.Errorf("BBB: %d candles, want 4", n)
	}
	if n := len(got["THIN"]); n != 1 {
		t.Errorf("THIN: %d candles, want its last one", n)
	}
	if n := len(got["NEW"]); n != 100 || !got["NEW"][99].Time.Equal(fake.now) {
		t.Errorf("NEW: %d candles, want its newest 100", n)
	}
	// Three starts: the new series', the thin one's and the others'
	// (within a few candles of each other); NEW's 180 bars take a page
	// more at 10,000 bars a page only when pages are small, so: 3.
	if n := fake.requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3 (one per start)", n)
	}
	if n := fake.escaped.Load(); n != 0 {
		t.Errorf("%d requests sent their symbols' commas escaped (%%2C), want them as they are (symbols=AAA,BBB)", n)
	}
}

// TestAlpacaRefusalWaitsForTheReset: a 429 carries no Retry-After but
// X-RateLimit-Reset; every caller waits until then, and the plan's limit
// read from X-RateLimit-Limit becomes the host's budget.
func TestAlpacaRefusalWaitsForTheReset(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	reset := testNow.Add(25 * time.Second).Unix()
	tb.up.mux.Handle("/v2/stocks/snapshots", sequence(
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-RateLimit-Limit", "200")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
			body(http.StatusTooManyRequests, `{"message":"too many requests."}`)(w, r)
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-RateLimit-Limit", "10000")
			w.Header().Set("X-RateLimit-Remaining", "9999")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset+60, 10))
			body(http.StatusOK, `{}`)(w, r)
		}))
	a := newAlpaca(tb.cfg)
	a.assets, a.assetsAt = map[string][]string{"nasdaq": {"AAPL"}}, testNow.Add(time.Hour)
	if _, err := a.Tickers(context.Background(), nasdaq); err != nil {
		t.Fatal(err)
	}
	waited := time.Duration(0)
	for _, d := range tb.sleeps.all() {
		waited += d
	}
	if waited < 24*time.Second {
		t.Errorf("waited %v after the 429 (sleeps %v), want until X-RateLimit-Reset (25 s)", waited, tb.sleeps.all())
	}
	if got := a.data.hostLimit(); got.Max != 10000/7 || got.Name != HostAlpacaData {
		t.Errorf("host limit %+v, want the plan's 10,000 a minute", got)
	}
}

func TestAlpacaRateLimitHeaders(t *testing.T) {
	t.Parallel()
	now := time.Unix(1763820030, 0)
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "200")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1763820060")
	if got := alpacaRatePause(h, now); !got.Equal(time.Unix(1763820060, 0)) {
		t.Errorf("pause until %v", got)
	}
	h.Set("X-RateLimit-Remaining", "150")
	if got := alpacaRatePause(h, now); !got.IsZero() {
		t.Errorf("paused with budget left: %v", got)
	}
}

func TestAlpacaRejectsCorruptBars(t *testing.T) {
	t.Parallel()
	rejectsCorrupt(t, NameAlpaca, map[string]string{
		"negative vol":  `{"bars":{"AAPL":[{"t":"2025-11-18T05:00:00Z","o":1,"h":2,"l":0.5,"c":1.5,"v":-3}]},"next_page_token":null}`,
		"missing close": `{"bars":{"AAPL":[{"t":"2025-11-18T05:00:00Z","o":1,"h":2,"l":0.5,"v":3}]},"next_page_token":null}`,
		"string price":  `{"bars":{"AAPL":[{"t":"2025-11-18T05:00:00Z","o":"NaN","h":2,"l":0.5,"c":1.5,"v":3}]},"next_page_token":null}`,
		"out of order": `{"bars":{"AAPL":[{"t":"2025-11-19T05:00:00Z","o":1,"h":2,"l":0.5,"c":1.5,"v":3},
			{"t":"2025-11-18T05:00:00Z","o":1,"h":2,"l":0.5,"c":1.5,"v":3}]},"next_page_token":null}`,
	}, func(t *testing.T, bad string) error {
		tb := setup(t)
		tb.up.mux.Handle("/v2/stocks/bars", body(http.StatusOK, bad))
		tb.up.mux.HandleFunc("/v2/assets", file(t, "alpaca/assets.json"))
		a := newAlpaca(tb.cfg)
		_, err := a.Candles(context.Background(), nasdaq, "AAPL", domain.TF1d, time.Date(2025, 11, 18, 0, 0, 0, 0, time.UTC), 10)
		return err
	})
}
