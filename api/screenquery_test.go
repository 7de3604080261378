package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
)

// post sends a JSON body to path with the fixture's key.
func (f *marketFixture) post(t testing.TB, path string, body any, header ...string) reply {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/v1/public"+path, bytes.NewReader(b))
	req.Header.Set("X-API-Key", f.key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: rb}
}

// seedScreen scores n crypto assets in swing and scalp (drifts spread
// from falling to rising) and stores screener rows for most of them.
func seedScreen(t testing.TB, f *marketFixture, n int) {
	t.Helper()
	ctx := context.Background()
	var recs []store.AnalyticsRecord
	var rows []domain.Ticker
	for i := range n {
		sym := fmt.Sprintf("A%02d_USDT", i)
		for si, st := range []analytics.Style{analytics.Swing, analytics.Scalp} {
			x := float64(i) / float64(n-1)
			if si == 1 {
				x = 1 - x
			}
			drift := -0.01 + 0.03*x
			cs := walk(300, drift, f.now.Truncate(4*time.Hour))
			res, err := analytics.Score(analytics.Input{Market: domain.Crypto, Symbol: sym, Candles: cs})
			if err != nil {
				t.Fatal(err)
			}
			last := cs[len(cs)-1]
			recs = append(recs, store.AnalyticsRecord{Market: domain.Crypto, Style: st, Symbol: sym, Exchange: "binance", Instrument: "spot",
				Result: &res, OverallScore: res.OverallScore, Verdict: res.Verdict, Price: last.Close, ChangePct: 1,
				Sparkline: []float64{1}, CandleTime: last.Time, CandleClose: last.Close, UpdatedAt: f.now})
		}
		if i%5 != 4 {
			rows = append(rows, domain.Ticker{Symbol: sym, Price: 100 + float64(i), ChangePct: float64(i%7) - 3, Volume: float64(i) * 1e6, UpdatedAt: f.now})
		}
	}
	if _, err := f.db.SaveAnalytics(ctx, recs, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.db.ReplaceTickers(ctx, binanceSpot, rows); err != nil {
		t.Fatal(err)
	}
	f.cache.InvalidateAll()
}

type queryPage struct {
	Items      []map[string]any `json:"items"`
	NextCursor *string          `json:"next_cursor"`
}

// queryAll pages through a query, limit items at a time.
func queryAll(t *testing.T, f *marketFixture, q map[string]any, limit int) []map[string]any {
	t.Helper()
	var out []map[string]any
	q["limit"] = limit
	delete(q, "cursor")
	for range 100 {
		r := f.post(t, "/screener/query", q)
		var p queryPage
		if r.status != http.StatusOK || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("query %v: %d %s", q, r.status, r.body)
		}
		if len(p.Items) > limit {
			t.Fatalf("query %v: %d items, limit %d", q, len(p.Items), limit)
		}
		out = append(out, p.Items...)
		if p.NextCursor == nil {
			return out
		}
		q["cursor"] = *p.NextCursor
	}
	t.Fatal("query: no last page after 100 pages")
	return nil
}

