package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// getHistory follows one page: its snapshots and the next page's url
// (from the Link header; "" on the last page).
func getHistory(t *testing.T, f *marketFixture, url string) (int, []api.HistorySnapshot, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-API-Key", f.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page []api.HistorySnapshot
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
	}
	next := ""
	if link := resp.Header.Get("Link"); link != "" {
		m := regexp.MustCompile(`^<([^>]+)>; rel="next"$`).FindStringSubmatch(link)
		if m == nil {
			t.Fatalf("Link header %q is not a next link", link)
		}
		next = f.srv.URL + m[1]
	}
	return resp.StatusCode, page, next
}

// History pages: newest first, bounded by from and to, the next page in
// a Link header until the last; the pages together are the whole range,
// each snapshot once, with its technical and fundamental scores.
func TestHistoryRangeAndCursor(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var prev map[string]store.AnalyticsRecord
	fund := 7
	for i := range 10 { // one snapshot a day: the score changes every time
		at := t0.AddDate(0, 0, i)
		res := analytics.Result{OverallScore: i, TechnicalScore: i + 1, FundamentalScore: &fund, Verdict: analytics.VerdictNeutral}
		rec := store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Swing, Symbol: "BTC_USDT", Exchange: "binance",
			Result: &res, OverallScore: i, Verdict: analytics.VerdictNeutral, Price: 1, Sparkline: []float64{1},
			CandleTime: at, CandleClose: 1, UpdatedAt: at}
		if _, err := f.db.SaveAnalytics(ctx, []store.AnalyticsRecord{rec}, prev); err != nil {
			t.Fatal(err)
		}
		prev = map[string]store.AnalyticsRecord{"BTC_USDT": rec}
	}
	f.cache.Invalidate(readcache.Analytics(domain.Crypto))
	base := f.srv.URL + api.BasePath + "/analytics/crypto/BTC_USDT/history"

	for _, tc := range []struct {
		query string
		want  []int // overall scores, page by page flattened
		pages int
	}{
		{"?limit=3", []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 4},
		{"?limit=4&from=" + t0.AddDate(0, 0, 2).Format(time.RFC3339) + "&to=" + t0.AddDate(0, 0, 6).Format(time.RFC3339), []int{6, 5, 4, 3, 2}, 2},
		{"?limit=5&to=" + t0.AddDate(0, 0, 4).Format(time.RFC3339), []int{4, 3, 2, 1, 0}, 1},
		{"?from=" + t0.AddDate(0, 0, 20).Format(time.RFC3339), nil, 1},
		{"", []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 1},
	} {
		var got []int
		pages := 0
		for url := base + tc.query; url != ""; pages++ {
			var status int
			var page []api.HistorySnapshot
			status, page, url = getHistory(t, f, url)
			if status != http.StatusOK {
				t.Fatalf("%s, page %d: %d", tc.query, pages+1, status)
			}
			for _, s := range page {
				if s.TechnicalScore != s.OverallScore+1 || s.FundamentalScore == nil || *s.FundamentalScore != 7 {
					t.Fatalf("%s: snapshot %+v lacks its technical or fundamental score", tc.query, s)
				}
				got = append(got, s.OverallScore)
			}
			if pages > 20 {
				t.Fatalf("%s: the pages never end", tc.query)
			}
		}
		if fmtInts(got) != fmtInts(tc.want) || pages != tc.pages {
			t.Fatalf("%s: scores %v in %d pages; want %v in %d", tc.query, got, pages, tc.want, tc.pages)
		}
	}

	for _, q := range []string{"?from=yesterday", "?to=2026-11", "?cursor=%21%21", "?cursor=Zm9v",
		"?from=" + t0.AddDate(0, 0, 3).Format(time.RFC3339) + "&to=" + t0.Format(time.RFC3339)} {
		if status, _, _ := getHistory(t, f, base+q); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, status)
		}
	}
	if status, _, _ := getHistory(t, f, f.srv.URL+api.BasePath+"/analytics/crypto/ETH_USDT/history?from="+t0.Format(time.RFC3339)); status != http.StatusNotFound {
		t.Errorf("never scored, with a range: %d, want 404", status)
	}
}

func fmtInts(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}
