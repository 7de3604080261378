package worker

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
)

// BenchmarkStatsReplay is the CPU work of the statistics job for 10 assets
// of 400 daily synthetic candles read for the first time, without
// Postgres: the scorer replayed over every day, the accumulators, and the
// records.
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
		if candles[sym], err = feed.Candles(ctx, src, sym, domain.TF1d, time.Time{}, 400); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		back, live := statsDays{}, statsDays{}
		for _, sym := range syms[:10] {
			key := store.CandleKey{Market: domain.Crypto, Exchange: src.Exchange, Symbol: sym, Timeframe: domain.TF1d}
			if _, _, err := judgeSeries(seriesRun{assetRun: assetRun{key: key}, cs: candles[sym]}, back, live); err != nil {
				b.Fatal(err)
			}
		}
		var total dayObs
		for _, d := range slices.Sorted(maps.Keys(back)) {
			total.verdicts.Merge(&back[d].verdicts)
			total.factors.Merge(&back[d].factors)
		}
		_, _ = total.verdicts.Results(stats.SourceBacktest), total.factors.Results(stats.SourceBacktest)
	}
}
