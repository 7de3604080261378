package worker_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// randomSeries is a random walk of daily candles from start, n days.
func randomSeries(r *rand.Rand, start time.Time, n int) []domain.Candle {
	out := make([]domain.Candle, n)
	price := 10 + r.Float64()*90
	for i := range out {
		open := price
		price *= math.Exp(r.NormFloat64() * 0.03)
		out[i] = domain.Candle{Time: start.AddDate(0, 0, i), Open: open, High: math.Max(open, price) * 1.01,
			Low: math.Min(open, price) * 0.99, Close: price, Volume: 1000 + r.Float64()*1000}
	}
	return out
}

// readCounter records the largest candle read of a run per series, and
// how many stored statistics days a run merged.
type readCounter struct {
	*store.DB
	mu   sync.Mutex
	most int
	days int
}

func (c *readCounter) EachStatsDaySinceTotal(ctx context.Context, m domain.Market, source string,
	total func(store.StatsTotal) error, fn func(store.StatsDay) error,
) (int64, error) {
	return c.DB.EachStatsDaySinceTotal(ctx, m, source, total, func(d store.StatsDay) error {
		c.mu.Lock()
		c.days++
		c.mu.Unlock()
		return fn(d)
	})
}

// merged returns how many stored days were merged since the last call.
func (c *readCounter) merged() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.days
	c.days = 0
	return n
}

func (c *readCounter) Candles(ctx context.Context, k store.CandleKey, limit int) ([]domain.Candle, error) {
	c.mu.Lock()
	c.most = max(c.most, limit)
	c.mu.Unlock()
	return c.DB.Candles(ctx, k, limit)
}

func (c *readCounter) reset() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	most := c.most
	c.most = 0
	return most
}

// The statistics computed a day at a time, with late-corrected candles
// (a recent one and one a year old) and a delisted asset, equal those of
// one pass over the same candles; and a new day reads a bounded tail of
// each series, not its history, and merges a bounded number of stored
// days into the records (the rest come from the stored total).
func TestStatsIncrementalEqualsFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	r := rand.New(rand.NewPCG(37, 2))
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const days = 480
	series := map[string][]domain.Candle{}
	for _, sym := range []string{"AAA_USDT", "BBB_USDT", "CCC_USDT", "DDD_USDT", "EEE_USDT"} {
		series[sym] = randomSeries(r, start, days)
	}
	// Listed later, and delisted after 250 days.
	series["LATE_USDT"] = randomSeries(r, start.AddDate(0, 0, 150), days-150)
	series["GONE_USDT"] = randomSeries(r, start, 250)
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	if _, _, err := db.SyncListings(ctx, spot, []string{"GONE_USDT"}, start); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SyncListings(ctx, spot, []string{"AAA_USDT"}, start.AddDate(0, 0, 251)); err != nil {
		t.Fatal(err)
	}
	key := func(sym string) store.CandleKey {
		return store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF1d}
	}
	// store writes the candles of every series opened before day n.
	store := func(from, n int) {
		t.Helper()
		batch := map[store.CandleKey][]domain.Candle{}
		for sym, cs := range series {
			for _, c := range cs {
				if d := int(c.Time.Sub(start).Hours() / 24); d >= from && d < n {
					batch[key(sym)] = append(batch[key(sym)], c)
				}
			}
		}
		if err := db.UpsertCandleSeries(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// correct scales the close of candle i of sym, as a late correction.
	correct := func(sym string, i int, by float64) {
		t.Helper()
		fix := series[sym][i]
		fix.Close *= by
		fix.High, fix.Low = math.Max(fix.High, fix.Close), math.Min(fix.Low, fix.Close)
		if err := db.UpsertCandles(ctx, key(sym), []domain.Candle{fix}); err != nil {
			t.Fatal(err)
		}
		series[sym][i] = fix
	}
	clk := &clock{}
	reads := &readCounter{DB: db}
	job := &worker.StatsJob{Store: reads, Region: "global", Logger: discard(), Now: clk.now}
	run := func(n int) {
		t.Helper()
		clk.t = start.AddDate(0, 0, n).Add(2 * time.Hour) // day n-1 closed and settled
		if err := job.HandleStats(ctx, worker.NewStatsTask(domain.Crypto, clk.t)); err != nil {
			t.Fatal(err)
		}
	}

	store(0, 420)
	run(420)
	if most := reads.reset(); most < days {
		t.Errorf("first run read at most %d candles of a series, want the whole history", most)
	}
	const boundedDays = 2 * 120 // two sources, each the days after the total
	if n := reads.merged(); n < 2*350 {
		t.Errorf("first run merged %d stored days, want every day of both sources", n)
	}
	for n := 421; n <= 428; n++ {
		store(n-1, n)
		if n == 425 {
			// A correction 175 days back: the total covering it goes, and
			// the run merges every stored day again.
			correct("BBB_USDT", 250, 0.8)
		}
		run(n)
		if most := reads.reset(); most > 500 && n != 425 {
			t.Errorf("day %d: a series read with limit %d: a new day must read a bounded tail", n, most)
		}
		merged := reads.merged()
		switch {
		case n == 425 && merged < 2*350:
			t.Errorf("day %d: after a correction of day 250, merged %d stored days: want every day again", n, merged)
		case n != 425 && merged > boundedDays:
			t.Errorf("day %d: merged %d stored days into the records: a new day must merge a bounded tail onto the stored total", n, merged)
		}
	}
	store(428, 445) // seventeen days at once
	run(445)
	// A late correction of a candle an earlier run read, 13 days before the newest.
	correct("CCC_USDT", 432, 1.2)
	store(445, 446)
	run(446)
	incremental, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}

	reads.merged()
	if err := db.ResetStatsState(ctx, domain.Crypto); err != nil {
		t.Fatal(err)
	}
	run(446)
	full, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.merged(); n < 2*350 {
		t.Fatalf("the run after a reset merged %d stored days onto a total: want every day, from none", n)
	}
	if diff := cmp.Diff(full.Verdicts, incremental.Verdicts); diff != "" {
		t.Errorf("verdict records: incremental differs from a full computation (-full +incremental):\n%.3000s", diff)
	}
	if diff := cmp.Diff(full.Factors, incremental.Factors); diff != "" {
		t.Errorf("factor records: incremental differs from a full computation (-full +incremental):\n%.3000s", diff)
	}
	// Every asset counts, the delisted one included; the window runs from
	// the first judged bar to the last day with a forward return.
	for _, v := range full.Verdicts {
		if v.Assets != 7 || v.WindowStart == "" || v.WindowEnd != "2025-03-20" {
			t.Fatalf("record %+v: want 7 assets and a window ending 2025-03-20", v)
		}
	}
	// Judged two assets at once and saved three at a time, the records are
	// the same but for the rounding of the merged means and co-moments.
	if err := db.ResetStatsState(ctx, domain.Crypto); err != nil {
		t.Fatal(err)
	}
	job.Workers, job.Chunk = 2, 3
	run(446)
	chunked, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	approx := cmpopts.EquateApprox(0, 1e-9)
	if diff := cmp.Diff(full.Verdicts, chunked.Verdicts, approx); diff != "" {
		t.Errorf("verdict records: in chunks differ from one pass (-one +chunks):\n%.3000s", diff)
	}
	if diff := cmp.Diff(full.Factors, chunked.Factors, approx); diff != "" {
		t.Errorf("factor records: in chunks differ from one pass (-one +chunks):\n%.3000s", diff)
	}
	if full.Verdicts[0].SampleSize == 0 || len(full.Factors) == 0 || full.Factors[0].Assets != 7 {
		t.Fatalf("records without observations: %+v", full.Verdicts[0])
	}
}

