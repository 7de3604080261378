package feeds

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func setupBinance(t *testing.T) (*binance, *testBundle) {
	t.Helper()
	tb := setup(t)
	tb.up.mux.Handle("/api/v3/exchangeInfo", file(t, "binance/exchangeInfo.json"))
	tb.up.mux.Handle("/fapi/v1/exchangeInfo", file(t, "binance/fapi_exchangeInfo.json"))
	return newBinance(tb.cfg), tb
}

func TestBinanceSymbols(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	ctx := context.Background()
	for _, tt := range []struct {
		c    domain.Combination
		want []string
	}{
		{binanceSpot, []string{"1000SATS_FDUSD", "BTC_USDT", "DOGE_USDT", "ETH_BTC", "ETH_USDT", "SOL_USDT", "XRP_USDT"}},
		{binancePerp, []string{"1000PEPE_USDT", "BTC_USDT", "ETH_USDT"}},
		{binanceFutures, []string{"BTC_USDT", "ETH_USDT"}},
	} {
		got, err := b.Symbols(ctx, tt.c)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.c, got, tt.want)
		}
	}
	// exchangeInfo is cached.
	b.Symbols(ctx, binanceSpot)
	if n := len(tb.up.requestsTo("/api/v3/exchangeInfo")); n != 1 {
		t.Errorf("exchangeInfo fetched %d times, want 1", n)
	}
}

func TestBinanceTickers(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/api/v3/ticker/24hr", file(t, "binance/ticker24hr.json"))
	tb.up.mux.Handle("/fapi/v1/ticker/24hr", file(t, "binance/fapi_ticker24hr.json"))
	ctx := context.Background()

	got, err := b.Tickers(ctx, binanceSpot)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Ticker{
		{Symbol: "ETH_BTC", Price: 0.03545, ChangePct: -0.589, Volume: 792.59340216, UpdatedAt: ms(1763820000012)},
		{Symbol: "BTC_USDT", Price: 83148.49, ChangePct: -1.718, Volume: 2434671112.4587145, UpdatedAt: ms(1763820000001)},
		{Symbol: "ETH_USDT", Price: 2976.01, ChangePct: -1.363, Volume: 1797883441.19044, UpdatedAt: ms(1763820000004)},
		{Symbol: "SOL_USDT", Price: 130.88, ChangePct: 2.514, Volume: 533158231.4005, UpdatedAt: ms(1763820000010)},
		{Symbol: "1000SATS_FDUSD", Price: 0.000025, ChangePct: 4.167, Volume: 2174089.2, UpdatedAt: ms(1763820000100)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("spot tickers:\ngot  %+v\nwant %+v", got, want)
	}
	// BCCBTC is not trading: skipped silently. XRPUSDT (NaN change) and
	// DOGEUSDT (negative volume) are dropped with a log line each.
	if n := tb.logs.count("dropping bad ticker row"); n != 2 || !strings.Contains(tb.logs.String(), "XRPUSDT") || !strings.Contains(tb.logs.String(), "DOGEUSDT") {
		t.Errorf("want 2 dropped rows logged, got %d:\n%s", n, tb.logs)
	}

	perp, err := b.Tickers(ctx, binancePerp)
	if err != nil {
		t.Fatal(err)
	}
	if len(perp) != 3 || perp[0] != (domain.Ticker{Symbol: "BTC_USDT", Price: 83101.2, ChangePct: -1.659, Volume: 17834501233.12, UpdatedAt: ms(1763820000032)}) {
		t.Errorf("perpetual tickers: %+v", perp)
	}
	fut, err := b.Tickers(ctx, binanceFutures)
	if err != nil {
		t.Fatal(err)
	}
	if len(fut) != 2 || fut[0].Symbol != "BTC_USDT" || fut[0].Price != 83801.0 || fut[1].Price != 3006.77 {
		t.Errorf("futures tickers (current quarter only): %+v", fut)
	}
}

func TestBinanceCandles(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/api/v3/klines", file(t, "binance/klines_BTCUSDT_1h.json"))
	tb.up.mux.Handle("/fapi/v1/continuousKlines", file(t, "binance/fapi_continuousKlines_BTCUSDT_1d.json"))
	ctx := context.Background()

	got, err := b.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Candle{
		{Time: ms(1763805600000), Open: 83512, High: 83790.1, Low: 83305.5, Close: 83650.01, Volume: 512.33811},
		{Time: ms(1763809200000), Open: 83650.01, High: 83921, Low: 83480, Close: 83499.99, Volume: 468.01233},
		{Time: ms(1763812800000), Open: 83500, High: 83610.44, Low: 82917.13, Close: 83022.55, Volume: 734.91122},
		{Time: ms(1763816400000), Open: 83022.56, High: 83300, Low: 82977, Close: 83148.49, Volume: 201.719},
	}
	if !slices.EqualFunc(got, want, candleEqual) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	q := tb.up.requestsTo("/api/v3/klines")[0].URL.Query()
	if q.Get("symbol") != "BTCUSDT" || q.Get("interval") != "1h" || q.Get("limit") != "4" || q.Has("startTime") {
		t.Errorf("klines query %v", q)
	}

	// From a start time: the request carries it, the answer is clipped to it.
	got, err = b.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, ms(1763809200000), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Time.Equal(ms(1763809200000)) {
		t.Errorf("since: %+v", got)
	}
	if q := tb.up.requestsTo("/api/v3/klines")[1].URL.Query(); q.Get("startTime") != "1763809200000" {
		t.Errorf("since query %v", q)
	}

	fut, err := b.Candles(ctx, binanceFutures, "BTC_USDT", domain.TF1d, time.Time{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(fut) != 3 || fut[2].Close != 83801.0 || fut[2].Volume != 6210.004 {
		t.Errorf("futures candles %+v", fut)
	}
	if q := tb.up.requestsTo("/fapi/v1/continuousKlines")[0].URL.Query(); q.Get("pair") != "BTCUSDT" || q.Get("contractType") != "CURRENT_QUARTER" {
		t.Errorf("continuous klines query %v", q)
	}

	if _, err := b.Candles(ctx, binanceSpot, "NOPE_USDT", domain.TF1h, time.Time{}, 4); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown symbol: %v", err)
	}
}

// corruptKlines are klines responses every parser must reject.
var corruptKlines = map[string]string{
	"NaN string":     `[[1763805600000,"NaN","83790.1","83305.5","83650.01","512.3",1763809199999]]`,
	"negative vol":   `[[1763805600000,"83512.0","83790.1","83305.5","83650.01","-1.5",1763809199999]]`,
	"missing field":  `[[1763805600000,"83512.0","83790.1","83305.5","83650.01"]]`,
	"non-numeric":    `[[1763805600000,"83512.0","abc","83305.5","83650.01","512.3",1763809199999]]`,
	"null price":     `[[1763805600000,null,"83790.1","83305.5","83650.01","512.3",1763809199999]]`,
	"empty string":   `[[1763805600000,"","83790.1","83305.5","83650.01","512.3",1763809199999]]`,
	"high below low": `[[1763805600000,"83512.0","83000.0","83305.5","83650.01","512.3",1763809199999]]`,
	"bad time":       `[["yesterday","83512.0","83790.1","83305.5","83650.01","512.3",1763809199999]]`,
	"out of order": `[[1763809200000,"83650.01","83921.0","83480.0","83499.99","468.0",1763812799999],
	                  [1763805600000,"83512.0","83790.1","83305.5","83650.01","512.3",1763809199999]]`,
	"duplicate time": `[[1763805600000,"83512.0","83790.1","83305.5","83650.01","512.3",1763809199999],
	                  [1763805600000,"83512.0","83790.1","83305.5","83650.01","512.3",1763809199999]]`,
	"not an array": `{"code":-1121,"msg":"Invalid symbol."}`,
}

func TestBinanceRejectsCorruptKlines(t *testing.T) {
	t.Parallel()
	for name, bad := range corruptKlines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, tb := setupBinance(t)
			tb.up.mux.Handle("/api/v3/klines", body(http.StatusOK, bad))
			got, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 10)
			if err == nil || got != nil {
				t.Fatalf("accepted %s: %+v", name, got)
			}
			if !strings.HasPrefix(err.Error(), "feeds: binance: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if tb.logs.count("rejecting bad klines response") != 1 && name != "not an array" {
				t.Errorf("rejection not logged:\n%s", tb.logs)
			}
		})
	}
}

