package feeds

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func setupOanda(t *testing.T) (*oanda, *testBundle) {
	t.Helper()
	tb := setup(t)
	tb.cfg.Now = func() time.Time { return time.Date(2025, 11, 21, 14, 30, 0, 0, time.UTC) }
	hourly, daily := file(t, "oanda/candles_EUR_USD_H1.json"), file(t, "oanda/candles_EUR_USD_D.json")
	tradingDays := file(t, "oanda/candles_EUR_USD_D_NY.json")
	tb.up.mux.HandleFunc("/v3/accounts/{account}/instruments", oandaAuthorized(file(t, "oanda/instruments.json")))
	tb.up.mux.HandleFunc("/v3/accounts/{account}/pricing", oandaAuthorized(file(t, "oanda/pricing.json")))
	tb.up.mux.HandleFunc("/v3/instruments/{instrument}/candles", oandaAuthorized(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.PathValue("instrument") == "USD_JPY":
			body(http.StatusOK, `{"instrument":"USD_JPY","granularity":"H1","candles":[{"complete":true,"volume":10,"time":"2025-11-21T13:00:00.000000000Z","mid":{"o":"NaN","h":"156.1","l":"155.9","c":"156.0"}}]}`)(w, r)
		case q.Get("granularity") == "D" && q.Get("alignmentTimezone") == "America/New_York":
			tradingDays(w, r)
		case q.Get("granularity") == "D":
			daily(w, r)
		default:
			hourly(w, r)
		}
	}))
	return newOanda(tb.cfg), tb
}

// oandaAuthorized answers 401 with the v20 error body unless the request
// carries the test token (development guide, "Authentication").
func oandaAuthorized(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer test-oanda-token" {
			body(http.StatusUnauthorized, `{"errorMessage":"Insufficient authorization to perform request."}`)(w, r)
			return
		}
		next(w, r)
	}
}

// TestOandaTickers: the majors' rows are the pricing response's mids (the
// closeout prices for a side without liquidity, as pricing-df allows)
// against the last complete trading-day candle's close, with its tick
// volume; a corrupt price and pairs without a price are dropped and logged.
func TestOandaTickers(t *testing.T) {
	t.Parallel()
	o, tb := setupOanda(t)
	got, err := o.Tickers(context.Background(), oandaMajor)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Ticker{
		{Symbol: "EUR_USD", Price: (1.15210 + 1.15224) / 2, ChangePct: ((1.15210+1.15224)/2/1.15241 - 1) * 100, Volume: 119870,
			UpdatedAt: time.Date(2025, 11, 21, 14, 29, 58, 729643492, time.UTC)},
		{Symbol: "GBP_USD", Price: (1.31010 + 1.31030) / 2, ChangePct: ((1.31010+1.31030)/2/1.15241 - 1) * 100, Volume: 119870,
			UpdatedAt: time.Date(2025, 11, 21, 14, 29, 57, 621238671, time.UTC)},
	}
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// USD_JPY's bid is "NaN"; AUD_USD, NZD_USD, USD_CAD and USD_CHF have no price.
	if !strings.Contains(tb.logs.String(), "USD_JPY") || tb.logs.count("dropping bad ticker row") != 5 {
		t.Errorf("logs:\n%s", tb.logs)
	}
	reqs := tb.up.requestsTo("/v3/accounts/101-004-1234567-001/pricing")
	if len(reqs) != 1 || len(strings.Split(reqs[0].URL.Query().Get("instruments"), ",")) != 68 {
		t.Fatalf("%d pricing requests, want one for the account's 68 pairs", len(reqs))
	}
	q := tb.up.requestsTo("/v3/instruments/EUR_USD/candles")[0].URL.Query()
	if q.Get("granularity") != "D" || q.Get("count") != "2" || q.Get("price") != "M" || q.Get("dailyAlignment") != "17" || q.Get("alignmentTimezone") != "America/New_York" {
		t.Errorf("reference query %v", q)
	}
}

