package worker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// benchEnv reads a positive integer setting of the benchmark.
func benchEnv(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// benchMarket is a synthetic market of daily candles: every asset moves
// with a common market return (beta 0.5 to 1.5) plus its own, so the
// assets move together as real ones do. Deterministic.
type benchMarket struct {
	start  time.Time
	market []float64 // the market's log return of each day
}

func newBenchMarket(start time.Time, days int) benchMarket {
	r := rand.New(rand.NewPCG(37, 1))
	m := make([]float64, days)
	for i := range m {
		m[i] = r.NormFloat64()*0.025 + 0.0003
	}
	return benchMarket{start: start, market: m}
}

// series returns asset a's candles of days from to to (excluded).
func (b benchMarket) series(a, from, to int) []domain.Candle {
	r := rand.New(rand.NewPCG(uint64(a), 2))
	beta := 0.5 + r.Float64()
	price := 10 + r.Float64()*90
	out := make([]domain.Candle, 0, to-from)
	for d := 0; d < to; d++ {
		open := price
		price *= math.Exp(beta*b.market[d] + r.NormFloat64()*0.02)
		if d >= from {
			out = append(out, domain.Candle{Time: b.start.AddDate(0, 0, d), Open: open, High: math.Max(open, price) * 1.005,
				Low: math.Min(open, price) * 0.995, Close: price, Volume: 1e6 * (1 + r.Float64())})
		}
	}
	return out
}

func benchSymbol(a int) string { return fmt.Sprintf("S%04d_USDT", a) }

// medianWidth is the median width of the verdict records' 95 % intervals
// (backtest records with observations), with the median effective sample
// size and how many are significant.
func medianWidth(vs []stats.VerdictStat) (width float64, eff, significant, records int) {
	var ws []float64
	var es []int
	for _, v := range vs {
		if v.Source == stats.SourceBacktest && v.SampleSize > 0 {
			ws = append(ws, v.WinRateCIHigh-v.WinRateCILow)
			es = append(es, v.EffectiveSampleSize)
			if v.IsSignificant {
				significant++
			}
		}
	}
	if len(ws) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(ws)
	slices.Sort(es)
	return ws[len(ws)/2], es[len(es)/2], significant, len(ws)
}

// TestBenchHistStats is `make bench-histstats` (BENCHMARKS.md, "Statistics
// over the whole history"): HISTSTATS_ASSETS assets (1,600) of
// HISTSTATS_YEARS years (5) of synthetic daily candles written into a
// schema of its own, the statistics job over all of it, then one new day;
// and the median interval width of the verdict records from the newest 400
// candles of the same assets against the whole history. Skipped unless
// BENCH_HISTSTATS is set.
func TestBenchHistStats(t *testing.T) {
	if os.Getenv("BENCH_HISTSTATS") == "" {
		t.Skip("BENCH_HISTSTATS not set")
	}
	assets := benchEnv(t, "HISTSTATS_ASSETS", 1600)
	years := benchEnv(t, "HISTSTATS_YEARS", 5)
	workers := benchEnv(t, "HISTSTATS_WORKERS", runtime.GOMAXPROCS(0))
	days := years * 365
	ctx := context.Background()
	db := storetest.New(t)
	start := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	bm := newBenchMarket(start, days+1)
	key := func(a int) store.CandleKey {
		return store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: benchSymbol(a), Timeframe: domain.TF1d}
	}
	write := func(from, to int) {
		batch := map[store.CandleKey][]domain.Candle{}
		flush := func() {
			if err := db.UpsertCandleSeries(ctx, batch); err != nil {
				t.Fatal(err)
			}
			clear(batch)
		}
		for a := range assets {
			batch[key(a)] = bm.series(a, from, to)
			if len(batch)*(to-from) >= 50_000 {
				flush()
			}
		}
		flush()
	}
	began := time.Now()
	write(0, days)
	t.Logf("wrote %d assets × %d daily candles in %s", assets, days, time.Since(began).Round(time.Second))

	now := start.AddDate(0, 0, days).Add(2 * time.Hour)
	job := &StatsJob{Store: db, Region: "global", Now: func() time.Time { return now }, Workers: workers,
		Logger: slog.New(slog.NewTextHandler(os.Stdout, nil))}
	began = time.Now()
	if _, err := job.Compute(ctx, domain.Crypto); err != nil {
		t.Fatal(err)
	}
	full := time.Since(began)
	all, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}

	write(days, days+1)
	now = now.AddDate(0, 0, 1)
	began = time.Now()
	if _, err := job.Compute(ctx, domain.Crypto); err != nil {
		t.Fatal(err)
	}
	increment := time.Since(began)

	// The same assets from their newest 400 candles as of the full run.
	began = time.Now()
	back := statsDays{}
	for a := range assets {
		k := key(a)
		if _, _, err := judgeSeries(seriesRun{assetRun: assetRun{key: k}, cs: bm.series(a, days-400, days)}, back, statsDays{}); err != nil {
			t.Fatal(err)
		}
	}
	var recent dayObs
	for _, d := range slices.Sorted(maps.Keys(back)) {
		recent.verdicts.Merge(&back[d].verdicts)
	}
	short := time.Since(began)
	var size int64
	if err := db.Pool.QueryRow(ctx, `SELECT pg_total_relation_size('stats_days') + pg_total_relation_size('stats_assets')`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	w400, e400, s400, n400 := medianWidth(recent.verdicts.Results(stats.SourceBacktest))
	wAll, eAll, sAll, nAll := medianWidth(all.Verdicts)
	fmt.Printf("histstats: %d assets × %d days, %d workers (GOMAXPROCS %d)\n", assets, days, workers, runtime.GOMAXPROCS(0))
	fmt.Printf("histstats: full computation %s (%.1f µs a bar), one new day %s, state %.1f MB\n",
		full.Round(time.Millisecond), float64(full.Microseconds())/float64(assets*days), increment.Round(time.Millisecond), float64(size)/1e6)
	fmt.Printf("histstats: 400 candles (in process, %s): median interval width %.3f, median effective size %d, %d of %d verdict records significant\n",
		short.Round(time.Millisecond), w400, e400, s400, n400)
	fmt.Printf("histstats: whole history: median interval width %.3f, median effective size %d, %d of %d verdict records significant\n",
		wAll, eAll, sAll, nAll)
	if nAll == 0 || wAll >= w400 {
		t.Errorf("the whole history's intervals (median width %.3f) are not narrower than 400 candles' (%.3f)", wAll, w400)
	}
}
