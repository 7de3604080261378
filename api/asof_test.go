package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// publish stores a scored report of symbol over prev (nil: the first),
// scored at at on candles ending with a 4h candle that opened at candle.
func publish(t *testing.T, f *marketFixture, symbol string, drift float64, candle, at time.Time, prev *store.AnalyticsRecord) store.AnalyticsRecord {
	t.Helper()
	cs := walk(300, drift, candle)
	res, err := analytics.Score(analytics.Input{Market: domain.Crypto, Symbol: symbol, Candles: cs})
	if err != nil {
		t.Fatal(err)
	}
	last := cs[len(cs)-1]
	rec := store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Swing, Symbol: symbol, Exchange: "binance",
		Result: &res, OverallScore: res.OverallScore, Verdict: res.Verdict, Price: last.Close, ChangePct: 2,
		Sparkline: []float64{1, 2, 3}, CandleTime: last.Time, CandleClose: last.Close, UpdatedAt: at,
		CandlesUsed: len(cs), Instrument: "spot"}
	var p map[string]store.AnalyticsRecord
	if prev != nil {
		p = map[string]store.AnalyticsRecord{symbol: *prev}
	}
	if _, err := f.db.SaveAnalytics(context.Background(), []store.AnalyticsRecord{rec}, p); err != nil {
		t.Fatal(err)
	}
	f.cache.Invalidate(readcache.Analytics(domain.Crypto))
	return rec
}

func saveVerdictStats(t *testing.T, f *marketFixture, sample int, at time.Time) {
	t.Helper()
	v := []stats.VerdictStat{
		{Verdict: "growth", HorizonDays: 5, SampleSize: sample, Source: stats.SourceBacktest},
		{Verdict: "decline", HorizonDays: 5, SampleSize: sample, Source: stats.SourceBacktest},
		{Verdict: "neutral", HorizonDays: 5, SampleSize: sample, Source: stats.SourceBacktest},
	}
	if err := f.db.SaveStats(context.Background(), domain.Crypto, stats.SourceBacktest, v, nil, 3, at); err != nil {
		t.Fatal(err)
	}
	f.cache.Invalidate(readcache.Analytics(domain.Crypto))
}

func getReport(t *testing.T, f *marketFixture, path string) api.AnalyticsReport {
	t.Helper()
	status, body := f.get(t, path)
	var rep api.AnalyticsReport
	if status != http.StatusOK || json.Unmarshal(body, &rep) != nil {
		t.Fatalf("%s: %d %s", path, status, body)
	}
	return rep
}

// A report as of an instant is the one published last at or before it,
// with the statistics of then, never a later one; before the first the
// answer is a 404 naming the earliest instant, a future or malformed
// instant a 400.
func TestReportAsOf(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	t0 := f.now
	saveVerdictStats(t, f, 11, t0.Add(-time.Hour))
	first := publish(t, f, "BTC_USDT", 0.004, t0.Truncate(4*time.Hour), t0, nil)
	saveVerdictStats(t, f, 22, t0.Add(30*time.Minute))
	second := publish(t, f, "BTC_USDT", -0.004, t0.Truncate(4*time.Hour).Add(4*time.Hour), t0.Add(4*time.Hour), &first)
	saveVerdictStats(t, f, 33, t0.Add(5*time.Hour))
	f.now = t0.Add(6 * time.Hour)
	if first.OverallScore == second.OverallScore {
		t.Fatalf("fixture: both reports scored %d", first.OverallScore)
	}

	for _, tc := range []struct {
		asOf      time.Time
		want      store.AnalyticsRecord
		wantStats int
	}{
		{t0, first, 11}, {t0.Add(3 * time.Hour), first, 11}, {t0.Add(4 * time.Hour), second, 22}, {t0.Add(6 * time.Hour), second, 22},
	} {
		rep := getReport(t, f, "/analytics/crypto/BTC_USDT?lang=en&as_of="+tc.asOf.Format(time.RFC3339))
		if rep.OverallScore != tc.want.OverallScore || !rep.UpdatedAt.Equal(tc.want.UpdatedAt) || len(rep.Factors) == 0 ||
			rep.Verdict != tc.want.Verdict || rep.Scenario.LastClose != tc.want.CandleClose {
			t.Fatalf("as of %s: score %d published %s; want %d published %s", tc.asOf, rep.OverallScore, rep.UpdatedAt, tc.want.OverallScore, tc.want.UpdatedAt)
		}
		if len(rep.VerdictStats) != 1 || rep.VerdictStats[0].SampleSize != tc.wantStats {
			t.Fatalf("as of %s: verdict stats %+v; want the computation of sample %d (the last before publication)", tc.asOf, rep.VerdictStats, tc.wantStats)
		}
		if !rep.AsOf.Equal(tc.want.CandleTime.Add(4*time.Hour)) || rep.CandlesUsed != 300 {
			t.Fatalf("as of %s: data quality %+v", tc.asOf, rep.DataQuality)
		}
	}
	latest := getReport(t, f, "/analytics/crypto/BTC_USDT?lang=en")
	if latest.OverallScore != second.OverallScore || latest.VerdictStats[0].SampleSize != 33 {
		t.Fatalf("latest report: score %d, stats %+v; want %d with the newest statistics", latest.OverallScore, latest.VerdictStats, second.OverallScore)
	}

	status, body := f.get(t, "/analytics/crypto/BTC_USDT?as_of="+t0.Add(-time.Second).Format(time.RFC3339))
	if status != http.StatusNotFound || !strings.Contains(string(body), "as_of="+t0.Format(time.RFC3339)) {
		t.Fatalf("before the first report: %d %s; want 404 naming %s", status, body, t0.Format(time.RFC3339))
	}
	if status, body := f.get(t, "/analytics/crypto/ETH_USDT?as_of="+t0.Format(time.RFC3339)); status != http.StatusNotFound {
		t.Fatalf("never scored: %d %s; want 404", status, body)
	}
	for _, q := range []string{f.now.Add(time.Second).Format(time.RFC3339), "yesterday", "2026-11-22"} {
		if status, body := f.get(t, "/analytics/crypto/BTC_USDT?as_of="+q); status != http.StatusBadRequest || !strings.Contains(string(body), "as_of") {
			t.Fatalf("as_of=%s: %d %s; want 400 naming as_of", q, status, body)
		}
	}
}

