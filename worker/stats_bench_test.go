package worker

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/feeds"
)

// BenchmarkStatsReplay is the CPU work of the statistics job for 10 assets
// of 400 daily synthetic candles, without Postgres: the scorer replayed
// over every day, the accumulators, and the records.
func BenchmarkStatsReplay(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	feed := feeds.NewSynthetic(1, func() time.Time { return now })
	src := domain.AnalyticsSources("global", domain.Crypto, nil)[0]
	syms, err := feed.Symbols(ctx, src)
	if err != nil || len(syms) < 10 {
		b.Fatalf("symbols: %v, %v", syms, err)
	}
	candles := make(map[string][]domain.Candle, 10)
	for _, sym := range syms[:10] {
		if candles[sym], err = feed.Candles(ctx, src, sym, domain.TF1d, time.Time{}, statsCandles); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		var va stats.VerdictAccumulator
		var fa stats.FactorAccumulator
		for sym, cs := range candles {
			if err := replay(domain.Crypto, sym, cs, &va, &fa); err != nil {
				b.Fatal(err)
			}
		}
		_, _ = va.Results(stats.SourceBacktest), fa.Results(stats.SourceBacktest)
	}
}
