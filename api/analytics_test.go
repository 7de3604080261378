package api_test

import (
	"context"
	"encoding/json"
	"math"
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

// walk is a deterministic 4h price series with a drift, for scoring.
func walk(n int, drift float64, end time.Time) []domain.Candle {
	cs := make([]domain.Candle, n)
	price := 100.0
	for i := range cs {
		open := price
		price *= 1 + drift + 0.01*math.Sin(float64(i)/3)
		cs[i] = domain.Candle{Time: end.Add(-time.Duration(n-1-i) * 4 * time.Hour), Open: open,
			High: math.Max(open, price) * 1.002, Low: math.Min(open, price) * 0.998, Close: price, Volume: 1000 + float64(i%7)*10}
	}
	return cs
}

func seedAnalytics(t testing.TB, f *marketFixture, symbol string, drift float64) store.AnalyticsRecord {
	t.Helper()
	cs := walk(300, drift, f.now.Truncate(4*time.Hour))
	res, err := analytics.Score(analytics.Input{Market: domain.Crypto, Symbol: symbol, Candles: cs})
	if err != nil {
		t.Fatal(err)
	}
	last := cs[len(cs)-1]
	rec := store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Swing, Symbol: symbol, Exchange: "binance",
		Result: &res, OverallScore: res.OverallScore, Verdict: res.Verdict, Price: last.Close, ChangePct: 2,
		Sparkline: []float64{1, 2, 3}, CandleTime: last.Time, CandleClose: last.Close, UpdatedAt: f.now}
	if _, err := f.db.SaveAnalytics(context.Background(), []store.AnalyticsRecord{rec}, nil); err != nil {
		t.Fatal(err)
	}
	f.cache.Invalidate(readcache.Analytics(domain.Crypto))
	return rec
}