// The answer equals filtering GET /analytics/crypto/list and the reports
// client-side, in order, over every page.
func TestScreenerQueryEqualsFilteringTheReports(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedScreen(t, f, 23)

	reports := map[analytics.Style]map[string]api.AnalyticsReport{}
	var symbols []string
	for _, st := range []analytics.Style{analytics.Swing, analytics.Scalp} {
		status, body := f.get(t, "/analytics/crypto/list?style="+string(st))
		var list []api.AnalyticsListItem
		if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
			t.Fatalf("list: %d %s", status, body)
		}
		reports[st] = map[string]api.AnalyticsReport{}
		for _, it := range list {
			status, body := f.get(t, "/analytics/crypto/"+it.Symbol+"?lang=en&style="+string(st))
			var rep api.AnalyticsReport
			if status != http.StatusOK || json.Unmarshal(body, &rep) != nil {
				t.Fatalf("report: %d %s", status, body)
			}
			if rep.OverallScore != it.OverallScore || rep.Verdict != it.Verdict {
				t.Fatalf("list and report disagree on %s", it.Symbol)
			}
			reports[st][it.Symbol] = rep
			if st == analytics.Swing {
				symbols = append(symbols, it.Symbol)
			}
		}
	}
	factor := func(r api.AnalyticsReport, name string) (api.ReportFactor, bool) {
		for _, fa := range r.Factors {
			if fa.Name == name {
				return fa, true
			}
		}
		return api.ReportFactor{}, false
	}
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	sw, sc := reports[analytics.Swing], reports[analytics.Scalp]
	var growth int
	for _, r := range sw {
		if r.Verdict == analytics.VerdictGrowth {
			growth++
		}
	}
	if growth == 0 || growth == len(sw) {
		t.Fatalf("fixture: %d of %d growth verdicts; want some of each", growth, len(sw))
	}
	tests := []struct {
		where, orderBy, style string
		keep                  func(sym string) bool
		key                   func(sym string) float64 // order value, desc unless asc
		asc                   bool
	}{
		{`verdict == "growth"`, "", "",
			func(s string) bool { return sw[s].Verdict == analytics.VerdictGrowth },
			func(s string) float64 { return float64(sw[s].OverallScore) }, false},
		{`overall_score > -10 && factors.rsi_14.value < 60`, "factors.rsi_14.value asc", "swing",
			func(s string) bool {
				fa, ok := factor(sw[s], "rsi_14")
				return sw[s].OverallScore > -10 && ok && num(fa.Value) < 60
			},
			func(s string) float64 { fa, _ := factor(sw[s], "rsi_14"); return num(fa.Value) }, true},
		{`swing.overall_score > scalp.overall_score`, "scalp.overall_score desc", "",
			func(s string) bool { return sw[s].OverallScore > sc[s].OverallScore },
			func(s string) float64 { return float64(sc[s].OverallScore) }, false},
		{`verdict != "growth" && factors.macd_12_26_9.sentiment == "bearish"`, "", "scalp",
			func(s string) bool {
				fa, ok := factor(sc[s], "macd_12_26_9")
				return sc[s].Verdict != analytics.VerdictGrowth && ok && fa.Sentiment == analytics.Bearish
			},
			func(s string) float64 { return float64(sc[s].OverallScore) }, false},
		{`fundamental_score == null`, "overall_score asc", "",
			func(s string) bool { return sw[s].FundamentalScore == nil },
			func(s string) float64 { return float64(sw[s].OverallScore) }, true},
		{``, "", "", func(string) bool { return true },
			func(s string) float64 { return float64(sw[s].OverallScore) }, false},
	}
	for _, tt := range tests {
		var want []string
		for _, s := range symbols {
			if tt.keep(s) {
				want = append(want, s)
			}
		}
		slices.SortStableFunc(want, func(a, b string) int {
			ka, kb := tt.key(a), tt.key(b)
			if ka != kb {
				if (ka < kb) == tt.asc {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		q := map[string]any{"market": "crypto", "where": tt.where}
		if tt.orderBy != "" {
			q["order_by"] = tt.orderBy
		}
		if tt.style != "" {
			q["style"] = tt.style
		}
		for _, limit := range []int{3, 500} {
			items := queryAll(t, f, q, limit)
			var got []string
			for _, it := range items {
				got = append(got, it["symbol"].(string))
				if it["market"] != "crypto" || it["exchange"] != "binance" || it["instrument"] != "spot" {
					t.Errorf("%q: item %v", tt.where, it)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("where %q order_by %q style %q limit %d:\n got %v\nwant %v", tt.where, tt.orderBy, tt.style, limit, got, want)
			}
		}
	}

	// Items carry the variables read, named as written, and the style's fixed fields.
	items := queryAll(t, f, map[string]any{"market": "crypto", "style": "scalp",
		"where": `swing.verdict == "growth" || factors.rsi_14.value > 0 || volume >= 0`, "order_by": "price desc"}, 500)
	if len(items) != len(symbols) {
		t.Fatalf("%d items, want %d", len(items), len(symbols))
	}
	for i, it := range items {
		s := it["symbol"].(string)
		fa, _ := factor(sc[s], "rsi_14")
		if it["swing.verdict"] != string(sw[s].Verdict) || it["factors.rsi_14.value"] != num(fa.Value) ||
			it["overall_score"] != float64(sc[s].OverallScore) || it["verdict"] != string(sc[s].Verdict) {
			t.Errorf("item %v: want swing verdict %s, scalp rsi %s, scalp score %d", it, sw[s].Verdict, fa.Value, sc[s].OverallScore)
		}
		// Screener rows: every fifth asset has none, so its price is null, last.
		n, _ := strconv.Atoi(s[1:3])
		if n%5 == 4 {
			if it["price"] != nil || it["volume"] != nil || i < len(items)-len(symbols)/5 {
				t.Errorf("item %d %v: an asset without a screener row has price %v volume %v", i, s, it["price"], it["volume"])
			}
		} else if it["price"] != 100+float64(n) || it["volume"] != float64(n)*1e6 {
			t.Errorf("item %v: price/volume are not the screener row's", it)
		}
	}
}

// A new report reaches the answers once the worker announces it.
func TestScreenerQueryFollowsNewReports(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedScreen(t, f, 5)
	q := map[string]any{"market": "crypto", "where": `symbol == "NEW_USDT"`}
	if items := queryAll(t, f, q, 10); len(items) != 0 {
		t.Fatalf("items before the report: %v", items)
	}
	seedAnalytics(t, f, "NEW_USDT", 0.004) // invalidates the market's analytics
	deadline := time.Now().Add(10 * time.Second)
	for {
		items := queryAll(t, f, q, 10)
		if len(items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new report never reached the answers")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestScreenerQueryConditional(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedScreen(t, f, 5)
	q := map[string]any{"market": "crypto", "where": `overall_score > -100`}
	r := f.post(t, "/screener/query", q)
	tag := r.header.Get("ETag")
	if r.status != http.StatusOK || tag == "" || r.header.Get("Last-Modified") == "" {
		t.Fatalf("query: %d %v %s", r.status, r.header, r.body)
	}
	if r2 := f.post(t, "/screener/query", q, "If-None-Match", tag); r2.status != http.StatusNotModified || len(r2.body) != 0 {
		t.Fatalf("If-None-Match with the tag: %d %s", r2.status, r2.body)
	}
	q["where"] = `overall_score > 100`
	if r3 := f.post(t, "/screener/query", q, "If-None-Match", tag); r3.status != http.StatusOK || r3.header.Get("ETag") == tag {
		t.Fatalf("another query with the first tag: %d %v", r3.status, r3.header.Get("ETag"))
	}
}

type problemBody struct {
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

func TestScreenerQueryRefusals(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	if r := f.post(t, "/screener/query", map[string]any{"market": "crypto"}); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("before any scoring: %d %s, want 503", r.status, r.body)
	}
	seedScreen(t, f, 3)
	otherTag := ""
	{
		r := f.post(t, "/screener/query", map[string]any{"market": "crypto", "limit": 1})
		var p queryPage
		if json.Unmarshal(r.body, &p) != nil || p.NextCursor == nil {
			t.Fatalf("first page: %d %s", r.status, r.body)
		}
		otherTag = *p.NextCursor
	}
	tests := []struct {
		body     any
		location string
		detail   string // a part of the detail
	}{
		{map[string]any{"market": "crypto", "where": `overall_score >`}, "body.where", "syntax error at line 1, column 16 (offset 15)"},
		{map[string]any{"market": "crypto", "where": `overall_score > "x"`}, "body.where", "type error at line 1, column 15"},
		{map[string]any{"market": "crypto", "where": `rsi < 30`}, "body.where", "undeclared reference to 'rsi'"},
		{map[string]any{"market": "crypto", "where": `overall_score`}, "body.where", "must be a condition"},
		{map[string]any{"market": "crypto", "where": strings.Repeat("(", 50) + "true" + strings.Repeat(")", 50)}, "body.where", "too_deep"},
		{map[string]any{"market": "crypto", "where": "true || " + strings.Repeat("x", 3000)}, "body.where", "too_long"},
		{map[string]any{"market": "crypto", "where": `[` + strings.Repeat(`symbol,`, 200) + `symbol].all(s, s.matches(symbol + symbol))`}, "body.where", "cost"},
		{map[string]any{"market": "stocks", "where": `swing.verdict == "growth"`}, "body.where", "undeclared reference to 'swing'"},
		{map[string]any{"market": "crypto", "order_by": "nope desc"}, "body.order_by", "not a variable"},
		{map[string]any{"market": "crypto", "order_by": "overall_score sideways"}, "body.order_by", "asc or desc"},
		{map[string]any{"market": "crypto", "order_by": "a b c"}, "body.order_by", "direction"},
		{map[string]any{"market": "crypto", "limit": 501}, "body.limit", ""},
		{map[string]any{"market": "crypto", "limit": -1}, "body.limit", ""},
		{map[string]any{"market": "crypto", "cursor": "!!"}, "body.cursor", "not a cursor"},
		{map[string]any{"market": "crypto", "cursor": otherTag, "where": "true"}, "body.cursor", "not a cursor"},
		{map[string]any{"market": "crypto", "style": "weekly"}, "body.style", ""},
		{map[string]any{"market": "bonds"}, "body.market", ""},
		{map[string]any{"where": "true"}, "body", "market"},
	}
	for _, tt := range tests {
		r := f.post(t, "/screener/query", tt.body)
		var p problemBody
		if r.status != http.StatusBadRequest || json.Unmarshal(r.body, &p) != nil || len(p.Errors) == 0 {
			t.Errorf("%v: %d %s, want 400", tt.body, r.status, r.body)
			continue
		}
		if p.Errors[0].Location != tt.location || !strings.Contains(p.Detail+p.Errors[0].Message, tt.detail) {
			t.Errorf("%v: %s, want %s naming %q", tt.body, r.body, tt.location, tt.detail)
		}
	}
	if r := f.post(t, "/screener/query", "{not json"); r.status != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d %s", r.status, r.body)
	}
}

// A market outside the client's tier is a 403, as on every operation.
func TestScreenerQueryTierMarkets(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	ctx := context.Background()
	c := &domain.Client{OrgName: "Starter", Tier: domain.Starter, Markets: []domain.Market{domain.Stocks}}
	if err := f.db.CreateClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	key, _, err := f.db.IssueKey(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	starter := *f
	starter.key = key
	if r := starter.post(t, "/screener/query", map[string]any{"market": "crypto"}); r.status != http.StatusForbidden {
		t.Fatalf("crypto for a stocks-only client: %d %s", r.status, r.body)
	}
	// A bad expression is a 400 before the tier's 403 (DESIGN's order of checks).
	if r := starter.post(t, "/screener/query", map[string]any{"market": "crypto", "where": "1 +"}); r.status != http.StatusBadRequest {
		t.Fatalf("bad expression on a market outside the tier: %d %s", r.status, r.body)
	}
}

// FuzzScreenerQueryBody: no request body is a 500 or a slow answer.
func FuzzScreenerQueryBody(fz *testing.F) {
	f := newMarketFixture(fz)
	seedScreen(fz, f, 8)
	for _, s := range []string{
		`{"market":"crypto","where":"verdict == \"growth\""}`,
		`{"market":"crypto","where":"swing.overall_score > scalp.overall_score","order_by":"scalp.factors.rsi_14.value desc","limit":2}`,
		`{"market":"crypto","where":"factors.rsi_14.value / 0.0 > 1","style":"scalp"}`,
		`{"market":"crypto","where":"symbol.matches(\"(a+)+$\")","cursor":"eyJ0IjoiIn0"}`,
		`{"market":"stocks","where":"fundamental_score > 1"}`,
		`{"market":"crypto","order_by":"price","limit":0}`,
		`{"market":"crypto","where":"[1,2,3].exists(x, x == overall_score)"}`,
		`{"market":"forex","where":null}`, `{}`, `[]`, `null`, ``,
	} {
		fz.Add([]byte(s))
	}
	fz.Fuzz(func(t *testing.T, body []byte) {
		start := time.Now()
		r := f.post(t, "/screener/query", body)
		if r.status >= 500 && r.status != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s took %s", body, d)
		}
		if r.status == http.StatusOK {
			var p queryPage
			if err := json.Unmarshal(r.body, &p); err != nil || p.Items == nil {
				t.Fatalf("%s: 200 with %s", body, r.body)
			}
			for _, it := range p.Items {
				if v, ok := it["overall_score"].(float64); !ok || math.Abs(v) > 100 {
					t.Fatalf("%s: item %v", body, it)
				}
			}
		}
	})
}

// The snapshot's periodic check: an asset whose reports are gone leaves
// the answers, and a report written with an updated_at older than the
// incremental reads look at (a transaction that committed late) enters
// them.
func TestScreenerQueryChecksWhatItHolds(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedScreen(t, f, 4)
	symbols := func() []string {
		var out []string
		for _, it := range queryAll(t, f, map[string]any{"market": "crypto", "where": "true", "order_by": "symbol asc"}, 10) {
			out = append(out, it["symbol"].(string))
		}
		return out
	}
	if got := symbols(); !slices.Equal(got, []string{"A00_USDT", "A01_USDT", "A02_USDT", "A03_USDT"}) {
		t.Fatalf("before: %v", got)
	}
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, `DELETE FROM analytics_reports WHERE symbol = 'A01_USDT'`); err != nil {
		t.Fatal(err)
	}
	seedAnalytics(t, f, "LATE_USDT", 0.004)
	if _, err := f.db.Pool.Exec(ctx, `UPDATE analytics_reports SET updated_at = updated_at - interval '1 hour' WHERE symbol = 'LATE_USDT'`); err != nil {
		t.Fatal(err)
	}
	// An incremental rebuild (the invalidation) misses both.
	symbols()
	if !api.WaitScreenRebuilds(f.apiS) {
		t.Fatal("a rebuild never ended")
	}
	if got := symbols(); !slices.Contains(got, "A01_USDT") || slices.Contains(got, "LATE_USDT") {
		t.Fatalf("an incremental rebuild saw the deletion or the late report (%v): this test no longer shows the periodic check", got)
	}
	if !api.WaitScreenRebuilds(f.apiS) {
		t.Fatal("a rebuild never ended")
	}
	f.now = f.now.Add(api.ScreenFullReloadForTest + time.Minute) // no rebuild reads the clock now
	want := []string{"A00_USDT", "A02_USDT", "A03_USDT", "LATE_USDT"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := symbols()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the periodic check: %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
