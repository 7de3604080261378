package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// BenchmarkCloseRescoring rescores a whole universe at a close as the
// worker does: every asset has a report and a new candle in each scored
// style, and the styles' runs (Scorer.ScoreSymbols, the trigger's path)
// run side by side, as at 00:00 UTC when all four crypto styles close
// together. It reports the close's wall time, the time a report, and
// where the runs' time went (the scorer's "scoring run" phases, summed
// over the runs), and the CPU time a report costs in Postgres (the pool's
// backends) and in this process (storetest.CPU: on a shared machine the
// figures to compare builds by):
//
//	go test ./worker -run '^$' -bench CloseRescoring -benchtime 3x
//	BENCH_CLOSE_ASSETS=2000 go test ./worker -run '^$' -bench CloseRescoring -benchtime 3x -timeout 30m
//	BENCH_CLOSE_ASSETS=11000 BENCH_CLOSE_MARKET=stocks go test ./worker -run '^$' -bench CloseRescoring -benchtime 3x -timeout 30m
//
// BENCH_CLOSE_ASSETS (default 500) sets the universe; BENCH_CLOSE_MARKET
// crypto (default: four styles) or stocks (one style, swing, the 16:00 New
// York close); BENCH_CLOSE_SQL runs on the seeded schema first (another
// storage of the tables, for a comparison); BENCH_CLOSE_CACHE=off scores without the worker's candle
// cache (every run reads 500 candles a series); BENCH_CLOSE_ANALYZE=off
// without the tables' statistics. Each series holds 520
// candles of a (hashed, repeatable) random walk, seeded in Postgres; the universe is scored
// once before the timer starts (the cache then holds what the runs before
// a close read).
func BenchmarkCloseRescoring(b *testing.B) {
	assets := 500
	if v := os.Getenv("BENCH_CLOSE_ASSETS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_CLOSE_ASSETS=%q: want a positive count", v)
		}
		assets = n
	}
	m := domain.Crypto
	if os.Getenv("BENCH_CLOSE_MARKET") == "stocks" {
		m = domain.Stocks
	}
	srcs := domain.AnalyticsSources("global", m, nil)
	if len(srcs) == 0 {
		b.Fatalf("no analytics source for %s", m)
	}
	src := srcs[0]
	styles := analytics.ScoredStyles(m)
	db := storetest.New(b)
	ctx := context.Background()
	close0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	syms := make([]string, assets)
	for i := range syms {
		syms[i] = fmt.Sprintf("A%05d", i)
		if m == domain.Crypto {
			syms[i] += "_USDT"
		}
	}
	seedCloseUniverse(b, db, src, styles, syms, close0)
	if q := os.Getenv("BENCH_CLOSE_SQL"); q != "" {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}

	phases := &phaseSums{}
	sc := &worker.Scorer{Store: db, Region: "global", Logger: slog.New(phases), Now: func() time.Time { return close0 }}
	if os.Getenv("BENCH_CLOSE_CACHE") != "off" {
		sc.Candles = store.NewCandleCache(assets * len(styles))
	}
	rescoreAll := func(now time.Time) int {
		sc.Now = func() time.Time { return now }
		var wg sync.WaitGroup
		scored := make([]int, len(styles))
		for i, st := range styles {
			wg.Go(func() {
				n, _, err := sc.ScoreSymbols(ctx, m, st, syms)
				if err != nil {
					b.Error(err)
				}
				scored[i] = n
			})
		}
		wg.Wait()
		total := 0
		for _, n := range scored {
			total += n
		}
		return total
	}
	if n := rescoreAll(close0.Add(time.Minute)); n != assets*len(styles) {
		b.Fatalf("first scoring: %d reports, want %d", n, assets*len(styles))
	}
	// A deployment's tables have statistics (autovacuum analyzes them);
	// BENCH_CLOSE_ANALYZE=off scores without, as a new deployment before
	// its first analyze, or a server without autovacuum, does.
	if os.Getenv("BENCH_CLOSE_ANALYZE") != "off" {
		if _, err := db.Pool.Exec(ctx, `ANALYZE`); err != nil {
			b.Fatal(err)
		}
	}
	phases.reset()
	cpu := storetest.StartCPU(b, db)
	var pg, client time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		at := close0.Add(time.Duration(i+1) * 24 * time.Hour)
		appendCloseCandles(b, db, src, styles, syms, at)
		pg0, client0 := cpu.Used()
		b.StartTimer()
		if n := rescoreAll(at.Add(time.Second)); n != assets*len(styles) {
			b.Fatalf("close %d: %d reports rescored, want %d", i, n, assets*len(styles))
		}
		b.StopTimer()
		pg1, client1 := cpu.Used()
		pg, client = pg+pg1-pg0, client+client1-client0
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(pg.Microseconds())/float64(b.N*assets*len(styles)), "pg-cpu-µs/report")
	b.ReportMetric(float64(client.Microseconds())/float64(b.N*assets*len(styles)), "go-cpu-µs/report")
	reports := float64(b.N * assets * len(styles))
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/close")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/reports, "µs/report")
	for _, p := range phases.sums() {
		b.ReportMetric(float64(p.d.Microseconds())/reports, p.name+"-µs/report")
	}
	b.ReportMetric(float64(phases.fullReads)/reports, "full-reads/report")
}