// Reports and list items say which candle the score used, whether it had
// closed, how many candles it read and where from, and how old the data
// is at the answer: the age moves with the clock in a cached body while
// the entity tag, which covers the data, does not.
func TestDataQualityFields(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	closedCandle := f.now.Truncate(4 * time.Hour).Add(-4 * time.Hour) // closed at the 4h boundary before now
	publish(t, f, "BTC_USDT", 0.004, closedCandle, f.now, nil)
	openCandle := f.now.Truncate(4 * time.Hour) // still open at now
	publish(t, f, "ETH_USDT", -0.004, openCandle, f.now.Add(-30*time.Second), nil)
	f.now = f.now.Add(90 * time.Second)

	rep := getReport(t, f, "/analytics/crypto/BTC_USDT")
	closes := closedCandle.Add(4 * time.Hour)
	want := api.DataQuality{AsOf: closes, CandleClosed: true, DataAgeSeconds: int64(f.now.Sub(closes) / time.Second), CandlesUsed: 300,
		Source: api.DataSource{Feed: "crypto/binance/spot", Exchange: "binance", Timeframe: "4h"}, MarketHours: api.MarketHours{MarketOpen: true}}
	if rep.DataQuality != want {
		t.Fatalf("closed candle: %+v; want %+v", rep.DataQuality, want)
	}
	eth := getReport(t, f, "/analytics/crypto/ETH_USDT")
	if eth.CandleClosed || !eth.AsOf.Equal(openCandle.Add(4*time.Hour)) || eth.DataAgeSeconds != 120 {
		t.Fatalf("open candle: %+v; want not closed, as_of its close, 120 s old (since the scoring)", eth.DataQuality)
	}

	status, body := f.get(t, "/analytics/crypto/list")
	var list []api.AnalyticsListItem
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 2 {
		t.Fatalf("list: %d %s", status, body)
	}
	if list[0].DataQuality != want || list[1].DataAgeSeconds != 120 || list[1].CandleClosed {
		t.Fatalf("list items' data quality: %+v, %+v", list[0].DataQuality, list[1].DataQuality)
	}
	var top []api.TopSetup
	status, body = f.get(t, "/analytics/top-setups?market=crypto")
	if status != http.StatusOK || json.Unmarshal(body, &top) != nil || len(top) != 2 {
		t.Fatalf("top setups: %d %s", status, body)
	}
	for _, s := range top {
		if s.Symbol == "BTC_USDT" && s.DataQuality != want || s.Symbol == "ETH_USDT" && s.DataAgeSeconds != 120 {
			t.Fatalf("top setup %s: %+v", s.Symbol, s.DataQuality)
		}
	}
	status, body = f.get(t, "/analytics/crypto/list?symbols=ETH_USDT,FOO_USDT")
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 1 || list[0].DataAgeSeconds != 120 {
		t.Fatalf("filtered list: %d %s", status, body)
	}

	tag1, age1 := reportTagAndAge(t, f)
	f.now = f.now.Add(time.Minute)
	tag2, age2 := reportTagAndAge(t, f)
	if tag1 != tag2 || age2 != age1+60 {
		t.Fatalf("a minute later: tag %s → %s, age %d → %d; want the same tag and the age 60 s more", tag1, tag2, age1, age2)
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/v1/public/analytics/crypto/BTC_USDT", nil)
	req.Header.Set("X-API-Key", f.key)
	req.Header.Set("If-None-Match", tag1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match with the tag of a minute ago: %d, want 304", resp.StatusCode)
	}

	status, body = f.get(t, "/analytics/reports?market=crypto&symbols=BTC_USDT,ETH_USDT")
	var batch struct {
		Reports []api.AnalyticsReport `json:"reports"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &batch) != nil || len(batch.Reports) != 2 ||
		batch.Reports[0].DataAgeSeconds != age2 || batch.Reports[1].DataAgeSeconds != 180 {
		t.Fatalf("batch reports: %d %s", status, body)
	}
}

func reportTagAndAge(t *testing.T, f *marketFixture) (string, int64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/v1/public/analytics/crypto/BTC_USDT", nil)
	req.Header.Set("X-API-Key", f.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep api.AnalyticsReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("report: %d %v", resp.StatusCode, err)
	}
	return resp.Header.Get("ETag"), rep.DataAgeSeconds
}

// The data-quality fields are documented on the report and list item
// schemas, as_of on the report operation.
func TestDataQualityDocumented(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	resp, err := http.Get(f.srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
			} `json:"parameters"`
			Responses map[string]struct {
				Headers map[string]any `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"AnalyticsReport", "AnalyticsListItem", "TopSetup"} {
		for _, field := range []string{"as_of", "candle_closed", "data_age_seconds", "candles_used", "source"} {
			if _, ok := doc.Components.Schemas[schema].Properties[field]; !ok {
				t.Errorf("%s has no %s", schema, field)
			}
		}
	}
	params := func(path string) map[string]bool {
		out := map[string]bool{}
		for _, p := range doc.Paths[path]["get"].Parameters {
			out[p.Name] = true
		}
		return out
	}
	if !params("/analytics/{market}/{symbol}")["as_of"] {
		t.Error("the report operation does not document as_of")
	}
	hist := "/analytics/{market}/{symbol}/history"
	if p := params(hist); !p["from"] || !p["to"] || !p["cursor"] {
		t.Errorf("the history operation's parameters %v lack from, to or cursor", p)
	}
	for _, h := range []string{"Link", "ETag", "Last-Modified", "Cache-Control"} {
		if _, ok := doc.Paths[hist]["get"].Responses["200"].Headers[h]; !ok {
			t.Errorf("the history's 200 does not document the %s header", h)
		}
	}
}

// A delisted asset leaves the analytics list, and its report stays
// readable as of any instant inside its life.
func TestDelistedReportAsOf(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	t0 := f.now
	rec := publish(t, f, "GONE_USDT", 0.004, t0.Truncate(4*time.Hour), t0, nil)
	publish(t, f, "BTC_USDT", 0.004, t0.Truncate(4*time.Hour), t0, nil)
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	ctx := context.Background()
	if _, _, err := f.db.SyncListings(ctx, spot, []string{"BTC_USDT", "GONE_USDT"}, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.db.SyncListings(ctx, spot, []string{"BTC_USDT"}, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.cache.Invalidate(readcache.Analytics(domain.Crypto))
	f.now = t0.Add(3 * time.Hour)
	status, body := f.get(t, "/analytics/crypto/list")
	if status != http.StatusOK || !strings.Contains(string(body), "BTC_USDT") || strings.Contains(string(body), "GONE_USDT") {
		t.Fatalf("list after the delisting: %d %s; want BTC_USDT without GONE_USDT", status, body)
	}
	rep := getReport(t, f, "/analytics/crypto/GONE_USDT?lang=en&as_of="+t0.Add(time.Hour).Format(time.RFC3339))
	if rep.OverallScore != rec.OverallScore || !rep.UpdatedAt.Equal(rec.UpdatedAt) {
		t.Fatalf("delisted asset as of its life: score %d published %s; want %d published %s", rep.OverallScore, rep.UpdatedAt, rec.OverallScore, rec.UpdatedAt)
	}
}
