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
