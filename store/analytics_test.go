package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

func analyticsRecord(symbol string, score int, verdict analytics.Verdict, at time.Time) store.AnalyticsRecord {
	res := analytics.Result{TechnicalScore: score, OverallScore: score, Verdict: verdict}
	return store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Swing, Symbol: symbol, Exchange: "binance",
		Result: &res, OverallScore: score, Verdict: verdict, Price: 100, ChangePct: 1.5, Sparkline: []float64{99, 100},
		CandleTime: at.Truncate(4 * time.Hour), CandleClose: 100, UpdatedAt: at}
}

// A verdict change is written to the outbox in the transaction that
// stores it, once: saving the same run again adds no event and no
// snapshot; an unchanged score adds no snapshot the same day.
func TestSaveAnalyticsOutboxAndSnapshots(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

	n, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{analyticsRecord("BTC_USDT", 15, analytics.VerdictNeutral, t0)}, nil)
	if err != nil || n != 0 {
		t.Fatalf("first save: %d events, %v; want 0 (no previous verdict)", n, err)
	}
	prev := map[string]store.AnalyticsRecord{"BTC_USDT": analyticsRecord("BTC_USDT", 15, analytics.VerdictNeutral, t0)}
	t1 := t0.Add(4 * time.Hour)
	run := []store.AnalyticsRecord{analyticsRecord("BTC_USDT", 35, analytics.VerdictGrowth, t1)}
	for range 2 {
		if _, err := db.SaveAnalytics(ctx, run, prev); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := db.VerdictEvents(ctx, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].OldVerdict != analytics.VerdictNeutral || evs[0].NewVerdict != analytics.VerdictGrowth || evs[0].OverallScore != 35 {
		t.Fatalf("events = %+v, %v; want exactly one neutral → growth at 35", evs, err)
	}
	// Same score and verdict later that day: the report moves, no snapshot.
	prev = map[string]store.AnalyticsRecord{"BTC_USDT": run[0]}
	if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{analyticsRecord("BTC_USDT", 35, analytics.VerdictGrowth, t1.Add(time.Hour))}, prev); err != nil {
		t.Fatal(err)
	}
	hist, err := db.AnalyticsHistory(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, 10)
	if err != nil || len(hist) != 2 || hist[0].OverallScore != 35 || hist[1].OverallScore != 15 {
		t.Fatalf("history = %+v, %v; want two snapshots, newest (35) first", hist, err)
	}
	rep, err := db.AnalyticsReport(ctx, domain.Crypto, "BTC_USDT", analytics.Swing)
	if err != nil || !rep.UpdatedAt.Equal(t1.Add(time.Hour)) || rep.Result.OverallScore != 35 {
		t.Fatalf("report = %+v, %v", rep, err)
	}
	if _, err := db.AnalyticsReport(ctx, domain.Crypto, "ETH_USDT", analytics.Swing); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Fatalf("unknown symbol: err = %v, want ENOTFOUND", err)
	}
	top, err := db.TopSetups(ctx, []domain.Market{domain.Crypto}, analytics.VerdictDecline, analytics.Swing, 10)
	if err != nil || len(top) != 0 {
		t.Fatalf("top decline setups = %+v, %v; want none", top, err)
	}
}

// Two runs that read the same report (a trigger and a tick, two workers)
// store one result and one verdict event: a record is stored only over
// the report its run read.
func TestSaveAnalyticsRacingRuns(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{analyticsRecord("BTC_USDT", 15, analytics.VerdictNeutral, t0)}, nil); err != nil {
		t.Fatal(err)
	}
	list, err := db.AnalyticsList(ctx, domain.Crypto, analytics.Swing)
	if err != nil || len(list) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	prev := map[string]store.AnalyticsRecord{"BTC_USDT": list[0]}
	var events []int
	for i := range 2 { // the same change, scored by two runs a moment apart
		n, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{analyticsRecord("BTC_USDT", 35, analytics.VerdictGrowth, t0.Add(time.Duration(i+1)*time.Second))}, prev)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, n)
	}
	evs, err := db.VerdictEvents(ctx, 0, 10)
	if err != nil || len(evs) != 1 || !cmp.Equal(events, []int{1, 0}) {
		t.Fatalf("events = %+v (%v per run), %v; want one, from the first run", evs, events, err)
	}
	rep, err := db.AnalyticsReport(ctx, domain.Crypto, "BTC_USDT", analytics.Swing)
	if err != nil || !rep.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("report = %+v, %v; want the first run's", rep, err)
	}
	hist, _ := db.AnalyticsHistory(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, 10)
	if len(hist) != 2 {
		t.Fatalf("history = %+v, want the first save and the first run's snapshot only", hist)
	}
}

// Each snapshot, verdict event and stream event keeps the model version
// of the result that made it; rows without one (a binary of the previous
// release) are the first version's.
func TestModelVersionIsKeptWithEveryRecord(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	first := analyticsRecord("BTC_USDT", 5, analytics.VerdictNeutral, t0)
	if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{first}, nil); err != nil {
		t.Fatal(err)
	}
	next := analyticsRecord("BTC_USDT", 40, analytics.VerdictGrowth, t0.Add(4*time.Hour))
	next.Result.ModelVersion = "v9"
	if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{next}, map[string]store.AnalyticsRecord{"BTC_USDT": first}); err != nil {
		t.Fatal(err)
	}
	hist, err := db.AnalyticsHistory(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, 10)
	if err != nil || len(hist) != 2 || hist[0].ModelVersion != "v9" || hist[1].ModelVersion != analytics.CurrentVersion().Name {
		t.Fatalf("history = %+v, %v; want v9, then the current version (a result without one)", hist, err)
	}
	evs, err := db.VerdictEvents(ctx, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].ModelVersion != "v9" {
		t.Fatalf("events = %+v, %v; want one of v9", evs, err)
	}
	stream, err := db.StreamEvents(ctx, domain.StreamPos{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var streamed []string
	for _, e := range stream {
		if e.Verdict != nil {
			streamed = append(streamed, e.Verdict.ModelVersion)
		}
	}
	if diff := cmp.Diff([]string{"v9"}, streamed); diff != "" {
		t.Fatalf("stream events' model versions (-want +got):\n%s", diff)
	}
	rep, err := db.AnalyticsReport(ctx, domain.Crypto, "BTC_USDT", analytics.Swing)
	if err != nil || rep.Result.ModelVersion != "v9" {
		t.Fatalf("report = %+v, %v; want v9", rep.Result, err)
	}

	// What a binary without versions writes: results, snapshots and events without one.
	if _, err := db.Pool.Exec(ctx, `UPDATE analytics_reports SET result = (result::jsonb - 'model_version')::json`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO analytics_snapshots (market, style, symbol, at, overall_score, technical_score, verdict, price)
		VALUES ('crypto', 'swing', 'BTC_USDT', $1, 1, 1, 'neutral', 100)`, t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rep, err = db.AnalyticsReport(ctx, domain.Crypto, "BTC_USDT", analytics.Swing)
	if err != nil || rep.Result.ModelVersion != analytics.Versions[0].Name {
		t.Fatalf("unversioned report: %q, %v; want the first version", rep.Result.ModelVersion, err)
	}
	hist, err = db.AnalyticsHistory(ctx, domain.Crypto, "BTC_USDT", analytics.Swing, 1)
	if err != nil || len(hist) != 1 || hist[0].ModelVersion != analytics.Versions[0].Name {
		t.Fatalf("unversioned snapshot: %+v, %v; want the first version", hist, err)
	}
}
