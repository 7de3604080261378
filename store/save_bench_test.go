package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// BenchmarkSaveRescoring replaces the reports of a 400-asset universe in
// one style as a rescoring run does (every asset has a report; 64 records
// a transaction, or BENCH_SAVE_BATCH: the worker's saveEvery is 128), one
// transaction at a time, and reports the time a record: batch is
// SaveAnalytics (one statement a transaction), per-record the statement
// per record it replaced, in the same run:
//
//	go test ./store -run '^$' -bench SaveRescoring -benchtime 5x
//	BENCH_SAVE_ASSETS=11000 go test ./store -run '^$' -bench SaveRescoring/batch -benchtime 1x   # a stock close
//
// BENCH_SAVE_SQL runs on the fresh schema first, to measure another
// storage of the tables (BENCHMARKS.md, "Saving a rescoring run").
func BenchmarkSaveRescoring(b *testing.B) {
	for _, v := range []struct {
		name string
		save func(*store.DB, context.Context, []store.AnalyticsRecord, map[string]store.AnalyticsRecord) (int, error)
	}{{"batch", (*store.DB).SaveAnalytics}, {"per-record", store.SaveAnalyticsPerRecord}} {
		b.Run(v.name, func(b *testing.B) { benchSaveRescoring(b, v.save) })
	}
}

func benchSaveRescoring(b *testing.B, save func(*store.DB, context.Context, []store.AnalyticsRecord, map[string]store.AnalyticsRecord) (int, error)) {
	db := storetest.New(b)
	ctx := context.Background()
	if q := os.Getenv("BENCH_SAVE_SQL"); q != "" {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	assets, batch := benchCount(b, "BENCH_SAVE_ASSETS", 400), benchCount(b, "BENCH_SAVE_BATCH", 64)
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	syms := make([]string, assets)
	results := make([]analytics.Result, assets)
	for a := range results {
		syms[a] = fmt.Sprintf("A%d_USDT", a)
		results[a] = sineResult(b, syms[a], at, a, float64(a))
	}
	prev := map[string]store.AnalyticsRecord{}
	run := func(i int) {
		t := at.Add(time.Duration(i) * time.Minute)
		var recs []store.AnalyticsRecord
		flush := func() {
			if _, err := save(db, ctx, recs, prev); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
		next := make(map[string]store.AnalyticsRecord, assets)
		for a, sym := range syms {
			rec := benchRecord(sym, analytics.Scalp, &results[a], t)
			rec.OverallScore += i % 2 // a new score: a snapshot too, as at a close
			recs = append(recs, rec)
			next[sym] = rec
			if len(recs) == batch {
				flush()
			}
		}
		if len(recs) > 0 {
			flush()
		}
		prev = next
	}
	run(0)
	cpu := storetest.StartCPU(b, db)
	b.ResetTimer()
	for i := range b.N {
		run(i + 1)
	}
	b.StopTimer()
	pg, client := cpu.Used()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*assets), "µs/record")
	b.ReportMetric(float64(pg.Microseconds())/float64(b.N*assets), "pg-cpu-µs/record")
	b.ReportMetric(float64(client.Microseconds())/float64(b.N*assets), "go-cpu-µs/record")
	var inline, text, toast float64
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(avg(pg_column_size(result)), 0), coalesce(avg(octet_length(result::text)), 0),
		(SELECT coalesce(pg_relation_size(reltoastrelid), 0) FROM pg_class WHERE oid = 'analytics_report_archive'::regclass)
		FROM analytics_report_archive`).Scan(&inline, &text, &toast); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(inline, "result-stored-B")
	b.ReportMetric(text, "result-text-B")
	b.ReportMetric(toast, "archive-toast-B")
}

// benchCount is the positive count in the environment variable name, or
// def when it is not set.
func benchCount(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}