func TestOandaCandles(t *testing.T) {
	t.Parallel()
	o, tb := setupOanda(t)
	ctx := context.Background()
	since := time.Date(2025, 11, 19, 0, 0, 0, 0, time.UTC)
	got, err := o.Candles(ctx, oandaMajor, "EUR_USD", domain.TF1d, since, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Candle{
		{Time: since, Open: 1.15899, High: 1.1595, Low: 1.1522, Close: 1.15302, Volume: 102344},
		{Time: since.AddDate(0, 0, 1), Open: 1.15301, High: 1.15588, Low: 1.15031, Close: 1.1521, Volume: 121003},
		{Time: since.AddDate(0, 0, 2), Open: 1.15208, High: 1.15533, Low: 1.14911, Close: 1.15126, Volume: 60122},
	}
	if !slices.EqualFunc(got, want, candleEqual) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	q := tb.up.requestsTo("/v3/instruments/EUR_USD/candles")[0].URL.Query()
	if q.Get("from") != "2025-11-19T00:00:00Z" || q.Get("alignmentTimezone") != "UTC" || q.Get("dailyAlignment") != "0" {
		t.Errorf("query %v", q)
	}
	if _, err := o.Candles(ctx, oandaMajor, "USD_JPY", domain.TF1h, time.Time{}, 3); err == nil || !strings.HasPrefix(err.Error(), "feeds: oanda: ") {
		t.Errorf("corrupt candles: %v", err)
	}
	if _, err := o.Candles(ctx, oandaMajor, "EUR_GBP", domain.TF1h, time.Time{}, 3); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("a minor asked as a major: %v", err)
	}
}

func TestOandaBadToken(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.cfg.OandaToken = "wrong"
	tb.up.mux.HandleFunc("/v3/", func(w http.ResponseWriter, r *http.Request) {
		body(http.StatusUnauthorized, `{"errorMessage":"Insufficient authorization to perform request."}`)(w, r)
	})
	o := newOanda(tb.cfg)
	_, err := o.Candles(context.Background(), oandaMajor, "EUR_USD", domain.TF1h, time.Time{}, 3)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 401 || len(tb.up.requests) != 1 {
		t.Errorf("err %v after %d requests", err, len(tb.up.requests))
	}
}

func setupAlpaca(t *testing.T) (*alpaca, *testBundle) {
	t.Helper()
	tb := setup(t)
	snapshots := file(t, "alpaca/snapshots.json")
	tb.up.mux.HandleFunc("/v2/stocks/snapshots", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("APCA-API-KEY-ID") != "test-key-id" || r.Header.Get("APCA-API-SECRET-KEY") != "test-secret" {
			body(http.StatusUnauthorized, `{"message":"forbidden"}`)(w, r)
			return
		}
		snapshots(w, r)
	})
	tb.up.mux.Handle("/v2/stocks/bars", sequence(file(t, "alpaca/bars_AAPL_1Day.json"), file(t, "alpaca/bars_AAPL_1Day_page2.json")))
	return newAlpaca(tb.cfg), tb
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
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// AMZN has a "NaN" price, GOOGL a negative volume.
	if n := tb.logs.count("dropping bad ticker row"); n != 2 {
		t.Errorf("%d dropped rows logged, want 2:\n%s", n, tb.logs)
	}
	q := tb.up.requestsTo("/v2/stocks/snapshots")[0].URL.Query()
	if !strings.HasPrefix(q.Get("symbols"), "AAPL,MSFT,NVDA") || q.Get("feed") != "iex" {
		t.Errorf("query %v", q)
	}
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
		a := newAlpaca(tb.cfg)
		_, err := a.Candles(context.Background(), nasdaq, "AAPL", domain.TF1d, time.Date(2025, 11, 18, 0, 0, 0, 0, time.UTC), 10)
		return err
	})
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
	a.universe["nasdaq"] = []string{"AAPL", "MSFT", "INVALID"}
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

// TestOandaPracticeHost: MARKET_OANDA_ENVIRONMENT=practice points the feed
// at api-fxpractice (the v20 docs' practice host,
// https://developer.oanda.com/rest-live-v20/development-guide/), and an
// explicit oanda URL (MARKET_FEED_URLS) is where requests go.
func TestOandaPracticeHost(t *testing.T) {
	t.Parallel()
	cfg := Config{OandaToken: "t", OandaEnvironment: OandaPractice}.withDefaults()
	if got := newOanda(cfg).api.baseURL; got != "https://api-fxpractice.oanda.com" {
		t.Errorf("practice: base URL %q", got)
	}
	if got := newOanda(Config{OandaToken: "t"}.withDefaults()).api.baseURL; got != "https://api-fxtrade.oanda.com" {
		t.Errorf("default: base URL %q, want the live host", got)
	}
	o, tb := setupOanda(t)
	if _, err := o.Candles(context.Background(), oandaMajor, "EUR_USD", domain.TF1h, time.Time{}, 2); err != nil {
		t.Fatal(err)
	}
	if len(tb.up.requestsTo("/v3/instruments/EUR_USD/candles")) != 1 {
		t.Errorf("the overridden host got no request")
	}
}
