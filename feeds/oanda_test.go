package feeds

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

// The account instruments fixture (testdata/oanda/instruments.json) has
// the shape of the v20 docs' example of GET /v3/accounts/{accountID}/
// instruments (developer.oanda.com/rest-live-v20/account-ep/; the same
// example is kept in hootnot/oanda-api-v20's endpoints/responses/
// accounts.py): the 68 CURRENCY pairs of an fxTrade account among CFDs
// (EU50_EUR, US30_USD, DE30_EUR) and metals (XAU_USD, XAG_USD).

// TestOandaInstrumentsSplit: only CURRENCY instruments are served; the
// seven USD pairs of the majors' rule are forex/oanda/major, every other
// pair (crosses and exotics) forex/oanda/minor, each sorted; the list is
// downloaded once for both.
func TestOandaInstrumentsSplit(t *testing.T) {
	t.Parallel()
	o, tb := setupOanda(t)
	ctx := context.Background()
	majors, err := o.Symbols(ctx, oandaMajor)
	if err != nil {
		t.Fatal(err)
	}
	minors, err := o.Symbols(ctx, oandaMinor)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"AUD_USD", "EUR_USD", "GBP_USD", "NZD_USD", "USD_CAD", "USD_CHF", "USD_JPY"}; !slices.Equal(majors, want) {
		t.Errorf("majors %v, want %v", majors, want)
	}
	if len(minors) != 61 || !slices.IsSorted(minors) {
		t.Errorf("%d minors (sorted: %t), want the other 61 CURRENCY pairs", len(minors), slices.IsSorted(minors))
	}
	for _, s := range []string{"EUR_GBP", "USD_MXN", "ZAR_JPY", "USD_CNH"} {
		if !slices.Contains(minors, s) {
			t.Errorf("minor %s missing", s)
		}
	}
	for _, s := range []string{"EU50_EUR", "XAU_USD", "XAG_USD", "US30_USD", "DE30_EUR"} {
		if slices.Contains(minors, s) || slices.Contains(majors, s) {
			t.Errorf("%s (not CURRENCY) is served", s)
		}
	}
	if n := len(tb.up.requestsTo("/v3/accounts/101-004-1234567-001/instruments")); n != 1 {
		t.Errorf("%d instrument downloads, want 1 (cached)", n)
	}
	// Candles keep working for every listed pair, minors included.
	if _, err := o.Candles(ctx, oandaMinor, "USD_MXN", domain.TF1h, time.Time{}, 3); err != nil {
		t.Errorf("candles of a listed exotic: %v", err)
	}
}