// A correction must change the statistics: the job does not keep what it
// judged from the candle before the correction.
func TestStatsCorrectionInvalidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	r := rand.New(rand.NewPCG(38, 2))
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "AAA_USDT", Timeframe: domain.TF1d}
	cs := randomSeries(r, start, 200)
	if err := db.UpsertCandles(ctx, k, cs); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: start.AddDate(0, 0, 200).Add(2 * time.Hour)}
	job := &worker.StatsJob{Store: db, Region: "global", Logger: discard(), Now: clk.now}
	if err := job.HandleStats(ctx, worker.NewStatsTask(domain.Crypto, clk.t)); err != nil {
		t.Fatal(err)
	}
	before, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	// Day 190 falls 60 %: the 1-day forward return of day 189 flips.
	fix := cs[190]
	fix.Close, fix.Low = cs[189].Close*0.4, cs[189].Close*0.39
	if err := db.UpsertCandles(ctx, k, []domain.Candle{fix}); err != nil {
		t.Fatal(err)
	}
	if err := job.HandleStats(ctx, worker.NewStatsTask(domain.Crypto, clk.t)); err != nil {
		t.Fatal(err)
	}
	after, err := db.Stats(ctx, domain.Crypto)
	if err != nil {
		t.Fatal(err)
	}
	avg := func(ms store.MarketStats) float64 {
		var sum float64
		for _, v := range ms.Verdicts {
			if v.Source == stats.SourceBacktest && v.HorizonDays == 1 {
				sum += v.AvgReturnPct * float64(v.SampleSize)
			}
		}
		return sum
	}
	if avg(before) == avg(after) {
		t.Errorf("a 60 %% fall on day 190 left the 1-day returns as they were (%v)", avg(after))
	}
}