func TestBinanceRetriesServerErrors(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/api/v3/klines", sequence(
		body(http.StatusInternalServerError, `{"code":-1000,"msg":"An unknown error occurred while processing the request."}`),
		body(http.StatusBadGateway, `<html>502 Bad Gateway</html>`),
		file(t, "binance/klines_BTCUSDT_1h.json"),
	))
	got, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4)
	if err != nil || len(got) != 4 {
		t.Fatalf("got %d candles, %v", len(got), err)
	}
	waits := tb.sleeps.all()
	if len(waits) != 2 || waits[1] <= waits[0] {
		t.Errorf("back-off waits %v: want two, growing", waits)
	}
	for _, w := range waits {
		if w < defaultBackoffBase*3/4 || w > defaultBackoffMax*5/4 {
			t.Errorf("wait %v outside the back-off bounds", w)
		}
	}
}

func TestBinanceGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/api/v3/klines", body(http.StatusServiceUnavailable, `{"code":-1008,"msg":"Server is currently overloaded"}`))
	_, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 || !se.Temporary() {
		t.Fatalf("err %v, want a temporary 503 StatusError", err)
	}
	if n := len(tb.up.requestsTo("/api/v3/klines")); n != defaultMaxAttempts {
		t.Errorf("%d attempts, want %d", n, defaultMaxAttempts)
	}
}

func TestBinanceHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/api/v3/klines", sequence(
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			body(http.StatusTooManyRequests, `{"code":-1003,"msg":"Too many requests; current limit of IP is 6000 requests per minute."}`)(w, r)
		},
		file(t, "binance/klines_BTCUSDT_1h.json"),
	))
	if _, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4); err != nil {
		t.Fatal(err)
	}
	if waits := tb.sleeps.all(); !slices.Equal(waits, []time.Duration{7 * time.Second}) {
		t.Errorf("waits %v, want exactly the 7 s Retry-After", waits)
	}
}

