package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// The cut-off is a UTC midnight, days before today's.
func TestArchiveCutoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 15, 0, 0, time.FixedZone("X", 3*3600))
	if got, want := worker.ArchiveCutoff(now, 30), time.Date(2026, 10, 23, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("cut-off = %s, want %s", got, want)
	}
}

// The analytics retention task keeps every report of the retention window
// and, before it, the last report of each UTC day of each asset; it works
// in bounded batches, goes on where a bounded run stopped, and a run with
// nothing left to decide changes nothing.
func TestAnalyticsRetentionThinsOlderDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var prev map[string]store.AnalyticsRecord
	var ats []time.Time
	// Six reports a day (every 4 hours) over the 5 days before now.
	for at := now.AddDate(0, 0, -5); at.Before(now); at = at.Add(4 * time.Hour) {
		res := analytics.Result{OverallScore: len(ats), TechnicalScore: len(ats), Verdict: analytics.VerdictNeutral}
		rec := store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Swing, Symbol: "BTC_USDT", Exchange: "binance",
			Result: &res, OverallScore: len(ats), Verdict: analytics.VerdictNeutral, Price: 1, Sparkline: []float64{1},
			CandleTime: at, CandleClose: 1, UpdatedAt: at, CandlesUsed: 500, Instrument: "spot"}
		if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{rec}, prev); err != nil {
			t.Fatal(err)
		}
		prev, ats = map[string]store.AnalyticsRecord{"BTC_USDT": rec}, append(ats, at)
	}
	job := &worker.AnalyticsRetentionJob{Store: db, Days: 2, Now: func() time.Time { return now }, Batch: 2, MaxBatches: 3}
	cut := worker.ArchiveCutoff(now, 2) // 2026-11-20T00:00Z
	var total store.ThinResult
	for runs := 0; ; runs++ {
		r, err := job.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Deleted+r.Kept > 6 {
			t.Fatalf("one run decided on %d reports, more than 3 batches of 2", r.Deleted+r.Kept)
		}
		total.Deleted, total.Kept = total.Deleted+r.Deleted, total.Kept+r.Kept
		if !r.More {
			break
		}
		if runs > 20 {
			t.Fatal("the retention never finishes")
		}
	}
	before := 0
	for _, at := range ats {
		if at.Before(cut) {
			before++
		}
	}
	days := int64(3) // 11-17 (from 10:00), 11-18, 11-19
	if total.Kept != days || total.Deleted != int64(before)-days {
		t.Fatalf("thinned %+v; want %d kept (one a day) and %d deleted", total, days, int64(before)-days)
	}
	for _, at := range ats {
		y, m, d := at.Date()
		lastOfDay := !at.Add(4 * time.Hour).Before(time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC))
		got, err := db.AnalyticsReportAsOf(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, at)
		if domain.ErrorCode(err) == domain.ENOTFOUND && at.Before(ats[0].Add(24*time.Hour)) && !lastOfDay {
			continue // the first day's earlier reports: nothing kept before them
		}
		if err != nil {
			t.Fatal(err)
		}
		if kept := got.UpdatedAt.Equal(at); kept != (!at.Before(cut) || lastOfDay) {
			t.Errorf("report of %s: as of it the archive answers %s", at, got.UpdatedAt)
		}
	}
	if r, err := job.Run(ctx); err != nil || r.Deleted+r.Kept != 0 {
		t.Fatalf("a run with nothing left: %+v, %v", r, err)
	}
}
