package store_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// reportsPerDay is the most reports a crypto asset publishes a day per
// style: every new candle, and the still-open candle once per rescoring
// slot (rescoreSlots: scalp 7 slots of a 15m candle, intraday 15 of 1h,
// swing 15 of 4h, position 13 of 1d).
var reportsPerDay = map[analytics.Style]int{analytics.Scalp: 96 * 7, analytics.Intraday: 24 * 15, analytics.Swing: 6 * 15, analytics.Position: 13}

// BenchmarkArchiveStorage fills the archive with a day of an asset's
// reports at that rate, in every style, with real results (500 candles
// scored), and reports the rows and bytes of an asset-day (table, TOAST
// and indexes), before and after thinning to the last report a day:
//
//	go test ./store -run '^$' -bench ArchiveStorage -benchtime 1x
func BenchmarkArchiveStorage(b *testing.B) {
	db := storetest.New(b)
	ctx := context.Background()
	const assets = 3
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	rows := 0
	for range b.N {
		for a := range assets {
			sym := fmt.Sprintf("A%d_USDT", a)
			for st, n := range reportsPerDay {
				var prev map[string]store.AnalyticsRecord
				step := 24 * time.Hour / time.Duration(n)
				for i := range n {
					at := day.Add(time.Duration(i) * step)
					res := sineResult(b, sym, at, i, float64(a))
					rec := benchRecord(sym, st, &res, at)
					if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{rec}, prev); err != nil {
						b.Fatal(err)
					}
					prev = map[string]store.AnalyticsRecord{sym: rec}
					rows++
				}
			}
		}
	}
	size := func() (n, total, avgRow float64) {
		if err := db.Pool.QueryRow(ctx, `SELECT count(*), pg_total_relation_size('analytics_report_archive'),
			coalesce(avg(pg_column_size(a.*)), 0) FROM analytics_report_archive a`).Scan(&n, &total, &avgRow); err != nil {
			b.Fatal(err)
		}
		return n, total, avgRow
	}
	if _, err := db.Pool.Exec(ctx, `VACUUM ANALYZE analytics_report_archive`); err != nil {
		b.Fatal(err)
	}
	n, total, avgRow := size()
	assetDays := float64(assets * b.N)
	b.ReportMetric(n/assetDays, "rows/asset-day")
	b.ReportMetric(total/assetDays, "bytes/asset-day")
	b.ReportMetric(avgRow, "bytes/row(inline)")
	perRow := total / n // heap, TOAST and indexes, all in
	for {
		r, err := db.ThinArchive(ctx, day.AddDate(0, 0, 1), 5000)
		if err != nil {
			b.Fatal(err)
		}
		if !r.More {
			break
		}
	}
	// Thinned space is reused, not returned (and a VACUUM FULL on a shared
	// server keeps what other sessions' snapshots still see): the kept
	// rows are counted at the all-in size of a row.
	kept, _, _ := size()
	b.ReportMetric(kept/assetDays, "daily-rows/asset-day")
	b.ReportMetric(kept*perRow/assetDays, "daily-bytes/asset-day")

	// The statistics of a market: a computation every 15 minutes, 12
	// verdict records (3 verdicts × 4 horizons) and a factor record per
	// factor and horizon (backtest), 12 verdict records (live).
	var factors []stats.FactorStat
	for _, f := range reportFactorNames(b) {
		for _, h := range []int{1, 5, 21} {
			p := 0.04
			factors = append(factors, stats.FactorStat{Factor: f, HorizonDays: h, SampleSize: 4000, EffectiveSampleSize: 900, HitRate: 0.52,
				HitRateCILow: 0.49, HitRateCIHigh: 0.55, Correlation: 0.03, BaseRate: &p, PValue: &p, PValueAdjusted: &p, Source: stats.SourceBacktest})
		}
	}
	var verdicts []stats.VerdictStat
	for _, v := range []string{"growth", "decline", "neutral"} {
		for _, h := range []int{1, 5, 21, 30} {
			w := 0.53
			verdicts = append(verdicts, stats.VerdictStat{Verdict: v, HorizonDays: h, SampleSize: 4000, EffectiveSampleSize: 900, WinRate: &w,
				WinRateCILow: 0.5, WinRateCIHigh: 0.56, BaseRate: &w, PValue: &w, AvgReturnPct: 0.4, Source: stats.SourceBacktest})
		}
	}
	for i := range 96 {
		at := day.Add(time.Duration(i) * 15 * time.Minute)
		if err := db.SaveStats(ctx, domain.Crypto, stats.SourceBacktest, verdicts, factors, 500, at); err != nil {
			b.Fatal(err)
		}
		if err := db.SaveStats(ctx, domain.Crypto, stats.SourceLive, verdicts, nil, 500, at); err != nil {
			b.Fatal(err)
		}
	}
	var statsBytes float64
	if err := db.Pool.QueryRow(ctx, `SELECT pg_total_relation_size('analytics_stats_archive')`).Scan(&statsBytes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(statsBytes, "stats-bytes/market-day")
	b.ReportMetric(float64(len(factors)), "factor-records")
}

// sineResult scores 500 hourly candles up to at on a sine wave (phase
// shifts it, level lifts it): a real result of a whole history.
func sineResult(b *testing.B, sym string, at time.Time, phase int, level float64) analytics.Result {
	cs := make([]domain.Candle, 500)
	for k := range cs {
		p := 100 + 10*math.Sin(float64(k+phase)/7) + level
		cs[k] = domain.Candle{Time: at.Add(time.Duration(k-499) * time.Hour), Open: p, High: p * 1.01, Low: p * 0.99, Close: p * 1.001, Volume: 1000 + float64(k%13)}
	}
	res, err := analytics.Score(analytics.Input{Market: domain.Crypto, Symbol: sym, Candles: cs})
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// benchRecord is the record of res for a Binance spot asset in style st,
// scored and published at at.
func benchRecord(sym string, st analytics.Style, res *analytics.Result, at time.Time) store.AnalyticsRecord {
	return store.AnalyticsRecord{Market: domain.Crypto, Style: st, Symbol: sym, Exchange: "binance", Result: res,
		OverallScore: res.OverallScore, Verdict: res.Verdict, Price: 100, ChangePct: 1, Sparkline: make([]float64, 30),
		CandleTime: at, CandleClose: 100, UpdatedAt: at, CandlesUsed: 500, Instrument: "spot"}
}

// reportFactorNames are the factors of a real report.
func reportFactorNames(b *testing.B) []string {
	cs := make([]domain.Candle, 500)
	for k := range cs {
		p := 100 + 10*math.Sin(float64(k)/7)
		cs[k] = domain.Candle{Time: time.Unix(int64(k)*3600, 0), Open: p, High: p * 1.01, Low: p * 0.99, Close: p, Volume: 1000}
	}
	res, err := analytics.Score(analytics.Input{Market: domain.Crypto, Symbol: "X_USDT", Candles: cs})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, len(res.Factors))
	for i, f := range res.Factors {
		names[i] = f.Name
	}
	return names
}