func TestAnalyticsEndpoints(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	if status, body := f.get(t, "/analytics/crypto/list"); status != http.StatusServiceUnavailable {
		t.Fatalf("list before any scoring: %d %s, want 503", status, body)
	}
	if status, body := f.get(t, "/analytics/crypto/BTC_USDT"); status != http.StatusNotFound {
		t.Fatalf("report before any scoring: %d %s, want 404", status, body)
	}
	up := seedAnalytics(t, f, "BTC_USDT", 0.004)
	down := seedAnalytics(t, f, "ETH_USDT", -0.004)
	if up.OverallScore <= down.OverallScore {
		t.Fatalf("fixture: rising series scored %d, falling %d", up.OverallScore, down.OverallScore)
	}

	status, body := f.get(t, "/analytics/crypto/list")
	var list []api.AnalyticsListItem
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 2 || list[0].Symbol != "BTC_USDT" ||
		list[0].OverallScore != up.OverallScore || list[1].Verdict != down.Verdict || len(list[0].Sparkline) != 3 {
		t.Fatalf("list: %d %s", status, body)
	}

	reports := map[string]api.AnalyticsReport{}
	for _, q := range []string{"/analytics/crypto/BTC_USDT?lang=en", "/analytics/crypto/btc%2Fusdt?lang=en", "/analytics/crypto/BTC_USDT?lang=ja&style=swing", "/analytics/crypto/BTC_USDT"} {
		status, body := f.get(t, q)
		var rep api.AnalyticsReport
		if status != http.StatusOK || json.Unmarshal(body, &rep) != nil {
			t.Fatalf("%s: %d %s", q, status, body)
		}
		reports[q] = rep
	}
	en, ja, ru := reports["/analytics/crypto/BTC_USDT?lang=en"], reports["/analytics/crypto/BTC_USDT?lang=ja&style=swing"], reports["/analytics/crypto/BTC_USDT"]
	if en.Symbol != "BTC_USDT" || en.Style != "swing" || en.OverallScore != up.OverallScore || en.Verdict != up.Verdict ||
		len(en.Factors) < 20 || en.Summary == "" || en.Scenario.LastClose != up.Price || en.VerdictStats == nil || en.FactorStats == nil {
		t.Fatalf("english report: %+v", en)
	}
	if en.ModelVersion != analytics.CurrentVersion().Name {
		t.Errorf("report model_version %q, want %q", en.ModelVersion, analytics.CurrentVersion().Name)
	}
	if reports["/analytics/crypto/btc%2Fusdt?lang=en"].Summary != en.Summary {
		t.Error("btc%2Fusdt and BTC_USDT give different reports")
	}
	if ja.Summary == en.Summary || ja.Factors[0].Explanation == en.Factors[0].Explanation || ru.Summary == en.Summary || ru.Summary == ja.Summary {
		t.Errorf("lang does not change the texts: en %q, ja %q, ru (default) %q", en.Summary, ja.Summary, ru.Summary)
	}
	var weights float64
	for _, fa := range en.Factors {
		weights += fa.Weight
	}
	if math.Abs(weights-1) > 0.01 {
		t.Errorf("factor weights sum to %v, want 1", weights)
	}

	status, body = f.get(t, "/analytics/top-setups?limit=1")
	var top []api.TopSetup
	if status != http.StatusOK || json.Unmarshal(body, &top) != nil || len(top) != 1 {
		t.Fatalf("top-setups: %d %s", status, body)
	}
	strongest := up
	if abs(down.OverallScore) > abs(up.OverallScore) {
		strongest = down
	}
	if top[0].Symbol != strongest.Symbol || top[0].Market != "crypto" {
		t.Errorf("top setup = %+v, want %s (|score| %d)", top[0], strongest.Symbol, abs(strongest.OverallScore))
	}

	status, body = f.get(t, "/analytics/crypto/BTC_USDT/history")
	var hist []api.HistorySnapshot
	if status != http.StatusOK || json.Unmarshal(body, &hist) != nil || len(hist) != 1 || hist[0].OverallScore != up.OverallScore ||
		hist[0].ModelVersion != analytics.CurrentVersion().Name {
		t.Fatalf("history: %d %s", status, body)
	}

	for q, want := range map[string]string{
		"/analytics/bonds/list":                      "market",
		"/analytics/crypto/BTC_USDT?lang=fr":         "lang",
		"/analytics/crypto/BTC_USDT?style=weekly":    "style",
		"/analytics/crypto/not-a-symbol":             "symbol",
		"/analytics/top-setups?verdict=neutral":      "verdict",
		"/analytics/top-setups?limit=101":            "limit",
		"/analytics/top-setups?market=bonds":         "market",
		"/analytics/crypto/BTC_USDT/history?limit=0": "limit",
	} {
		status, body := f.get(t, q)
		if status != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s, want 400 naming %s", q, status, body, want)
		}
	}
	status, body = f.get(t, "/analytics/crypto/SOL_USDT")
	if status != http.StatusNotFound || !strings.Contains(string(body), "BTC_USDT, ETH_USDT") {
		t.Errorf("unknown symbol: %d %s, want 404 naming the scored ones", status, body)
	}
	if status, _ := f.get(t, "/analytics/crypto/BTC_USDT?style=scalp"); status != http.StatusNotFound {
		t.Errorf("style not scored: %d, want 404", status)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestAnalyticsStatsEndpoints(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	ctx := context.Background()
	if status, body := f.get(t, "/analytics/crypto/stats"); status != http.StatusServiceUnavailable {
		t.Fatalf("stats before the job ran: %d %s, want 503", status, body)
	}
	var va stats.VerdictAccumulator
	var fa stats.FactorAccumulator
	// 40 days; growth at 1 day wins on days 2, 3, 4 of every 5 (60 %)
	// where the other bars of the day lose: a base rate of 40 %.
	for day := range 40 {
		ret := float64(day%5) - 1.5
		_ = va.Add(day, stats.VerdictGrowth, 1, ret, 1)
		_ = va.AddBase(day, 1, -ret, 1)
		_ = va.Add(day, stats.VerdictDecline, 5, -ret, 1)
		_ = fa.AddMove(day, 1, ret)
		_ = fa.AddMove(day, 5, ret)
		_ = fa.Add(day, "rsi_14", 1, 1, 0.03, ret)
		_ = fa.Add(day, "rsi_14", 5, -1, -0.03, ret)
	}
	if err := f.db.SaveStats(ctx, domain.Crypto, stats.SourceBacktest, va.Results(stats.SourceBacktest), fa.Results(stats.SourceBacktest), 1, f.now); err != nil {
		t.Fatal(err)
	}
	f.cache.Invalidate(readcache.Analytics(domain.Crypto))

	status, body := f.get(t, "/analytics/crypto/stats")
	var vs []api.VerdictStat
	if status != http.StatusOK || json.Unmarshal(body, &vs) != nil || len(vs) != 12 {
		t.Fatalf("stats: %d %s", status, body)
	}
	if g := vs[0]; g.Verdict != "growth" || g.HorizonDays != 1 || g.SampleSize != 40 || g.EffectiveSampleSize < 1 ||
		g.EffectiveSampleSize > 40 || g.WinRate == nil || g.BaseRate == nil || g.PValue == nil || g.Source != "backtest" {
		t.Errorf("first record %+v, want growth/1 day with 40 samples, an effective size, a base rate and a p-value", g)
	}
	if !strings.Contains(string(body), `"effective_sample_size":`) || !strings.Contains(string(body), `"p_value":`) {
		t.Errorf("stats body lacks the effective sample size or p-value: %.300s", body)
	}
	status, body = f.get(t, "/analytics/crypto/factor-stats?horizon_days=5")
	var fs []api.FactorStat
	if status != http.StatusOK || json.Unmarshal(body, &fs) != nil || len(fs) != 1 || fs[0].HorizonDays != 5 || fs[0].SampleSize != 40 {
		t.Fatalf("factor-stats?horizon_days=5: %d %s", status, body)
	}
	if f := fs[0]; f.BaseRate == nil || f.PValue == nil || f.PValueAdjusted == nil || *f.PValueAdjusted < *f.PValue || f.EffectiveSampleSize < 1 {
		t.Errorf("factor record %+v, want a base rate, raw and adjusted p-values and an effective size", f)
	}
	if status, body := f.get(t, "/analytics/crypto/factor-stats?horizon_days=2"); status != http.StatusBadRequest || !strings.Contains(string(body), "horizon_days") {
		t.Errorf("horizon_days=2: %d %s, want 400", status, body)
	}

	rec := seedAnalytics(t, f, "BTC_USDT", 0.004)
	status, body = f.get(t, "/analytics/crypto/BTC_USDT?lang=en")
	var rep api.AnalyticsReport
	if status != http.StatusOK || json.Unmarshal(body, &rep) != nil || len(rep.VerdictStats) != 4 {
		t.Fatalf("report: %d %s; want the 4 horizons of its verdict", status, body)
	}
	for _, v := range rep.VerdictStats {
		if v.Verdict != rec.Verdict {
			t.Errorf("report verdict_stats carry %s, the report says %s", v.Verdict, rec.Verdict)
		}
	}
	if len(rep.FactorStats) != 3 || rep.FactorStats[0].Factor != "rsi_14" {
		t.Errorf("report factor_stats = %+v, want rsi_14's three horizons", rep.FactorStats)
	}
}
