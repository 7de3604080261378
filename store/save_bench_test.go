package store_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// BenchmarkSaveRescoring replaces the reports of a 400-asset universe in
// one style as a rescoring run does (every asset has a report; 16 records
// a transaction, the worker's saveEvery), and reports the time a record:
//
//	go test ./store -run '^$' -bench SaveRescoring -benchtime 5x
func BenchmarkSaveRescoring(b *testing.B) {
	db := storetest.New(b)
	ctx := context.Background()
	if q := os.Getenv("BENCH_SAVE_SQL"); q != "" {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	const assets, batch = 400, 16
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	results := make([]analytics.Result, assets)
	for a := range results {
		cs := make([]domain.Candle, 500)
		for k := range cs {
			p := 100 + 10*math.Sin(float64(k+a)/7) + float64(a)
			cs[k] = domain.Candle{Time: at.Add(time.Duration(k-499) * time.Hour), Open: p, High: p * 1.01, Low: p * 0.99, Close: p * 1.001, Volume: 1000 + float64(k%13)}
		}
		res, err := analytics.Score(analytics.Input{Market: domain.Crypto, Symbol: fmt.Sprintf("A%d_USDT", a), Candles: cs})
		if err != nil {
			b.Fatal(err)
		}
		results[a] = res
	}
	prev := map[string]store.AnalyticsRecord{}
	run := func(i int) {
		t := at.Add(time.Duration(i) * time.Minute)
		var recs []store.AnalyticsRecord
		flush := func() {
			if _, err := db.SaveAnalytics(ctx, recs, prev); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
		next := make(map[string]store.AnalyticsRecord, assets)
		for a := range results {
			res := &results[a]
			sym := fmt.Sprintf("A%d_USDT", a)
			rec := store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Scalp, Symbol: sym, Exchange: "binance", Result: res,
				OverallScore: res.OverallScore + i%2, Verdict: res.Verdict, Price: 100, ChangePct: 1, Sparkline: make([]float64, 30),
				CandleTime: t, CandleClose: 100, UpdatedAt: t, CandlesUsed: 500, Instrument: "spot"}
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
	b.ResetTimer()
	for i := range b.N {
		run(i + 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*assets), "µs/record")
	var inline, total float64
	if err := db.Pool.QueryRow(ctx, `SELECT avg(pg_column_size(result)), avg(octet_length(result::text)) FROM analytics_report_archive`).Scan(&inline, &total); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(inline, "result-stored-B")
	var toast float64
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(pg_relation_size(reltoastrelid), 0) FROM pg_class WHERE oid = 'analytics_report_archive'::regclass`).Scan(&toast); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(toast, "archive-toast-B")
	b.ReportMetric(total, "result-text-B")
}
