package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// The statistics job replays the scorer over daily history: every verdict
// × horizon and factor × horizon record is there, with samples; live
// records exist (empty until verdicts were published); a second run stores
// the same records.
func TestStatsBacktest(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.MaxCandleSymbols = 3
	ctx := context.Background()
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF1d, clk.t)); err != nil {
		t.Fatal(err)
	}
	job := &worker.StatsJob{Store: db, Region: "global", Logger: discard(), Now: clk.now}
	if err := job.HandleStats(ctx, worker.NewStatsTask(domain.Crypto, clk.t)); err != nil {
		t.Fatal(err)
	}
	first, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	var backtest, live int
	for _, v := range first.Verdicts {
		switch v.Source {
		case stats.SourceBacktest:
			backtest++
		case stats.SourceLive:
			live++
			if v.SampleSize != 0 {
				t.Errorf("live record %+v has samples before any verdict was published", v)
			}
		}
	}
	if backtest != 12 || live != 12 {
		t.Fatalf("verdict records: %d backtest, %d live; want 3 verdicts × 4 horizons each", backtest, live)
	}
	total := 0
	for _, v := range first.Verdicts {
		// Observations are filed under their days: 3 assets moving
		// together over overlapping 21-day returns are worth far fewer
		// independent ones.
		if v.SampleSize > 0 && (v.EffectiveSampleSize < 1 || v.EffectiveSampleSize > v.SampleSize || v.PValue == nil) {
			t.Errorf("record %+v: want an effective size of 1..sample_size and a p-value", v)
		}
		if v.Source == stats.SourceBacktest && v.HorizonDays == 21 && v.SampleSize >= 100 && v.EffectiveSampleSize*3 > v.SampleSize {
			t.Errorf("record %+v: %d overlapping 21-day observations counted as %d independent ones", v, v.SampleSize, v.EffectiveSampleSize)
		}
		if v.Source == stats.SourceBacktest && v.HorizonDays == 1 {
			total += v.SampleSize
			if v.SampleSize > 0 && (v.WinRate == nil || *v.WinRate < 0 || *v.WinRate > 1 || v.WinRateCILow > *v.WinRate || v.WinRateCIHigh < *v.WinRate) {
				t.Errorf("record %+v: win rate outside its interval", v)
			}
		}
	}
	// 3 assets × (299 closed candles − 60 + 1 scored bars − 1 without a
	// next day) = 717: today's candle is still open, and not judged.
	if want := 3 * (worker.InitialCandles - 1 - analytics.MinCandles); total != want {
		t.Errorf("1-day backtest samples = %d, want %d", total, want)
	}
	factors := map[string]bool{}
	for _, f := range first.Factors {
		factors[f.Factor] = true
	}
	for _, f := range first.Factors {
		if f.SampleSize > 0 && (f.BaseRate == nil || f.PValueAdjusted == nil || *f.PValueAdjusted < *f.PValue) {
			t.Errorf("factor record %+v: want a base rate and an adjusted p-value", f)
		}
	}
	if !factors["rsi_14"] || len(first.Factors) < 3*20 {
		t.Errorf("factor records: %d over %d factors, want rsi_14 and ≥ 20 factors × 3 horizons", len(first.Factors), len(factors))
	}

	if err := job.HandleStats(ctx, worker.NewStatsTask(domain.Crypto, clk.t)); err != nil {
		t.Fatal(err)
	}
	second, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("a second run changed the statistics (-first +second):\n%.2000s", diff)
	}

	// Live: the service published "growth" at the close of an asset's last
	// 50 days; those days (less today's open candle and yesterday's, with no
	// next day yet) are judged. A run judges a day's published verdict once
	// the day closes: verdicts written afterwards for days already judged
	// count after a recomputation.
	syms, err := db.CandleSymbols(ctx, domain.Crypto, "binance", domain.TF1d)
	if err != nil || len(syms) == 0 {
		t.Fatalf("symbols: %v, %v", syms, err)
	}
	cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: syms[0], Timeframe: domain.TF1d}, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO analytics_snapshots (market, style, symbol, at, overall_score, technical_score, verdict, price)
			VALUES ('crypto', 'swing', $1, $2, 40, 40, 'growth', $3)`, syms[0], c.Time.Add(23*time.Hour), c.Close); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.ResetStatsState(ctx, domain.Crypto); err != nil {
		t.Fatal(err)
	}
	if err := job.HandleStats(ctx, worker.NewStatsTask(domain.Crypto, clk.t)); err != nil {
		t.Fatal(err)
	}
	third, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range third.Verdicts {
		if v.Source == stats.SourceLive && v.Verdict == stats.VerdictGrowth && v.HorizonDays == 1 {
			if v.SampleSize != 48 || v.WinRate == nil || v.BaseRate == nil {
				t.Errorf("live growth/1 day = %+v, want 48 judged days", v)
			}
			return
		}
	}
	t.Error("no live growth/1 day record")
}

// Before any daily candle is stored the task fails retryably (asynq tries
// again in seconds) instead of waiting for the next tick with no statistics.
func TestStatsRetriesBeforeData(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	_, db := newIngester(t, clk)
	job := &worker.StatsJob{Store: db, Region: "global", Logger: discard(), Now: clk.now}
	err := job.HandleStats(context.Background(), worker.NewStatsTask(domain.Forex, clk.t))
	if err == nil || isSkipRetry(err) {
		t.Fatalf("no data: err = %v, want a retryable error", err)
	}
	if err := job.HandleStats(context.Background(), worker.NewStatsTask("bonds", clk.t)); !isSkipRetry(err) {
		t.Fatalf("bad market: err = %v, want SkipRetry", err)
	}
}
