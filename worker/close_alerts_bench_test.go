package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// BenchmarkCloseAlerts rescores a crypto universe at a close (all four
// styles at once, as at 00:00 UTC) with clients' alerts on it, and
// reports how long after the close each alert that fired was committed
// in the outbox (p50, p95, max: from the start of the close's rescoring
// to the commit of the save that fired it; the webhook send follows,
// woken by the commit) and the CPU a close costs in Postgres and in this
// process, and the page faults this process took a close (the first
// touches of memory its heap had not used: on some virtual machines each
// costs microseconds, and a cold heap's close spends a third of its Go
// CPU in them). Run it with BENCH_CLOSE_ALERTS=0 for the baseline (the
// same close without alerts); the difference is the alerts' cost:
//
//	BENCH_CLOSE_ASSETS=2000 BENCH_CLOSE_ALERTS=10000 go test ./worker -run '^$' -bench CloseAlerts -benchtime 3x -timeout 30m
//
// BENCH_CLOSE_STYLES=scalp measures a close of one style (a quarter-hour
// that is not an hour: 72 of a day's 96 closes) instead of 00:00 UTC,
// where all four close together (closingStyles).
//
// BENCH_LOG=1 logs each scoring run's phases (the scorer's "scoring run"
// lines) and the latencies' quantiles from 0 to 0.95.
//
// BENCH_CPUPROFILE=<file> writes this process's CPU profile of the
// measured closes (without the seeding).
//
// BENCH_CLOSE_GAP=<duration> (e.g. 3m) leaves the process idle that long
// before each measured close, untimed: a worker's time between two
// closes, in which the collector's periodic cycle runs and the runtime
// returns memory to the system that the next close touches again (its
// page faults, go-page-faults/close). By default the closes run back to
// back.
//
// The alerts belong to 100 clients; 1 in 100 watches the whole market,
// the others 1 to 10 symbols each; the conditions mix verdicts, scores of
// one or two styles, a factor's value and the screener row's volume, with
// thresholds spread so that some fire at each close.
func BenchmarkCloseAlerts(b *testing.B) {
	assets := envInt(b, "BENCH_CLOSE_ASSETS", 500)
	nAlerts := envInt(b, "BENCH_CLOSE_ALERTS", 1000)
	var gap time.Duration
	if v := os.Getenv("BENCH_CLOSE_GAP"); v != "" {
		var err error
		if gap, err = time.ParseDuration(v); err != nil || gap < 0 {
			b.Fatalf("BENCH_CLOSE_GAP=%q: want a duration such as 3m", v)
		}
	}
	src := domain.AnalyticsSources("global", domain.Crypto, nil)[0]
	styles := analytics.ScoredStyles(domain.Crypto)
	db := storetest.New(b)
	ctx := context.Background()
	close0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	syms := make([]string, assets)
	for i := range syms {
		syms[i] = fmt.Sprintf("A%05d_USDT", i)
	}
	closing := closingStyles(b, styles)
	seedCloseUniverse(b, db, src, styles, syms, close0)
	seedAlerts(b, db, syms, nAlerts)

	timed := &timedAlerts{}
	db.OnAlertsFired(timed.fired)
	lg := discard()
	if os.Getenv("BENCH_LOG") != "" {
		lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sc := &worker.Scorer{Store: db, Region: "global", Logger: lg, Now: func() time.Time { return close0 },
		Candles: store.NewCandleCache(assets * len(styles)), Alerts: &alerting.Matcher{}}
	rescore := func(styles []analytics.Style, now time.Time) {
		sc.Now = func() time.Time { return now }
		var wg sync.WaitGroup
		for _, st := range styles {
			wg.Go(func() {
				if _, _, err := sc.ScoreSymbols(ctx, domain.Crypto, st, syms); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	rescore(styles, close0.Add(time.Minute))
	if _, err := db.Pool.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	if os.Getenv("BENCH_PGSS_RESET") != "" {
		db.Pool.Exec(ctx, `SELECT public.pg_stat_statements_reset()`) //nolint:errcheck // profiling aid
	}
	cpu := storetest.StartCPU(b, db)
	var pg, client time.Duration
	var faults int64
	timed.reset()
	if f := os.Getenv("BENCH_CPUPROFILE"); f != "" {
		// This process's CPU over the measured closes only (go test's
		// -cpuprofile also covers the seeding).
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		at := close0.Add(time.Duration(i+1) * 24 * time.Hour)
		appendCloseCandles(b, db, src, closing, syms, at)
		time.Sleep(gap) // idle, as a worker is between closes
		pg0, client0 := cpu.Used()
		f0 := minorFaults(b)
		timed.start(time.Now())
		b.StartTimer()
		rescore(closing, at.Add(time.Second))
		b.StopTimer()
		pg1, client1 := cpu.Used()
		pg, client = pg+pg1-pg0, client+client1-client0
		faults += minorFaults(b) - f0
		b.StartTimer()
	}
	b.StopTimer()
	lat := timed.latencies()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/close")
	b.ReportMetric(float64(pg.Milliseconds())/float64(b.N), "pg-cpu-ms/close")
	b.ReportMetric(float64(client.Milliseconds())/float64(b.N), "go-cpu-ms/close")
	b.ReportMetric(float64(len(lat))/float64(b.N), "alerts/close")
	b.ReportMetric(float64(faults)/float64(b.N), "go-page-faults/close")
	if len(lat) > 0 {
		q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Milliseconds()) }
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.95), "p95-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
		if os.Getenv("BENCH_LOG") != "" {
			for _, p := range []float64{0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95} {
				fmt.Fprintf(os.Stderr, "q%.2f=%.0f ", p, q(p))
			}
			fmt.Fprintln(os.Stderr)
		}
	}
}

// closingStyles is the styles whose candles close at the measured
// closes: BENCH_CLOSE_STYLES (a comma-separated list, e.g. "scalp" for a
// quarter-hour that is not an hour, "scalp,intraday" for an hour that is
// not a 4-hour close), or every style (00:00 UTC, the default).
func closingStyles(b *testing.B, all []analytics.Style) []analytics.Style {
	v := os.Getenv("BENCH_CLOSE_STYLES")
	if v == "" {
		return all
	}
	var out []analytics.Style
	for name := range strings.SplitSeq(v, ",") {
		st := analytics.Style(strings.TrimSpace(name))
		if !slices.Contains(all, st) || slices.Contains(out, st) {
			b.Fatalf("BENCH_CLOSE_STYLES=%q: %q is not one of %v, or named twice", v, name, all)
		}
		out = append(out, st)
	}
	return out
}

// minorFaults is the page faults this process has taken so far that
// needed no disk read (getrusage's ru_minflt).
func minorFaults(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return ru.Minflt
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// seedAlerts creates n alerts over 100 clients.
func seedAlerts(b *testing.B, db *store.DB, syms []string, n int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(36, 36))
	clients := make([]*domain.Client, 100)
	for i := range clients {
		clients[i] = &domain.Client{OrgName: fmt.Sprintf("c%d", i), Tier: domain.Enterprise, Markets: domain.Markets}
		if err := db.CreateClient(ctx, clients[i]); err != nil {
			b.Fatal(err)
		}
	}
	conditions := []func() string{
		func() string { return fmt.Sprintf("overall_score > %d", rng.IntN(60)) },
		func() string { return `verdict == "growth"` },
		func() string {
			return fmt.Sprintf(`swing.verdict == "growth" && scalp.overall_score > %d`, rng.IntN(40))
		},
		func() string { return fmt.Sprintf("factors.rsi_14.value < %d", 30+rng.IntN(30)) },
		func() string { return fmt.Sprintf("intraday.overall_score < -%d", rng.IntN(40)) },
		func() string { return `position.verdict == "decline" && volume > 1000.0` },
	}
	for i := range n {
		c := clients[i%len(clients)]
		a := domain.Alert{ClientID: c.ID, Name: fmt.Sprintf("a%d", i), Market: domain.Crypto, Expression: conditions[i%len(conditions)]()}
		if i%100 != 0 {
			for range 1 + rng.IntN(10) {
				a.Symbols = append(a.Symbols, syms[rng.IntN(len(syms))])
			}
			slices.Sort(a.Symbols)
			a.Symbols = slices.Compact(a.Symbols)
		}
		if _, err := db.CreateAlert(ctx, a, c.Tier); err != nil {
			b.Fatal(err)
		}
	}
}

// timedAlerts records, for every alert a save fires, the time from the
// close's start to the save's commit (store.DB.OnAlertsFired).
type timedAlerts struct {
	mu    sync.Mutex
	t0    time.Time
	lat   []time.Duration
	count bool
}

func (s *timedAlerts) reset() { s.mu.Lock(); s.lat = nil; s.mu.Unlock() }

func (s *timedAlerts) start(t time.Time) { s.mu.Lock(); s.t0, s.count = t, true; s.mu.Unlock() }

func (s *timedAlerts) latencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.lat)
	slices.Sort(out)
	return out
}

func (s *timedAlerts) fired(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count {
		d := time.Since(s.t0)
		for range n {
			s.lat = append(s.lat, d)
		}
	}
}
