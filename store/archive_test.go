package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// saveReports stores one report of BTC_USDT per instant, each over the
// previous one, with the score i+1 for the i-th.
func saveReports(t *testing.T, db *store.DB, ats ...time.Time) {
	t.Helper()
	ctx := context.Background()
	var prev map[string]store.AnalyticsRecord
	for i, at := range ats {
		r := analyticsRecord("BTC_USDT", i+1, analytics.VerdictNeutral, at)
		r.CandlesUsed, r.Instrument = 500, "spot"
		if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{r}, prev); err != nil {
			t.Fatal(err)
		}
		prev = map[string]store.AnalyticsRecord{"BTC_USDT": r}
	}
}

// A report as of an instant is the one published last at or before it,
// with what it was scored from; before the first there is none, and
// ArchiveStart names the first.
func TestAnalyticsReportAsOf(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	saveReports(t, db, t0, t0.Add(time.Hour), t0.Add(5*time.Hour))

	for _, tc := range []struct {
		at        time.Time
		wantScore int
	}{
		{t0, 1}, {t0.Add(59 * time.Minute), 1}, {t0.Add(time.Hour), 2}, {t0.Add(4 * time.Hour), 2}, {t0.Add(48 * time.Hour), 3},
	} {
		got, err := db.AnalyticsReportAsOf(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, tc.at)
		if err != nil || got.OverallScore != tc.wantScore || got.Result.OverallScore != tc.wantScore {
			t.Fatalf("as of %s: %+v, %v; want score %d", tc.at, got, err, tc.wantScore)
		}
		if got.CandlesUsed != 500 || got.Instrument != "spot" || got.Exchange != "binance" || got.Result == nil {
			t.Fatalf("as of %s: %+v; want candles_used 500 of binance/spot with its result", tc.at, got)
		}
	}
	if _, err := db.AnalyticsReportAsOf(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, t0.Add(-time.Second)); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Fatalf("before the first report: err = %v, want ENOTFOUND", err)
	}
	start, ok, err := db.ArchiveStart(ctx, domain.Crypto, "BTC_USDT", analytics.Swing)
	if err != nil || !ok || !start.Equal(t0) {
		t.Fatalf("archive start = %s, %v, %v; want %s", start, ok, err, t0)
	}
	if _, ok, err := db.ArchiveStart(ctx, domain.Crypto, "ETH_USDT", analytics.Swing); err != nil || ok {
		t.Fatalf("archive start of an unscored asset: ok %v, %v; want none", ok, err)
	}
	latest, err := db.AnalyticsReport(ctx, domain.Crypto, "BTC_USDT", analytics.Swing)
	if err != nil || latest.CandlesUsed != 500 || latest.Instrument != "spot" {
		t.Fatalf("latest report = %+v, %v; want candles_used and instrument stored", latest, err)
	}
}

// A record dropped because another run stored first is not archived:
// the archive holds only reports that were served.
func TestArchiveOnlyStoredReports(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	saveReports(t, db, t0)
	stale := map[string]store.AnalyticsRecord{"BTC_USDT": analyticsRecord("BTC_USDT", 1, analytics.VerdictNeutral, t0.Add(-time.Hour))}
	if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{analyticsRecord("BTC_USDT", 9, analytics.VerdictNeutral, t0.Add(time.Hour))}, stale); err != nil {
		t.Fatal(err)
	}
	got, err := db.AnalyticsReportAsOf(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, t0.Add(2*time.Hour))
	if err != nil || got.OverallScore != 1 {
		t.Fatalf("as of after a dropped record: %+v, %v; want the stored report (score 1)", got, err)
	}
}