func TestBinanceBanLongerThanMaxWaitFailsFast(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.HandleFunc("/api/v3/klines", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "600")
		body(http.StatusTeapot, `{"code":-1003,"msg":"Way too many requests; IP banned until 1763820630000."}`)(w, r)
	})
	ctx := context.Background()
	if _, err := b.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4); err == nil || !strings.Contains(err.Error(), "asks to wait 10m0s") {
		t.Fatalf("err %v", err)
	}
	// While banned, no request reaches Binance.
	_, err := b.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4)
	if err == nil || !strings.Contains(err.Error(), "rate limited until") {
		t.Errorf("second call: %v", err)
	}
	if n := len(tb.up.requestsTo("/api/v3/klines")); n != 1 {
		t.Errorf("%d requests during the ban, want 1", n)
	}
	if len(tb.sleeps.all()) != 0 {
		t.Errorf("slept %v during a ban", tb.sleeps.all())
	}
}

func TestBinanceSlowsDownNearWeightLimit(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	klines, _ := os.ReadFile("testdata/binance/klines_BTCUSDT_1h.json")
	tb.up.mux.HandleFunc("/api/v3/klines", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-MBX-USED-WEIGHT-1M", "5702")
		w.Write(klines)
	})
	ctx := context.Background()
	for range 2 {
		if _, err := b.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4); err != nil {
			t.Fatal(err)
		}
	}
	// testNow is 14:00:30: the second request waits for the next minute.
	if waits := tb.sleeps.all(); !slices.Equal(waits, []time.Duration{30 * time.Second}) {
		t.Errorf("waits %v, want 30 s until the weight resets", waits)
	}
}

func TestBinanceDoesNotRetryClientErrors(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/api/v3/klines", body(http.StatusBadRequest, `{"code":-1121,"msg":"Invalid symbol."}`))
	_, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || se.Temporary() {
		t.Fatalf("err %v", err)
	}
	if n := len(tb.up.requestsTo("/api/v3/klines")); n != 1 {
		t.Errorf("%d attempts for a 400", n)
	}
}

func TestRetriesNetworkErrors(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	reset := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // connection closed before any response
		}
	}
	// net/http itself retries a GET once on a reused connection, so two
	// resets are needed to reach the feed's own retry.
	tb.up.mux.Handle("/api/v3/klines", sequence(reset, reset, file(t, "binance/klines_BTCUSDT_1h.json")))
	got, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4)
	if err != nil || len(got) != 4 || len(tb.sleeps.all()) < 1 {
		t.Fatalf("got %d candles, err %v, waits %v", len(got), err, tb.sleeps.all())
	}
}

func TestPageForward(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	avail := 2500
	var calls []time.Time
	page := func(from time.Time, n int) ([]domain.Candle, error) {
		calls = append(calls, from)
		var out []domain.Candle
		for i := 0; i < n; i++ {
			ts := from.Add(time.Duration(i) * time.Minute)
			if ts.Sub(start) >= time.Duration(avail)*time.Minute {
				break
			}
			out = append(out, domain.Candle{Time: ts, Open: 1, High: 1, Low: 1, Close: 1})
		}
		return out, nil
	}
	got, err := pageForward(start, 2200, 1000, domain.TF1m, page)
	if err != nil || len(got) != 2200 || domain.ValidateCandles(got) != nil {
		t.Fatalf("%d candles, %v", len(got), err)
	}
	if len(calls) != 3 || !calls[2].Equal(start.Add(2000*time.Minute)) {
		t.Errorf("pages from %v", calls)
	}
	calls = nil
	got, _ = pageForward(start, 5000, 1000, domain.TF1m, page)
	if len(got) != avail || len(calls) != 3 {
		t.Errorf("short last page: %d candles in %d calls", len(got), len(calls))
	}
}

func FuzzParseBinanceKlines(f *testing.F) {
	good, _ := os.ReadFile("testdata/binance/klines_BTCUSDT_1h.json")
	f.Add(good)
	for _, bad := range corruptKlines {
		f.Add([]byte(bad))
	}
	f.Add([]byte(`[]`))
	f.Add([]byte(`[[1e300,"1","1","1","1","1"]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := parseBinanceKlines(data)
		if err != nil {
			if cs != nil {
				t.Fatalf("error %v with candles %v", err, cs)
			}
			return
		}
		if err := domain.ValidateCandles(cs); err != nil {
			t.Fatalf("parser returned invalid candles: %v", err)
		}
	})
}

func TestSplitConcatSymbol(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"BTCUSDT": "BTC_USDT", "ETHBTC": "ETH_BTC", "1000SATSFDUSD": "1000SATS_FDUSD",
		"BTCUSDC": "BTC_USDC", "BNBTRY": "BNB_TRY", "btcusd": "BTC_USD", "USDT": "", "XYZ": "",
	} {
		got, _ := splitConcatSymbol(in)
		if got != want {
			t.Errorf("splitConcatSymbol(%q) = %q, want %q", in, got, want)
		}
	}
}