// seedCloseUniverse stores 520 candles of a repeatable random walk (hashed, so every run closes alike) for every asset
// in each style's timeframe, the newest opening at close (still open), and
// a screener row per asset, in Postgres itself (millions of rows).
func seedCloseUniverse(b testing.TB, db *store.DB, src domain.Combination, styles []analytics.Style, syms []string, close time.Time) {
	b.Helper()
	ctx := context.Background()
	for _, st := range styles {
		tf := st.Timeframe()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO candles (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
			SELECT $1, $2, sym, $3, $4::timestamptz - k * $5::interval, p, p * (1.005 + greatest(w, 0)), p * (0.995 + least(w, 0)), p * (1 + w), 1000 + 100 * abs(w)
			FROM (SELECT sym, k, w, 100 * exp(sum(w) OVER (PARTITION BY sym ORDER BY k DESC)) AS p
				FROM unnest($6::text[]) sym, generate_series(0, 519) k, LATERAL (SELECT (hashtext(sym || ':' || k || ':' || $3) % 10000) / 500000.0 AS w) r) s`,
			string(src.Market), src.Exchange, string(tf), close, tf.Duration(), syms); err != nil {
			b.Fatal(err)
		}
	}
	ts := make([]domain.Ticker, len(syms))
	for i, s := range syms {
		ts[i] = domain.Ticker{Symbol: s, Price: 100, ChangePct: 1, Volume: 1e6, UpdatedAt: close}
	}
	if err := db.ReplaceTickers(ctx, src, ts); err != nil {
		b.Fatal(err)
	}
	if os.Getenv("BENCH_CLOSE_ANALYZE") != "off" {
		if _, err := db.Pool.Exec(ctx, `ANALYZE candles`); err != nil {
			b.Fatal(err)
		}
	}
}

// appendCloseCandles adds to every series of the source (syms) a candle
// opening at at: the new candle of a close in each style. Each series'
// newest candle is found by its own index look-up: a real close's writes
// touch only the series' newest pages, where one scan of every series'
// candles (a DISTINCT ON over the timeframe) would leave Postgres's
// buffers full of old candles just before the measured close.
func appendCloseCandles(b testing.TB, db *store.DB, src domain.Combination, styles []analytics.Style, syms []string, at time.Time) {
	b.Helper()
	for _, st := range styles {
		if _, err := db.Pool.Exec(context.Background(), `INSERT INTO candles (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
			SELECT $1, $2, s.symbol, $3, $4, n.close, n.close * 1.03, n.close * 0.97,
				n.close * (1 + (hashtext(s.symbol || ':' || n.open_time::text) % 10000) / 500000.0), 1000
			FROM unnest($5::text[]) s(symbol)
			CROSS JOIN LATERAL (SELECT open_time, close FROM candles
				WHERE market = $1 AND exchange = $2 AND symbol = s.symbol AND timeframe = $3
				ORDER BY open_time DESC LIMIT 1) n`, string(src.Market), src.Exchange, string(st.Timeframe()), at, syms); err != nil {
			b.Fatal(err)
		}
	}
}

// phaseSums is a slog handler adding up the durations of the scorer's
// "scoring run" lines, and keeping each line's candidates.
type phaseSums struct {
	mu         sync.Mutex
	d          map[string]time.Duration
	fullReads  int64
	candidates []int64 // a run each, in the order logged
}

type phaseSum struct {
	name string
	d    time.Duration
}

func (p *phaseSums) Enabled(context.Context, slog.Level) bool { return true }
func (p *phaseSums) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *phaseSums) WithGroup(string) slog.Handler            { return p }
func (p *phaseSums) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "scoring run" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.d == nil {
		p.d = map[string]time.Duration{}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindDuration && a.Key != "took" {
			p.d[a.Key] += a.Value.Duration()
		}
		switch a.Key {
		case "series_read_in_full":
			p.fullReads += a.Value.Int64()
		case "candidates":
			p.candidates = append(p.candidates, a.Value.Int64())
		}
		return true
	})
	return nil
}

func (p *phaseSums) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.d)
	p.fullReads = 0
	p.candidates = nil
}

func (p *phaseSums) sums() []phaseSum {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []phaseSum
	for k, d := range p.d {
		out = append(out, phaseSum{strings.ReplaceAll(k, "_", "-"), d})
	}
	slices.SortFunc(out, func(a, b phaseSum) int { return strings.Compare(a.name, b.name) })
	return out
}