// A history range is the snapshots from From to To, both included, and
// before Before, newest first, at most Limit.
func TestAnalyticsHistoryRange(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var ats []time.Time
	for i := range 6 {
		ats = append(ats, t0.AddDate(0, 0, i)) // a new day: a snapshot each
	}
	saveReports(t, db, ats...)
	for _, tc := range []struct {
		q    store.HistoryRange
		want []int
	}{
		{store.HistoryRange{Limit: 10}, []int{6, 5, 4, 3, 2, 1}},
		{store.HistoryRange{Limit: 2}, []int{6, 5}},
		{store.HistoryRange{From: ats[1], To: ats[3], Limit: 10}, []int{4, 3, 2}},
		{store.HistoryRange{Before: ats[3], Limit: 2}, []int{3, 2}},
		{store.HistoryRange{From: ats[2], Before: ats[2], Limit: 10}, nil},
	} {
		tc.q.Market, tc.q.Symbol, tc.q.Style = domain.Crypto, "BTC_USDT", analytics.Swing
		got, err := db.AnalyticsHistoryRange(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var scores []int
		for _, s := range got {
			scores = append(scores, s.OverallScore)
		}
		if fmt.Sprint(scores) != fmt.Sprint(tc.want) {
			t.Errorf("%+v: scores %v, want %v", tc.q, scores, tc.want)
		}
	}
}

// Statistics as of an instant are each kind's and source's newest
// computation at or before it.
func TestStatsAsOf(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{t0, t0.Add(time.Hour)} {
		v := []stats.VerdictStat{{Verdict: "growth", HorizonDays: 1, SampleSize: i + 1, Source: stats.SourceBacktest}}
		if err := db.SaveStats(ctx, domain.Crypto, stats.SourceBacktest, v, nil, 10, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		at     time.Time
		sample int
	}{{t0.Add(-time.Second), 0}, {t0, 1}, {t0.Add(30 * time.Minute), 1}, {t0.Add(time.Hour), 2}} {
		got, err := db.StatsAsOf(ctx, domain.Crypto, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		sample := 0
		if len(got.Verdicts) > 0 {
			sample = got.Verdicts[0].SampleSize
		}
		if sample != tc.sample || len(got.Verdicts) > 1 {
			t.Fatalf("stats as of %s = %+v; want one record of sample %d (0: none)", tc.at, got, tc.sample)
		}
	}
	latest, err := db.Stats(ctx, domain.Crypto)
	if err != nil || len(latest.Verdicts) != 1 || latest.Verdicts[0].SampleSize != 2 || !latest.ComputedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("latest stats = %+v, %v", latest, err)
	}
}

// Thinning keeps the last report and statistics of each UTC day before
// the cut and deletes the others; what is at or after the cut, and what
// was kept, is left alone; batches of any size reach the same state, and
// a repeated run changes nothing.
func TestThinArchive(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ats := []time.Time{
		day.Add(1 * time.Hour), day.Add(9 * time.Hour), day.Add(23*time.Hour + 59*time.Minute), // day 1: keep the last
		day.Add(26 * time.Hour),                          // day 2: alone, kept
		day.Add(49 * time.Hour), day.Add(50 * time.Hour), // day 3: after the cut, untouched
	}
	cut := day.Add(48 * time.Hour)
	for _, limit := range []int{1, 2, 1000} {
		db := storetest.New(t)
		ctx := context.Background()
		saveReports(t, db, ats...)
		for i, at := range ats {
			v := []stats.VerdictStat{{Verdict: "growth", HorizonDays: 1, SampleSize: i + 1, Source: stats.SourceLive}}
			if err := db.SaveStats(ctx, domain.Crypto, stats.SourceLive, v, nil, 1, at); err != nil {
				t.Fatal(err)
			}
		}
		var total store.ThinResult
		for range 100 {
			r, err := db.ThinArchive(ctx, cut, limit)
			if err != nil {
				t.Fatal(err)
			}
			total.Deleted, total.Kept = total.Deleted+r.Deleted, total.Kept+r.Kept
			if !r.More {
				break
			}
		}
		// Reports: 2 deleted, 2 kept; statistics (verdict and factor rows): twice that.
		if total.Deleted != 2+4 || total.Kept != 2+4 {
			t.Fatalf("limit %d: thinned %+v; want 6 deleted, 6 kept", limit, total)
		}
		if r, err := db.ThinArchive(ctx, cut, limit); err != nil || r.Deleted != 0 || r.Kept != 0 {
			t.Fatalf("limit %d: a repeated run: %+v, %v; want nothing", limit, r, err)
		}
		for _, tc := range []struct {
			at        time.Time
			wantScore int
		}{
			{ats[0], 0}, {ats[1], 0}, {ats[2], 3}, {ats[3].Add(-time.Minute), 3}, {ats[3], 4}, {ats[4], 5}, {ats[5], 6},
		} {
			got, err := db.AnalyticsReportAsOf(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, tc.at)
			if tc.wantScore == 0 {
				if domain.ErrorCode(err) != domain.ENOTFOUND {
					t.Fatalf("limit %d: as of %s after thinning: %+v, %v; want none", limit, tc.at, got, err)
				}
				continue
			}
			if err != nil || got.OverallScore != tc.wantScore {
				t.Fatalf("limit %d: as of %s after thinning: %+v, %v; want score %d", limit, tc.at, got, err, tc.wantScore)
			}
		}
		st, err := db.StatsAsOf(ctx, domain.Crypto, ats[1])
		if err != nil || len(st.Verdicts) != 0 {
			t.Fatalf("limit %d: stats as of a thinned instant = %+v, %v; want none", limit, st, err)
		}
		st, err = db.StatsAsOf(ctx, domain.Crypto, ats[2])
		if err != nil || len(st.Verdicts) != 1 || st.Verdicts[0].SampleSize != 3 {
			t.Fatalf("limit %d: stats as of the day's last = %+v, %v; want sample 3", limit, st, err)
		}
	}
}
