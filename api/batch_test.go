package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/marketscreener/market/api"
)

func TestSymbolsNarrowTheScreenerAndTheList(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)

	r := f.do(t, "/screener/crypto/binance/spot?symbols=sol/usdt,NOPE_USDT,btc_usdt,BTC%2FUSDT,ZZZ_USDT")
	var rows []api.ScreenerRecord
	if r.status != 200 || json.Unmarshal(r.body, &rows) != nil || len(rows) != 2 || rows[0].Symbol != "BTC_USDT" || rows[1].Symbol != "SOL_USDT" {
		t.Fatalf("screener with symbols: %d %s, want BTC_USDT and SOL_USDT in symbol order", r.status, r.body)
	}
	if got := r.header.Get("X-Unknown-Symbols"); got != "NOPE_USDT,ZZZ_USDT" {
		t.Errorf("X-Unknown-Symbols %q, want NOPE_USDT,ZZZ_USDT", got)
	}
	// Filters still apply; a known symbol filtered out is not unknown.
	r = f.do(t, "/screener/crypto/binance/spot?symbols=SOL_USDT,BTC_USDT&volume_min=5e8")
	if r.status != 200 || json.Unmarshal(r.body, &rows) != nil || len(rows) != 1 || rows[0].Symbol != "BTC_USDT" || r.header.Get("X-Unknown-Symbols") != "" {
		t.Fatalf("symbols and volume_min: %d %s unknown %q", r.status, r.body, r.header.Get("X-Unknown-Symbols"))
	}

	r = f.do(t, "/analytics/crypto/list?symbols=eth_usdt,NOPE_USDT")
	var items []api.AnalyticsListItem
	if r.status != 200 || json.Unmarshal(r.body, &items) != nil || len(items) != 1 || items[0].Symbol != "ETH_USDT" {
		t.Fatalf("list with symbols: %d %s", r.status, r.body)
	}
	if got := r.header.Get("X-Unknown-Symbols"); got != "NOPE_USDT" {
		t.Errorf("list X-Unknown-Symbols %q, want NOPE_USDT", got)
	}
	// Same items as the unfiltered list.
	var all []api.AnalyticsListItem
	if r := f.do(t, "/analytics/crypto/list"); json.Unmarshal(r.body, &all) != nil || len(all) != 2 || r.header.Get("X-Unknown-Symbols") != "" {
		t.Fatalf("list: %s", r.body)
	}
	a, _ := json.Marshal(all[1])
	b, _ := json.Marshal(items[0])
	if string(a) != string(b) {
		t.Errorf("filtered item %s differs from the list's %s", b, a)
	}
	// Every symbol unknown: an empty array, not a 404.
	if r := f.do(t, "/analytics/crypto/list?symbols=NOPE_USDT"); r.status != 200 || string(r.body) != "[]" || r.header.Get("X-Unknown-Symbols") != "NOPE_USDT" {
		t.Fatalf("list of unknown symbols: %d %s", r.status, r.body)
	}
}

func TestBatchReports(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)

	r := f.do(t, "/analytics/reports?market=crypto&lang=en&symbols="+url.QueryEscape("eth/usdt,NOPE_USDT,BTC_USDT,eth_usdt"))
	var got struct {
		Market, Style, Lang string
		Reports             []json.RawMessage
		UnknownSymbols      []string `json:"unknown_symbols"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &got) != nil {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	if got.Market != "crypto" || got.Style != "swing" || got.Lang != "en" || len(got.Reports) != 2 ||
		len(got.UnknownSymbols) != 1 || got.UnknownSymbols[0] != "NOPE_USDT" {
		t.Fatalf("batch: market %q style %q lang %q, %d reports, unknown %v", got.Market, got.Style, got.Lang, len(got.Reports), got.UnknownSymbols)
	}
	// Each report is byte for byte the single-asset report, in the order asked.
	for i, sym := range []string{"ETH_USDT", "BTC_USDT"} {
		one := f.do(t, "/analytics/crypto/"+sym+"?lang=en")
		if one.status != 200 || string(one.body) != string(got.Reports[i]) {
			t.Errorf("batch report %d differs from GET /analytics/crypto/%s:\n%s\n%s", i, sym, got.Reports[i], one.body)
		}
	}
	var typed api.BatchReports
	if err := json.Unmarshal(r.body, &typed); err != nil || typed.Reports[0].Symbol != "ETH_USDT" {
		t.Fatalf("batch as api.BatchReports: %v %+v", err, typed)
	}

	// Nothing found: 200 with every symbol unknown.
	r = f.do(t, "/analytics/reports?market=crypto&symbols=NOPE_USDT")
	if r.status != 200 || !strings.Contains(string(r.body), `"reports":[],"unknown_symbols":["NOPE_USDT"]`) {
		t.Fatalf("batch of unknown symbols: %d %s", r.status, r.body)
	}
	// The default language and style, as for one report.
	r = f.do(t, "/analytics/reports?market=crypto&symbols=BTC_USDT")
	one := f.do(t, "/analytics/crypto/BTC_USDT")
	if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.Lang != "ru" || string(got.Reports[0]) != string(one.body) {
		t.Fatalf("batch defaults: %d lang %q", r.status, got.Lang)
	}
}

// Bad symbols= and batch parameters are 400 naming the parameter.
func TestBatchParametersAre400(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	seedMarketData(t, f)
	many := make([]string, 51)
	for i := range many {
		many[i] = fmt.Sprintf("S%d_USDT", i)
	}
	cases := map[string]string{
		"/analytics/crypto/list?symbols=":                                         "query.symbols",
		"/analytics/crypto/list?symbols=BTC_USDT,,ETH_USDT":                       "query.symbols",
		"/analytics/crypto/list?symbols=BTC-USDT":                                 "query.symbols",
		"/analytics/crypto/list?symbols=" + strings.Join(many, ","):               "query.symbols",
		"/screener/crypto/binance/spot?symbols=%20":                               "query.symbols",
		"/screener/crypto/binance/spot?symbols=BTC_USDT,":                         "query.symbols",
		"/analytics/reports?market=crypto":                                        "query.symbols",
		"/analytics/reports?market=crypto&symbols=":                               "query.symbols",
		"/analytics/reports?market=crypto&symbols=" + strings.Join(many, ","):     "query.symbols",
		"/analytics/reports?market=stocks&symbols=AAPL,BRK%20B":                   "query.symbols",
		"/analytics/reports?symbols=BTC_USDT":                                     "query.market",
		"/analytics/reports?market=bonds&symbols=BTC_USDT":                        "query.market",
		"/analytics/reports?market=crypto&symbols=BTC_USDT&lang=de":               "query.lang",
		"/analytics/reports?market=crypto&symbols=BTC_USDT&style=weekly":          "query.style",
		"/analytics/crypto/list?symbols=" + strings.Join(many[:50], ",") + ",X_Y": "query.symbols",
	}
	for path, loc := range cases {
		r := f.do(t, path)
		var p struct {
			Detail string
			Errors []struct{ Location string }
		}
		if r.status != http.StatusBadRequest || json.Unmarshal(r.body, &p) != nil || len(p.Errors) == 0 || p.Errors[0].Location != loc {
			t.Errorf("%s: %d %s, want 400 naming %s", path, r.status, r.body, loc)
		}
	}
	// Exactly 50 is fine.
	if r := f.do(t, "/analytics/reports?market=crypto&symbols="+strings.Join(many[:50], ",")); r.status != 200 {
		t.Errorf("50 symbols: %d %s", r.status, r.body)
	}
}
