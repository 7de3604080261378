package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	apiclient "github.com/marketscreener/market/client"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

type screenerRow struct {
	Symbol    string    `json:"symbol"`
	Price     float64   `json:"price"`
	ChangePct float64   `json:"change_pct"`
	Volume    float64   `json:"volume"`
	UpdatedAt time.Time `json:"updated_at"`
}

type candle struct {
	Time                           time.Time
	Open, High, Low, Close, Volume float64
}

// TestSyntheticDeploymentServesMarketData: marketd all with the synthetic
// feed against empty Postgres/Redis serves a non-empty screener for every
// catalogue combination and 200 candles of a listed symbol within 30 s, and
// prices change from one ingest to the next.
func TestSyntheticDeploymentServesMarketData(t *testing.T) {
	t.Parallel()
	d := newDeployment(t, map[string]string{"MARKET_FEEDS": "synthetic"})
	key := d.cli("demo-key")
	start := time.Now()
	base, _ := d.start("all")

	// The contract's reads go through the generated Go client (package
	// client); the symbol forms and the error cases stay raw URLs.
	public := newAPIClient(t, base, key)
	ctx := t.Context()
	combos := domain.Catalogue(domain.DefaultRegion)
	poll(t, 30*time.Second-time.Since(start), func() string {
		for _, combo := range combos {
			r, err := public.GetScreenerWithResponse(ctx, apiclient.GetScreenerParamsMarketType(combo.Market), combo.Exchange, combo.Instrument, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.JSON200 == nil || len(*r.JSON200) == 0 {
				return fmt.Sprintf("screener %s: %d %s", combo, r.StatusCode(), r.Body)
			}
		}
		r, err := public.GetOhlcvWithResponse(ctx, "crypto", "binance", "BTC_USDT", "1h", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.JSON200 == nil || len(*r.JSON200) != 200 {
			return fmt.Sprintf("ohlcv: %d %.200s", r.StatusCode(), r.Body)
		}
		return ""
	})
	t.Logf("every combination and 200 candles served %.1fs after start", time.Since(start).Seconds())

	// Operators see every feed healthy.
	var health []struct {
		Combination string `json:"combination"`
		Kind        string `json:"kind"`
		Failing     bool   `json:"failing"`
		LastError   string `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(d.cli("feed-health", "--json")), &health); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, h := range health {
		if h.Failing {
			t.Errorf("feed %s %s failing: %s", h.Combination, h.Kind, h.LastError)
		}
		if h.Kind == "tickers" {
			seen[h.Combination] = true
		}
	}
	if len(seen) != len(combos) {
		t.Errorf("feed-health lists tickers of %d combinations, want %d", len(seen), len(combos))
	}

	// The three symbol forms give the same candles, oldest first. The
	// stream stores the open candle every few seconds, so a write may land
	// between the three reads: they are read again until one set agrees.
	var a, b, c []candle
	for deadline := time.Now().Add(30 * time.Second); ; {
		getJSON(t, base+"/ohlcv/crypto/binance/BTC_USDT/1h?limit=50", key, &a)
		getJSON(t, base+"/ohlcv/crypto/binance/btc/usdt/1h?limit=50", key, &b)
		getJSON(t, base+"/ohlcv/crypto/binance/"+url.PathEscape("BTC/USDT")+"/1h?limit=50", key, &c)
		if len(a) == 50 && fmt.Sprint(a) == fmt.Sprint(b) && fmt.Sprint(a) == fmt.Sprint(c) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("symbol forms differ: %d/%d/%d candles", len(a), len(b), len(c))
		}
	}
	for i := 1; i < len(a); i++ {
		if !a[i].Time.After(a[i-1].Time) {
			t.Fatalf("candles not oldest first at %d", i)
		}
	}

	// Prices move from one ingest to the next.
	priceOf := func() (float64, time.Time) {
		for _, r := range screener(t, public, nil) {
			if r.Symbol == "BTC_USDT" {
				return r.Price, r.UpdatedAt
			}
		}
		t.Fatal("BTC_USDT missing from the screener")
		return 0, time.Time{}
	}
	p0, u0 := priceOf()
	poll(t, 45*time.Second, func() string {
		p1, u1 := priceOf()
		if !u1.After(u0) || p1 == p0 {
			return fmt.Sprintf("BTC_USDT still %v at %s", p1, u1)
		}
		return ""
	})

	// The worker scores what was ingested: every market has analytics, and a
	// report is served in the requested language.
	poll(t, 60*time.Second, func() string {
		for _, m := range domain.Markets {
			r, err := public.GetAnalyticsListWithResponse(ctx, apiclient.GetAnalyticsListParamsMarket(m), nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.JSON200 == nil || len(*r.JSON200) == 0 {
				return fmt.Sprintf("analytics list %s: %d %s", m, r.StatusCode(), r.Body)
			}
		}
		return ""
	})
	var report *apiclient.AnalyticsReport
	// Fundamentals are ingested on their own schedule; a report is scored
	// again as soon as they are in. A functional bound: under the suite's
	// load (race builds, testcontainers) Redis answered late and 60 s did
	// not always do.
	poll(t, 120*time.Second, func() string {
		lang := apiclient.GetAnalyticsReportParamsLangEn
		r, err := public.GetAnalyticsReportWithResponse(ctx, "crypto", "BTC_USDT", &apiclient.GetAnalyticsReportParams{Lang: &lang})
		if err != nil {
			t.Fatal(err)
		}
		report = r.JSON200
		if report == nil || report.Symbol != "BTC_USDT" || report.Summary == "" || report.Factors == nil || len(*report.Factors) < 20 ||
			report.FundamentalScore == nil {
			return fmt.Sprintf("BTC_USDT report: %d %.300s", r.StatusCode(), r.Body)
		}
		return ""
	})
	t.Logf("every market scored %.1fs after start; BTC_USDT %s", time.Since(start).Seconds(), report.Verdict)
	auditable(t, d, public, report, start)

	// Filters filter (their inclusiveness is unit-tested in store).
	all := screener(t, public, nil)
	threshold := all[len(all)/2].Volume
	some := screener(t, public, &apiclient.GetScreenerParams{VolumeMin: &threshold})
	if len(some) == 0 || len(some) >= len(all) {
		t.Fatalf("volume_min did not filter: %d of %d rows", len(some), len(all))
	}
	for _, r := range some {
		if r.Volume < threshold {
			t.Fatalf("volume_min=%v let %s (%v) through", threshold, r.Symbol, r.Volume)
		}
	}
}

// TestMarketDataErrors: the 400 / 403 / 404 rules of the market endpoints,
// in the documented order (400 parameters before 403 market before 404).
func TestMarketDataErrors(t *testing.T) {
	t.Parallel()
	d := newDeployment(t, nil)
	id := d.cli("clients", "create", "--org", "Starter Co", "--tier", "starter", "--markets", "crypto")
	key := d.cli("keys", "issue", "--client", id)
	base, _ := d.start("api")
	cases := []struct {
		path   string
		status int
		detail string
	}{
		{"/screener/bonds/binance/spot", 400, "market_type"},
		{"/screener/forex/oanda/major?volume_min=x", 400, "volume_min"},
		{"/screener/crypto/binance/spot?change_min=3&change_max=1", 400, "change_min"},
		{"/screener/crypto/binance/spot?volume_min=NaN", 400, "volume_min"},
		{"/screener/forex/oanda/major", 403, "not included in your tier"},
		{"/ohlcv/stocks/nasdaq/AAPL/1d", 403, "not included in your tier"},
		{"/ohlcv/crypto/binance/BTC_USDT/2h", 400, "timeframe"},
		{"/ohlcv/crypto/binance/BTC_USDT/1h?limit=0", 400, "limit"},
		{"/ohlcv/crypto/binance/BTC_USDT/1h?limit=1001", 400, "limit"},
		{"/ohlcv/crypto/binance/BTC-USDT/1h", 400, "symbol"},
		{"/ohlcv/bonds/binance/BTC_USDT/1h", 400, "market_type"},
		{"/screener/crypto/kraken/spot", 404, "binance/spot"},
		{"/ohlcv/crypto/kraken/BTC_USDT/1h", 404, "binance/spot"},
	}
	for _, c := range cases {
		status, problem := getJSON(t, base+c.path, key, nil)
		detail, _ := problem["detail"].(string)
		errs, _ := problem["errors"].([]any)
		if status != c.status || !strings.Contains(detail+fmt.Sprint(errs), c.detail) {
			t.Errorf("GET %s = %d %q %v, want %d mentioning %q", c.path, status, detail, errs, c.status, c.detail)
		}
	}
}

// newAPIClient is the generated Go client of the public API at base, with
// key; a 429 fails the test, as in getJSON, and a transient 503 is
// retried (apiClient.Do).
func newAPIClient(t *testing.T, base, key string) *apiclient.ClientWithResponses {
	t.Helper()
	c, err := apiclient.NewClientWithResponses(base, apiclient.WithRequestEditorFn(apiclient.APIKey(key)),
		apiclient.WithHTTPClient(apiClient{t}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apiClient is the e2e suite's HTTP client of the public API, behaving as
// the API asks a client to behave.
type apiClient struct{ t *testing.T }

// transientRetries bounds how long a request is retried on a transient
// 503.
const transientRetries = 30

// Do fails the test on a 429: no test here means to reach a limit. A 503
// that says a dependency did not answer (a loaded CI host: Postgres in a
// container, beside the other test packages) is retried, as its detail
// asks, every second up to transientRetries times: for any method when
// the data service refused the request before doing anything (not ready);
// for a GET also when its database work ran out of time. A write that ran
// out of time is not retried: it may have been done, and its retry would
// answer differently. The other 503s (no data yet, a job not run) are what
// the tests poll for, and come back at once.
func (f apiClient) Do(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return resp, err
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			f.t.Fatalf("%s %s: 429: the test spent its key's limit", req.Method, req.URL)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || attempt > transientRetries {
			return resp, nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if !transient503(req.Method, body) || (req.Body != nil && req.GetBody == nil) {
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return resp, nil
		}
		f.t.Logf("%s %s: 503 (attempt %d): %.200s; retrying", req.Method, req.URL, attempt, body)
		select {
		case <-time.After(time.Second):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// transient503 tells whether a 503's body is one a client retries (Do).
func transient503(method string, body []byte) bool {
	if bytes.Contains(body, []byte("the data service is not initialised yet")) {
		return true
	}
	return method == http.MethodGet && (bytes.Contains(body, []byte("did not answer in time")) ||
		bytes.Contains(body, []byte("the database is unavailable")))
}

// screener is the crypto/binance/spot screener, which must answer 200.
func screener(t *testing.T, c *apiclient.ClientWithResponses, params *apiclient.GetScreenerParams) []apiclient.ScreenerRecord {
	t.Helper()
	r, err := c.GetScreenerWithResponse(t.Context(), "crypto", "binance", "spot", params)
	if err != nil {
		t.Fatal(err)
	}
	if r.JSON200 == nil {
		t.Fatalf("screener: %d %s", r.StatusCode(), r.Body)
	}
	return *r.JSON200
}

// auditable checks, through the generated client, what a quant needs to
// audit and replay a report: the method that made it (model_version, and
// GET /analytics/methodology describing it), the data behind it (as_of,
// candles_used, source, data_age_seconds), the report as of an instant,
// the history in cursor pages, and the rest of the contract's reads.
func auditable(t *testing.T, d *deployment, public *apiclient.ClientWithResponses, report *apiclient.AnalyticsReport, start time.Time) {
	t.Helper()
	ctx := t.Context()
	// The feed is live: the newest data a swing score used is at most one
	// 4h candle (and the time since the answer was cached) old.
	if report.ModelVersion != "v1" || report.CandlesUsed < 60 || report.AsOf.Before(start.Add(-24*time.Hour)) ||
		report.DataAgeSeconds > int64((4*time.Hour+time.Since(start)).Seconds()) ||
		report.Source.Feed == "" || report.Source.Exchange != "binance" || report.Source.Timeframe != "4h" {
		t.Errorf("BTC_USDT report: model_version %q, candles_used %d, as_of %s, data_age_seconds %d, source %+v",
			report.ModelVersion, report.CandlesUsed, report.AsOf, report.DataAgeSeconds, report.Source)
	}
	meth, err := public.GetAnalyticsMethodologyWithResponse(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := meth.JSON200; m == nil || m.CurrentVersion != report.ModelVersion || m.Versions == nil || len(*m.Versions) == 0 ||
		(*m.Versions)[len(*m.Versions)-1].Version != report.ModelVersion || (*m.Versions)[len(*m.Versions)-1].Changelog == "" {
		t.Errorf("methodology: %d %.300s", meth.StatusCode(), meth.Body)
	}

	// As of now: the last report published, by the same method; as of
	// before the deployment started: nothing was published yet.
	now := time.Now().UTC().Format(time.RFC3339Nano)
	asOf, err := public.GetAnalyticsReportWithResponse(ctx, "crypto", "BTC_USDT", &apiclient.GetAnalyticsReportParams{AsOf: &now})
	if err != nil {
		t.Fatal(err)
	}
	if r := asOf.JSON200; r == nil || r.Symbol != "BTC_USDT" || r.ModelVersion != report.ModelVersion || r.UpdatedAt.After(time.Now()) {
		t.Errorf("as_of now: %d %.300s", asOf.StatusCode(), asOf.Body)
	}
	before := start.Add(-time.Hour).UTC().Format(time.RFC3339)
	if r, err := public.GetAnalyticsReportWithResponse(ctx, "crypto", "BTC_USDT", &apiclient.GetAnalyticsReportParams{AsOf: &before}); err != nil {
		t.Fatal(err)
	} else if r.StatusCode() != http.StatusNotFound {
		t.Errorf("as_of before the first report: %d %.300s, want 404", r.StatusCode(), r.Body)
	}

	// History in pages of one, following the Link header's cursor, gives
	// the snapshots of one page, newest first. A snapshot is taken
	// when the score or the verdict changes, which a quiet synthetic walk
	// may not do within the test: an older one is written beside the first.
	db, err := store.Open(ctx, d.env["MARKET_DATABASE_URL"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	older := start.Add(-2 * time.Hour).Truncate(time.Second)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO analytics_snapshots (market, style, symbol, at, overall_score, technical_score, verdict, price, model_version)
		VALUES ('crypto', 'swing', 'BTC_USDT', $1, 0, 0, 'neutral', 1, 'v1')`, older); err != nil {
		t.Fatal(err)
	}
	hundred := int64(100)
	h, err := public.GetAnalyticsHistoryWithResponse(ctx, "crypto", "BTC_USDT", &apiclient.GetAnalyticsHistoryParams{Limit: &hundred})
	if err != nil {
		t.Fatal(err)
	}
	if h.JSON200 == nil || len(*h.JSON200) < 2 || (*h.JSON200)[0].ModelVersion != report.ModelVersion ||
		!(*h.JSON200)[len(*h.JSON200)-1].At.Equal(older) {
		t.Fatalf("history: %d %.300s", h.StatusCode(), h.Body)
	}
	all := *h.JSON200
	one := int64(1)
	to := all[0].At.UTC().Format(time.RFC3339Nano)
	params := &apiclient.GetAnalyticsHistoryParams{Limit: &one, To: &to}
	for i, want := range all {
		h, err := public.GetAnalyticsHistoryWithResponse(ctx, "crypto", "BTC_USDT", params)
		if err != nil {
			t.Fatal(err)
		}
		if h.JSON200 == nil || len(*h.JSON200) != 1 || !(*h.JSON200)[0].At.Equal(want.At) || (*h.JSON200)[0].ModelVersion != want.ModelVersion {
			t.Fatalf("history page %d: %d %.300s, want the snapshot at %s", i, h.StatusCode(), h.Body, want.At)
		}
		next := linkCursor(h.HTTPResponse.Header.Get("Link"))
		if next == "" && i < len(all)-1 {
			t.Fatalf("history page %d: no next page in Link %q", i, h.HTTPResponse.Header.Get("Link"))
		}
		params.Cursor = &next
	}

	top, err := public.GetAnalyticsTopSetupsWithResponse(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if top.JSON200 == nil || len(*top.JSON200) == 0 {
		t.Fatalf("top-setups: %d %.300s", top.StatusCode(), top.Body)
	}
	for _, s := range *top.JSON200 {
		if s.Source.Feed == "" || s.AsOf.IsZero() {
			t.Errorf("top setup %s: source %+v, as_of %s", s.Symbol, s.Source, s.AsOf)
		}
	}
	// The deployments here leave the statistics job off: its reads say
	// so, with a retry, rather than answer empty.
	stats, err := public.GetAnalyticsStatsWithResponse(ctx, "crypto", nil)
	if err != nil {
		t.Fatal(err)
	}
	factors, err := public.GetAnalyticsFactorStatsWithResponse(ctx, "crypto", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, status := range map[string]int{"stats": stats.StatusCode(), "factor-stats": factors.StatusCode()} {
		if status != http.StatusServiceUnavailable {
			t.Errorf("%s with the statistics job off: %d, want 503", name, status)
		}
	}
	usage, err := public.GetUsageWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := usage.JSON200; u == nil || u.UsedThisMonth == 0 || u.Status != "active" {
		t.Errorf("usage: %d %.300s", usage.StatusCode(), usage.Body)
	}
}

// linkCursor is the cursor of a Link header's rel="next" target ("" when none).
func linkCursor(link string) string {
	for _, part := range strings.Split(link, ",") {
		target, rel, _ := strings.Cut(part, ";")
		if !strings.Contains(rel, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err == nil {
			return u.Query().Get("cursor")
		}
	}
	return ""
}