func TestParseOandaInstruments(t *testing.T) {
	t.Parallel()
	got, err := parseOandaInstruments([]byte(`{"instruments":[{"name":"EUR_USD","type":"CURRENCY"},{"name":"eur_usd","type":"CURRENCY"},
		{"name":"BCO_USD","type":"CFD"},{"name":"XAU_USD","type":"METAL"},{"name":"EUR_USD","type":"CURRENCY"},{"name":"USDJPY","type":"CURRENCY"},
		{"name":"GBP_USD","type":"CURRENCY"}]}`))
	if err != nil || !slices.Equal(got, []string{"EUR_USD", "GBP_USD"}) {
		t.Errorf("got %v, %v; want the well-formed CURRENCY pairs once each", got, err)
	}
	for _, bad := range []string{`{"instruments":[{"name":"XAU_USD","type":"METAL"}]}`, `{"instruments":[]}`, `[`} {
		if _, err := parseOandaInstruments([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// FuzzParseOandaInstruments: any body either fails or yields sorted,
// distinct BASE_QUOTE pairs.
func FuzzParseOandaInstruments(f *testing.F) {
	f.Add(`{"instruments":[{"name":"EUR_USD","type":"CURRENCY"}]}`)
	f.Add(`{"instruments":[{"name":"_","type":"CURRENCY"},{"name":"A_B_C","type":"CURRENCY"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		got, err := parseOandaInstruments([]byte(body))
		if err != nil {
			return
		}
		if len(got) == 0 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("%v", got)
		}
		for _, s := range got {
			if _, ok := domain.NormalizeSymbol(domain.Forex, s); !ok || len(s) != 7 {
				t.Fatalf("%q is not a pair", s)
			}
		}
	})
}

// TestOandaInstrumentsRefresh: before any list a failed download is the
// caller's error; once listed, a failed daily refresh keeps the last list,
// is logged once and is tried again after oandaInstrumentsRetry, not on
// every call.
func TestOandaInstrumentsRefresh(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var now atomic.Int64
	now.Store(time.Date(2025, 11, 21, 14, 30, 0, 0, time.UTC).UnixNano())
	tb.cfg.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	var fail atomic.Bool
	fail.Store(true)
	instruments := file(t, "oanda/instruments.json")
	tb.up.mux.HandleFunc("/v3/accounts/{account}/instruments", func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			body(http.StatusServiceUnavailable, `{"errorMessage":"Service unavailable"}`)(w, r)
			return
		}
		instruments(w, r)
	})
	o := newOanda(tb.cfg)
	ctx := context.Background()
	if _, err := o.Symbols(ctx, oandaMajor); err == nil || !strings.HasPrefix(err.Error(), "feeds: oanda: ") {
		t.Fatalf("first list failed: err %v, want the feed's error", err)
	}
	fail.Store(false)
	if syms, err := o.Symbols(ctx, oandaMinor); err != nil || len(syms) != 61 {
		t.Fatalf("listed: %d, %v", len(syms), err)
	}
	downloads := func() int { return len(tb.up.requestsTo("/v3/accounts/101-004-1234567-001/instruments")) }
	before := downloads()
	now.Add(int64(oandaInstrumentsEvery + time.Minute))
	fail.Store(true)
	for range 3 {
		if syms, err := o.Symbols(ctx, oandaMajor); err != nil || len(syms) != 7 {
			t.Fatalf("refresh failed: %d, %v; want the last list", len(syms), err)
		}
	}
	if n := tb.logs.count("keeping the last list"); n != 1 {
		t.Errorf("%d warnings, want 1 (no retry before %s):\n%s", n, oandaInstrumentsRetry, tb.logs)
	}
	// One refresh (its attempts: a 503 is retried in the call) for three calls.
	if got := downloads() - before; got != defaultMaxAttempts {
		t.Errorf("%d downloads during the outage, want one refresh (%d attempts)", got, defaultMaxAttempts)
	}
	now.Add(int64(oandaInstrumentsRetry))
	fail.Store(false)
	if _, err := o.Symbols(ctx, oandaMajor); err != nil || downloads()-before != defaultMaxAttempts+1 {
		t.Errorf("after the retry delay: %v, %d downloads", err, downloads()-before)
	}
}

// TestOandaPricingShared: the major and the minor tickers of one tick
// cost one pricing request of every pair.
func TestOandaPricingShared(t *testing.T) {
	t.Parallel()
	o, tb := setupOanda(t)
	ctx := context.Background()
	if _, err := o.Tickers(ctx, oandaMajor); err != nil {
		t.Fatal(err)
	}
	minors, err := o.Tickers(ctx, oandaMinor)
	if err != nil {
		t.Fatal(err)
	}
	if len(minors) != 1 || minors[0].Symbol != "EUR_JPY" {
		t.Errorf("minors %+v, want EUR_JPY (the fixture's other priced pair)", minors)
	}
	if n := len(tb.up.requestsTo("/v3/accounts/101-004-1234567-001/pricing")); n != 1 {
		t.Errorf("%d pricing requests, want 1", n)
	}
}

// TestOandaReferences: a reference is the newest complete trading-day
// candle; it holds until the open trading day closes (its open + 24 h),
// then one candle request per pair fetches the next one. Over a weekend
// (both candles complete) it is fetched again hourly.
func TestOandaReferences(t *testing.T) {
	t.Parallel()
	open := time.Date(2025, 11, 20, 22, 0, 0, 0, time.UTC) // Thursday 17:00 New York
	cs := []oandaCandle{
		{Candle: domain.Candle{Time: open.Add(-24 * time.Hour), Open: 1, High: 2, Low: 0.5, Close: 1.15241, Volume: 119870}, complete: true},
		{Candle: domain.Candle{Time: open, Open: 1, High: 2, Low: 0.5, Close: 1.15217, Volume: 48211}},
	}
	now := time.Date(2025, 11, 21, 14, 30, 0, 0, time.UTC)
	ref, err := oandaReferenceOf("EUR_USD", cs, now)
	if err != nil {
		t.Fatal(err)
	}
	if ref.close != 1.15241 || ref.volume != 119870 || !ref.day.Equal(open.Add(-24*time.Hour)) {
		t.Errorf("reference %+v, want the complete candle's close and volume", ref)
	}
	if want := now.Add(oandaReferenceEvery); !ref.validUntil.Equal(want) {
		t.Errorf("valid until %v, want %v (an hour: the day closes later)", ref.validUntil, want)
	}
	late := open.Add(24*time.Hour - 10*time.Minute)
	if ref, _ := oandaReferenceOf("EUR_USD", cs, late); !ref.validUntil.Equal(open.Add(24 * time.Hour)) {
		t.Errorf("10 minutes before the close: valid until %v, want the close", ref.validUntil)
	}
	cs[1].complete = true // the weekend: Friday's day is over
	saturday := time.Date(2025, 11, 22, 12, 0, 0, 0, time.UTC)
	if ref, _ := oandaReferenceOf("EUR_USD", cs, saturday); ref.close != 1.15217 || !ref.validUntil.Equal(saturday.Add(oandaReferenceEvery)) {
		t.Errorf("weekend reference %+v, want Friday's close for an hour", ref)
	}
	if _, err := oandaReferenceOf("EUR_USD", cs[:0], now); err == nil {
		t.Error("no candle: no error")
	}
	tk, err := ref.tickerOf(Quote{Symbol: "EUR_USD", Price: 1.16, Time: now.Add(time.Minute)}, now)
	want := domain.Ticker{Symbol: "EUR_USD", Price: 1.16, ChangePct: (1.16/1.15241 - 1) * 100, Volume: 119870, UpdatedAt: now}
	if err != nil || !tickerClose(tk, want) {
		t.Errorf("ticker %+v, %v; want the change against the close, the day's tick volume, a future time clamped: %+v", tk, err, want)
	}
}

// TestOandaWeekend: on a Saturday the pricing endpoint still answers every
// pair with Friday's last price, not tradeable; the rows are served (the
// screener keeps the last price) without an error or a warning, and the
// references (both trading days complete) are fetched once for the hour.
func TestOandaWeekend(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var now atomic.Int64
	now.Store(time.Date(2025, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	tb.cfg.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	tb.up.mux.HandleFunc("/v3/accounts/{account}/instruments", body(http.StatusOK, `{"instruments":[{"name":"EUR_USD","type":"CURRENCY"}]}`))
	tb.up.mux.HandleFunc("/v3/accounts/{account}/pricing", body(http.StatusOK, `{"time":"2025-11-22T12:00:00.000000000Z","prices":[
		{"type":"PRICE","instrument":"EUR_USD","time":"2025-11-21T21:59:58.123456789Z","status":"non-tradeable","tradeable":false,
		 "bids":[{"price":"1.15120","liquidity":1000000}],"asks":[{"price":"1.15140","liquidity":1000000}],"closeoutBid":"1.15110","closeoutAsk":"1.15150"}]}`))
	tb.up.mux.HandleFunc("/v3/instruments/{instrument}/candles", file(t, "oanda/candles_EUR_USD_D_NY_weekend.json"))
	o := newOanda(tb.cfg)
	ctx := context.Background()
	for range 2 {
		now.Add(int64(5 * time.Second))
		got, err := o.Tickers(ctx, oandaMajor)
		if err != nil {
			t.Fatal(err)
		}
		want := domain.Ticker{Symbol: "EUR_USD", Price: 1.1513, ChangePct: (1.1513/1.15130 - 1) * 100, Volume: 101552,
			UpdatedAt: time.Date(2025, 11, 21, 21, 59, 58, 123456789, time.UTC)}
		if len(got) != 1 || !tickerClose(got[0], want) {
			t.Errorf("weekend rows %+v, want %+v", got, want)
		}
	}
	if n := len(tb.up.requestsTo("/v3/instruments/EUR_USD/candles")); n != 1 {
		t.Errorf("%d reference requests, want 1 (valid for the hour)", n)
	}
	if strings.Contains(tb.logs.String(), "level=WARN") || strings.Contains(tb.logs.String(), "level=ERROR") {
		t.Errorf("the weekend logged:\n%s", tb.logs)
	}
}

// TestOandaQuoteTickers: pushed quotes become rows with the references;
// when a reference cannot be refreshed, the stale one is kept (one warning,
// no retry for a minute); with none at all the call fails.
func TestOandaQuoteTickers(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var now atomic.Int64
	start := time.Date(2025, 11, 21, 14, 30, 0, 0, time.UTC)
	now.Store(start.UnixNano())
	tb.cfg.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	var fail atomic.Bool
	tradingDays := file(t, "oanda/candles_EUR_USD_D_NY.json")
	tb.up.mux.HandleFunc("/v3/instruments/{instrument}/candles", func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			body(http.StatusInternalServerError, `{"errorMessage":"Internal error"}`)(w, r)
			return
		}
		tradingDays(w, r)
	})
	o := newOanda(tb.cfg)
	ctx := context.Background()
	q := []Quote{{Symbol: "EUR_USD", Price: 1.153, Time: start}}
	rows, err := o.QuoteTickers(ctx, oandaMajor, q)
	want := domain.Ticker{Symbol: "EUR_USD", Price: 1.153, ChangePct: (1.153/1.15241 - 1) * 100, Volume: 119870, UpdatedAt: start}
	if err != nil || len(rows) != 1 || !tickerClose(rows[0], want) {
		t.Fatalf("rows %+v, %v; want %+v", rows, err, want)
	}
	fail.Store(true)
	now.Add(int64(2 * oandaReferenceEvery))
	for range 3 {
		if rows, err := o.QuoteTickers(ctx, oandaMajor, q); err != nil || len(rows) != 1 {
			t.Fatalf("stale reference: %+v, %v", rows, err)
		}
	}
	if n := tb.logs.count("daily references failed"); n != 1 {
		t.Errorf("%d warnings, want 1 (retried after %s):\n%s", n, oandaReferenceRetry, tb.logs)
	}
	if _, err := o.QuoteTickers(ctx, oandaMajor, []Quote{{Symbol: "GBP_USD", Price: 1.31, Time: start}}); err == nil {
		t.Error("no reference at all: no error")
	}
}

// TestOandaOpenPriceStream: the stream is asked on the oanda-stream host
// with the token and the instruments as one comma-separated parameter
// (pricing-ep); a refusal is a StatusError; at most 20 streams are open
// (development guide: 20 active streams per IP).
func TestOandaOpenPriceStream(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.up.mux.HandleFunc("/v3/accounts/{account}/pricing/stream", oandaAuthorized(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, `{"type":"HEARTBEAT","time":"2025-11-21T14:30:00.000000000Z"}`+"\n")
	}))
	o := newOanda(tb.cfg)
	ctx := context.Background()
	var open []io.ReadCloser
	for range oandaMaxStreams {
		b, err := o.OpenPriceStream(ctx, []string{"EUR_USD", "USD_JPY"})
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, b)
	}
	line, _ := io.ReadAll(open[0])
	if !strings.Contains(string(line), "HEARTBEAT") {
		t.Errorf("body %q", line)
	}
	if _, err := o.OpenPriceStream(ctx, []string{"EUR_USD"}); err == nil || !strings.Contains(err.Error(), "20 per IP") {
		t.Errorf("21st stream: %v, want refused", err)
	}
	open[0].Close()
	open[0].Close() // twice counts once
	b, err := o.OpenPriceStream(ctx, []string{"EUR_USD"})
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	b.Close()
	r := tb.up.requestsTo("/v3/accounts/101-004-1234567-001/pricing/stream")[0]
	if r.URL.Query().Get("instruments") != "EUR_USD,USD_JPY" || r.Header.Get("Authorization") != "Bearer test-oanda-token" {
		t.Errorf("request %v %v", r.URL, r.Header)
	}
	tb.cfg.OandaToken = "wrong"
	var se *StatusError
	if _, err := newOanda(tb.cfg).OpenPriceStream(ctx, []string{"EUR_USD"}); !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad token: %v", err)
	}
}

// TestOandaConnectionPacing: new connections are booked in a budget of 2
// a second (development guide, "Connection Limiting"), planned at the
// headroom (80 %: one a second): three connections opened at once wait
// 0, 1 and 2 seconds. Kept-alive connections book nothing.
func TestOandaConnectionPacing(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.up.mux.HandleFunc("/v3/accounts/{account}/instruments", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // every request dials
		file(t, "oanda/instruments.json")(w, r)
	})
	o := newOanda(tb.cfg)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := o.api.get(context.Background(), "/v3/accounts/101-004-1234567-001/instruments", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var waits []time.Duration
	for _, d := range tb.sleeps.all() {
		if d > 0 {
			waits = append(waits, d)
		}
	}
	slices.Sort(waits)
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second}) {
		t.Errorf("dial waits %v, want 1s and 2s", waits)
	}
	if o.api.limit != (hostbudget.Limit{Name: NameOanda, Window: time.Second, Max: 120}) {
		t.Errorf("REST budget %+v, want 120 requests a second", o.api.limit)
	}
}
