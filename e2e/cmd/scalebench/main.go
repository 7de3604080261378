// Command scalebench measures `marketd all` at exchange scale against the
// local Binance simulator (e2e/cmd/exchangesim, REST and streams), both
// run as processes of their own, marketd on a fresh schema and Redis
// database:
//
//  1. cold: from the process start until every spot symbol (the crypto
//     analytics source; the simulator serves every one enough history) has
//     a report in each crypto style (counted in Postgres every 2 s);
//  2. steady: over -window (extended to the first 15-minute close after
//     it starts, unless -extend=false, and to -until), at every minute close -per-minute sampled
//     symbols' closed 1m candle is polled in GET /ohlcv until it shows the
//     close stored at or after the close (Postgres): close → visible; at
//     every close of a scored timeframe (15m scalp, 1h intraday, 4h swing,
//     1d position) the reports of that style are watched: close → first
//     rewrite (updated_at) of each, across the universe;
//  3. the CPU seconds of marketd per minute (/proc/<pid>/stat) during the
//     cold start and the steady window, the schema's size
//     (pg_total_relation_size of its tables) before and after the window
//     scaled to a day, the candle rows a day at steady state (the rows of
//     each timeframe that opened in the window, per open of that
//     timeframe, times its opens a day: history loads excluded) and their
//     bytes (the candles table's bytes a row), and the simulator's /sim/stats: peak weight per
//     window of each budget, 429s, 418s, stream connections and pushes.
//
// With -clock-at HH:MM the run's clock is shifted so that it starts at
// that time of day: the simulator's (-clock-offset), marketd's
// (MARKET_BENCH_CLOCK_OFFSET, honoured by a -tags benchclock build,
// -clock-bin) and the bench's own. A close that falls outside the
// session, such as the daily one (all four styles at 00:00 UTC), is then
// measured at any hour: -clock-at 23:35 -until 00:07.
//
// With -synthetic KEY=VALUE (repeatable; e.g. MARKET_SYNTHETIC_ASSETS=2000
// where the build has that setting) it measures the same on the synthetic
// feed with those settings, after the simulator run.
//
//	go run ./e2e/cmd/scalebench -bin bin/marketd -sim-bin bin/exchangesim [-spot 1200] [-perpetual 400] [-window 5m] \
//	    [-env KEY=VALUE ...] [-synthetic MARKET_SYNTHETIC_ASSETS=2000] [-nice -10]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketscreener/market/e2e/benchkit"
	"github.com/marketscreener/market/e2e/exchangesim"
)

type options struct {
	bin, simBin           string
	simAddr               string
	spot, perp            int
	databaseURL, redisURL string
	httpPort, opsPort     int
	coldLimit, window     time.Duration
	perMinute             int
	logLevel              string
	env, synthetic        benchkit.EnvFlag
	skipSim, extend       bool
	until                 string
	nice                  int
	clockBin, clockAt     string
	markets               string
	alpacaAssets          int
	alpacaPlan            string
	oandaPairs            int
	warmupUntil           string
	stockColdLimit        time.Duration
	stockPerMinute        int
	importMonths          int
	importSymbols         int
	importConcurrency     int
}

// clockOffset shifts the clock of the run (-clock-at): the simulator's,
// marketd's (MARKET_BENCH_CLOCK_OFFSET) and the bench's own, so a close
// such as the daily one at 00:00 UTC can be measured at any hour.
// Postgres's now() (a candle row's updated_at) stays on the wall clock.
var clockOffset time.Duration

// now is the run's clock.
func now() time.Time { return time.Now().Add(clockOffset) }

// styles are the crypto styles and the timeframe each scores.
var styles = []struct {
	name, label string
	tf          time.Duration
}{{"scalp", "15m", 15 * time.Minute}, {"intraday", "1h", time.Hour}, {"swing", "4h", 4 * time.Hour}, {"position", "1d", 24 * time.Hour}}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/marketd", "the marketd binary")
	flag.StringVar(&o.simBin, "sim-bin", "bin/exchangesim", "the simulator binary (go build ./e2e/cmd/exchangesim)")
	flag.StringVar(&o.simAddr, "sim-addr", "127.0.0.1:19500", "the simulator's loopback address")
	flag.IntVar(&o.spot, "spot", 1200, "spot pairs of the simulated universe")
	flag.IntVar(&o.perp, "perpetual", 400, "USDT-M perpetuals of the simulated universe")
	flag.StringVar(&o.databaseURL, "database-url", envOr("MARKET_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "Postgres database (a schema of its own is created per run)")
	flag.StringVar(&o.redisURL, "redis-url", envOr("MARKET_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"), "Redis; a database is leased like the tests do")
	flag.IntVar(&o.httpPort, "http-port", 19130, "marketd's public port")
	flag.IntVar(&o.opsPort, "ops-port", 19131, "marketd's ops port")
	flag.DurationVar(&o.coldLimit, "cold-limit", 10*time.Minute, "give up waiting for every report after this long")
	flag.DurationVar(&o.window, "window", 5*time.Minute, "steady-state window (extended to the first 15-minute close in it, plus a minute)")
	flag.IntVar(&o.perMinute, "per-minute", 8, "symbols whose closed 1m candle is timed at every minute close")
	flag.StringVar(&o.logLevel, "log-level", "warn", "MARKET_LOG_LEVEL of marketd (its log is kept in the temp directory)")
	flag.Var(&o.env, "env", "KEY=VALUE added to marketd's environment in the simulator run (repeatable)")
	flag.Var(&o.synthetic, "synthetic", "KEY=VALUE: also measure the synthetic feed with these settings (repeatable), e.g. MARKET_SYNTHETIC_ASSETS=2000")
	flag.BoolVar(&o.extend, "extend", true, "extend the window to the first 15-minute close in it (the scalp rescoring)")
	flag.StringVar(&o.until, "until", "", "extend the steady window to at least this UTC time (HH:MM, e.g. 20:06 to take in a 4h close at 20:00)")
	flag.IntVar(&o.nice, "nice", 0, "run marketd under nice(1) with this niceness (e.g. -10 on a machine shared with other work; below 0 needs root)")
	flag.BoolVar(&o.skipSim, "skip-sim", false, "skip the simulator run (with -synthetic: the synthetic run alone)")
	flag.StringVar(&o.clockAt, "clock-at", "", "run on a clock shifted to this UTC time of day at the start (HH:MM, e.g. 23:35 with -until 00:07 for the daily close): "+
		"the simulator and marketd alike, marketd from -clock-bin")
	flag.StringVar(&o.clockBin, "clock-bin", "bin/marketd-benchclock", "marketd built with -tags benchclock, run when -clock-at is set")
	flag.StringVar(&o.markets, "markets", "crypto", "markets served from the simulator at once: crypto (Binance), stocks (Alpaca), forex (OANDA), comma-separated")
	flag.IntVar(&o.alpacaAssets, "alpaca-assets", 11500, "the simulator's active Alpaca equities (with -markets stocks)")
	flag.StringVar(&o.alpacaPlan, "alpaca-plan", "free", "the simulator's Alpaca plan: free (200 data requests a minute, IEX) or paid")
	flag.IntVar(&o.oandaPairs, "oanda-pairs", 68, "the simulator's OANDA currency pairs (with -markets forex)")
	flag.StringVar(&o.warmupUntil, "warmup-until", "", "end the warm-up (the cold starts) at this UTC time of day at the latest (HH:MM), so a close after it is in the steady window")
	flag.DurationVar(&o.stockColdLimit, "stock-cold-limit", 30*time.Minute, "give up waiting for every stock report after this long")
	flag.IntVar(&o.stockPerMinute, "stock-per-minute", 4, "stock series of each kind (streamed, polled) whose closed 1m bar is timed at every minute close in the session")
	flag.IntVar(&o.importMonths, "import-months", 0, "run `marketd import` of this many months of 1d, 4h and 1h from the simulator's archive during the steady window, "+
		"which lasts until it ends (0: no import)")
	flag.IntVar(&o.importSymbols, "import-symbols", 80, "the archive's symbols (the universe's first spot pairs) with -import-months")
	flag.IntVar(&o.importConcurrency, "import-concurrency", 2, "marketd import --concurrency")
	flag.Parse()
	if o.clockAt != "" {
		o.bin = o.clockBin
	}
	var rs []*result
	if !o.skipSim {
		shiftClock(o)
		r, err := runSim(o)
		if err != nil {
			log.Fatal(err)
		}
		rs = append(rs, r)
	}
	if len(o.synthetic) > 0 {
		env := map[string]string{"MARKET_FEEDS": "synthetic"}
		for k, v := range o.synthetic {
			env[k] = v
		}
		shiftClock(o)
		r := &result{name: "synthetic " + strings.Join(o.synthetic.Pairs(), " "), clock: clockOffset, markets: marketSet{crypto: true}}
		if err := withDeployment(o, env, func(d *deployment) error { return d.measure(o, r) }); err != nil {
			log.Fatal(err)
		}
		rs = append(rs, r)
	}
	report(os.Stdout, rs)
}

// shiftClock sets clockOffset so that a run starting now starts at
// -clock-at on its clock (each run: the synthetic one follows the
// simulator's).
func shiftClock(o options) {
	if o.clockAt == "" {
		return
	}
	wall := time.Now().UTC()
	var target time.Time
	if at, err := time.Parse("15:04", o.clockAt); err == nil {
		target = time.Date(wall.Year(), wall.Month(), wall.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)
	} else if target, err = time.Parse("2006-01-02T15:04", o.clockAt); err != nil {
		log.Fatalf("-clock-at %q: want HH:MM or YYYY-MM-DDTHH:MM (UTC)", o.clockAt)
	}
	clockOffset = target.Sub(wall).Round(time.Minute)
	log.Printf("clock shifted by %s: the run starts at %s UTC on its clock (marketd: %s)", clockOffset, now().UTC().Format("2006-01-02 15:04:05 Mon"), o.bin)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// result is one run's figures.
type result struct {
	name                                string
	target                              int // spot symbols to be scored
	cold                                time.Duration
	coldMissing                         string // what was not scored within -cold-limit
	coldCPU                             float64
	steady                              time.Duration
	steadyCPU                           float64
	candle                              map[string][]time.Duration // sample group → close → visible
	candleMissing                       map[string]int
	candleNoBar                         map[string]int             // stock minutes without a trade (no bar to time)
	rescore                             map[string][]time.Duration // market and style → close → rewrite
	rescoreMiss                         map[string]int
	rescoreCloses                       map[string][]closeRescore // market and style → each close's own figures
	closes                              []scoredClose
	colds                               []*coldFigure // stocks and forex
	warmEnd                             time.Duration // since the start: the mark of the simulator's after-warm-up figures
	warmCut                             bool          // the warm-up was ended by -warmup-until
	rssCold, rssSteady, rssHWM, rssLast int64         // kB
	load                                loadStats     // the machine's, sampled every 2 s over the run
	markets                             marketSet
	simRun                              bool
	simAddr                             string
	bytesPerDay                         float64
	candleRows                          []tfRows // per timeframe, steady state
	candleRowSize                       float64  // bytes a candle row, indexes included
	sim                                 *exchangesim.Stats
	imp                                 *importRun    // -import-months
	clock                               time.Duration // the run's clock offset (-clock-at)
}

// runSim measures marketd against the simulator process.
func runSim(o options) (*result, error) {
	stop, err := startSim(o)
	if err != nil {
		return nil, err
	}
	defer stop()
	host := "127.0.0.1:" + o.simAddr[strings.LastIndexByte(o.simAddr, ':')+1:]
	m, err := parseMarkets(o.markets)
	if err != nil {
		return nil, err
	}
	env := m.feedEnv(host, o.alpacaPlan)
	importFeedURL(o, env, host)
	for k, v := range o.env {
		env[k] = v
	}
	var parts []string
	if m.crypto {
		parts = append(parts, fmt.Sprintf("%d spot + %d perpetual", o.spot, o.perp))
	}
	if m.stocks {
		parts = append(parts, fmt.Sprintf("%d Alpaca equities (%s plan)", o.alpacaAssets, o.alpacaPlan))
	}
	if m.forex {
		parts = append(parts, fmt.Sprintf("%d OANDA pairs", o.oandaPairs))
	}
	r := &result{name: "simulator " + strings.Join(parts, ", "), clock: clockOffset, markets: m, simRun: true, simAddr: o.simAddr}
	err = withDeployment(o, env, func(d *deployment) error {
		if err := d.measure(o, r); err != nil {
			return err
		}
		st, err := simStats(o.simAddr)
		r.sim = st
		return err
	})
	return r, err
}

// startSim runs the simulator binary until stop.
func startSim(o options) (stop func(), err error) {
	cmd := exec.Command(o.simBin, "-addr", o.simAddr, "-spot", fmt.Sprint(o.spot), "-perpetual", fmt.Sprint(o.perp),
		"-clock-offset", clockOffset.String(), "-alpaca-assets", fmt.Sprint(o.alpacaAssets), "-alpaca-plan", o.alpacaPlan,
		"-oanda-pairs", fmt.Sprint(o.oandaPairs))
	cmd.Args = append(cmd.Args, simArchiveArgs(o)...)
	logFile, err := os.CreateTemp("", "scalebench-sim-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		logFile.Close()
		log.Printf("simulator log: %s", logFile.Name())
	}
	for deadline := now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := simStats(o.simAddr); err == nil {
			return stop, nil
		}
		if now().After(deadline) {
			stop()
			return nil, errors.New("the simulator did not answer within 30 s")
		}
	}
}

func simStats(addr string) (*exchangesim.Stats, error) {
	resp, err := http.Get("http://" + addr + "/sim/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st exchangesim.Stats
	return &st, json.NewDecoder(resp.Body).Decode(&st)
}

// deployment is one marketd process on a schema and Redis database of its own.
type deployment struct {
	vars   map[string]string
	dbURL  string
	schema string
	key    string
	proc   *exec.Cmd
	start  time.Time
	base   string
	http   *http.Client
	db     *pgxpool.Pool // the bench's own reads (concurrent)
}

func withDeployment(o options, extra map[string]string, fn func(*deployment) error) (err error) {
	ctx := context.Background()
	d := &deployment{schema: "scale_" + benchkit.RandomHex(6), http: &http.Client{Timeout: 10 * time.Second},
		base: fmt.Sprintf("http://127.0.0.1:%d/api/v1/public", o.httpPort)}
	if err := benchkit.ExecSQL(ctx, o.databaseURL, "CREATE SCHEMA "+d.schema); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, benchkit.ExecSQL(context.Background(), o.databaseURL, "DROP SCHEMA "+d.schema+" CASCADE"))
	}()
	redisURL, release, err := benchkit.LeaseRedisDB(ctx, o.redisURL, o.coldLimit+o.stockColdLimit+o.window+time.Hour)
	if err != nil {
		return err
	}
	defer release()
	u, _ := url.Parse(o.databaseURL)
	q := u.Query()
	q.Set("search_path", d.schema)
	u.RawQuery = q.Encode()
	d.dbURL = u.String()
	d.vars = map[string]string{
		"MARKET_DATABASE_URL": d.dbURL, "MARKET_REDIS_URL": redisURL, "MARKET_SECRET_KEY": benchkit.RandomHex(32),
		"MARKET_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", o.httpPort), "MARKET_OPS_ADDR": fmt.Sprintf("127.0.0.1:%d", o.opsPort),
		"MARKET_LOG_LEVEL": o.logLevel, "MARKET_STATS_INTERVAL": "0",
	}
	if clockOffset != 0 {
		d.vars["MARKET_BENCH_CLOCK_OFFSET"] = clockOffset.String()
	}
	for k, v := range extra {
		d.vars[k] = v
	}
	if err := d.prepare(o); err != nil {
		return err
	}
	if d.db, err = pgxpool.New(ctx, d.dbURL); err != nil {
		return err
	}
	defer d.db.Close()
	// The server's autovacuum, where it is off (as on the CI server): a
	// deployment runs with it.
	vacuumStop, err := benchkit.Autovacuum(ctx, o.databaseURL, d.schema)
	if err != nil {
		return err
	}
	defer func() { log.Printf("autovacuum of %s: %s", d.schema, vacuumStop()) }()
	stop, err := d.run(o)
	if err != nil {
		return err
	}
	defer stop()
	return fn(d)
}

// prepare migrates the schema and issues an enterprise key.
func (d *deployment) prepare(o options) error {
	if _, err := d.cli(o.bin, "migrate"); err != nil {
		return err
	}
	clientID, err := d.cli(o.bin, "clients", "create", "--org", "scalebench", "--tier", "enterprise", "--rate-limit", "100000")
	if err != nil {
		return err
	}
	d.key, err = d.cli(o.bin, "keys", "issue", "--client", clientID)
	return err
}

// run starts `marketd all`; stop interrupts it.
func (d *deployment) run(o options) (stop func(), err error) {
	logFile, err := os.CreateTemp("", "scalebench-marketd-*.log")
	if err != nil {
		return nil, err
	}
	d.proc = exec.Command(o.bin, "all")
	if o.nice != 0 {
		d.proc = exec.Command("nice", "-n", strconv.Itoa(o.nice), o.bin, "all")
	}
	d.proc.Env = d.environ()
	d.proc.Stdout, d.proc.Stderr = logFile, logFile
	d.start = now()
	if err := d.proc.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	return func() {
		_ = d.proc.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = d.proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = d.proc.Process.Kill()
			<-done
		}
		logFile.Close()
		log.Printf("marketd log: %s", logFile.Name())
	}, nil
}

func (d *deployment) environ() []string { return benchkit.Environ(d.vars) }

func (d *deployment) cli(bin string, args ...string) (string, error) {
	return benchkit.CLI(d.vars, bin, args...)
}

// getJSON GETs a public path into out.
func (d *deployment) getJSON(path string, out any) (time.Time, error) {
	req, _ := http.NewRequest(http.MethodGet, d.base+path, nil)
	req.Header.Set("X-API-Key", d.key)
	resp, err := d.http.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	at := now()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return at, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return at, json.Unmarshal(b, out)
}

func (d *deployment) cpu() time.Duration {
	c, err := benchkit.ProcCPU(d.proc.Process.Pid)
	if err != nil {
		log.Printf("cpu: %v", err)
	}
	return c
}

// measure runs the cold start and the steady window.
func (d *deployment) measure(o options, r *result) error {
	var ref *reference
	if r.markets.stocks || r.markets.forex {
		var err error
		if ref, err = newReference(o, r.markets); err != nil {
			return err
		}
		defer ref.close()
		r.colds = d.stockAndForexCold(o, r.markets, ref)
	}
	mem := d.sampleMemory()
	warmBy, cut := untilTime(o.warmupUntil, d.start)
	var syms []string
	if r.markets.crypto {
		var err error
		if syms, err = d.spotSymbols(); err != nil {
			return err
		}
		r.target = len(syms)
		d.waitScored(o, r, warmBy)
	}
	for _, c := range r.colds { // the warm-up ends with every cold start, or at -warmup-until
		if !cut {
			<-c.finished
			continue
		}
		select {
		case <-c.finished:
		case <-time.After(warmBy.Sub(now())):
		}
	}
	c0, size0, t0 := d.cpu(), d.schemaSize(), now()
	r.warmEnd, r.warmCut = t0.Sub(d.start), cut && !t0.Before(warmBy)
	mem.steadyFromNow()
	if r.simRun {
		if err := simMark(r.simAddr); err != nil {
			log.Printf("simulator mark: %v", err)
		}
	}
	r.coldCPU = c0.Seconds() / t0.Sub(d.start).Minutes()
	log.Printf("%s: warm-up ended after %s (cut by -warmup-until: %v); crypto cold start %s (%s), CPU %.1f s/min; steady window from %s",
		r.name, r.warmEnd.Round(time.Second), r.warmCut, r.cold.Round(time.Second), r.coldMissing, r.coldCPU, t0.UTC().Format(time.TimeOnly))
	end := t0.Add(o.window)
	if q := t0.Truncate(15 * time.Minute).Add(15*time.Minute + 90*time.Second); o.extend && q.After(end) {
		end = q
	}
	if u, ok := untilTime(o.until, t0); ok && u.After(end) {
		end = u
	}
	var imp *importRun
	if r.simRun && o.importMonths > 0 {
		imp = &importRun{}
		r.imp = imp
		log.Printf("%s: the import starts at %s (after -window, the baseline) and the window lasts until it ends", r.name, end.UTC().Format(time.TimeOnly))
	}
	log.Printf("%s: steady window until %s", r.name, end.UTC().Format(time.TimeOnly))
	samples := minuteSamples{}
	if r.markets.crypto {
		for _, s := range spread(syms, 5*o.perMinute) {
			samples[groupCrypto] = append(samples[groupCrypto], series{"crypto", "binance", s})
		}
	}
	if ref != nil {
		d.stockAndForexSamples(o, r.markets, ref, samples)
	}
	perMinute := map[string]int{groupCrypto: o.perMinute, groupStreamed: o.stockPerMinute, groupPolled: o.stockPerMinute, groupForex: 2}
	r.candle, r.candleMissing, r.candleNoBar = map[string][]time.Duration{}, map[string]int{}, map[string]int{}
	r.rescore, r.rescoreMiss, r.rescoreCloses = map[string][]time.Duration{}, map[string]int{}, map[string][]closeRescore{}
	r.closes = scoredCloses(r.markets)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for b, i := t0.Truncate(time.Minute).Add(time.Minute), 0; b.Before(end.Add(-time.Minute)) || !imp.finished(); b, i = b.Add(time.Minute), i+1 {
		time.Sleep(b.Sub(now()))
		if imp != nil && !imp.started() && !b.Before(end.Add(-time.Minute)) {
			d.startImport(o, imp)
		}
		during, before := imp.running(b), imp != nil && !imp.started()
		open := b.Add(-time.Minute)
		for group, list := range samples {
			if len(list) == 0 || group == groupForex && !forexOpen(open) ||
				(group == groupStreamed || group == groupPolled) && !inSession(open) {
				continue
			}
			for j := range min(perMinute[group], len(list)) {
				s := list[(i*perMinute[group]+j)%len(list)]
				wg.Go(func() {
					if s.market == "stocks" && !ref.stockBar(s.symbol, open) {
						mu.Lock()
						r.candleNoBar[group]++
						mu.Unlock()
						return
					}
					lat, ok := d.closedCandleLatency(s, b)
					if group == groupCrypto && (during || before) {
						imp.sample(lat, ok, during)
					}
					mu.Lock()
					defer mu.Unlock()
					if ok {
						r.candle[group] = append(r.candle[group], lat)
					} else {
						r.candleMissing[group]++
					}
				})
			}
		}
		for _, sc := range r.closes {
			if sc.at(b) {
				wg.Go(func() {
					lats, missing, target, rewrites := d.rescoreLatency(sc, b)
					mu.Lock()
					defer mu.Unlock()
					r.rescore[sc.key()] = append(r.rescore[sc.key()], lats...)
					r.rescoreMiss[sc.key()] += missing
					r.rescoreCloses[sc.key()] = append(r.rescoreCloses[sc.key()], closeRescore{at: b, lats: lats, missing: missing, target: target, rewrites: rewrites})
				})
			}
		}
	}
	wg.Wait()
	if r.imp != nil && now().After(end) {
		end = now()
	}
	time.Sleep(end.Sub(now()))
	c1, size1, t1 := d.cpu(), d.schemaSize(), now()
	r.steady = t1.Sub(t0)
	r.steadyCPU = (c1 - c0).Seconds() / r.steady.Minutes()
	r.bytesPerDay = float64(size1-size0) / r.steady.Hours() * 24
	r.candleRows, r.candleRowSize = d.candleGrowth(t0, t1)
	r.rssCold, r.rssSteady, r.rssHWM, r.rssLast, r.load = mem.stop()
	return nil
}

// untilTime is the next time of day HH:MM (UTC) at or after from.
func untilTime(hhmm string, from time.Time) (time.Time, bool) {
	if hhmm == "" {
		return time.Time{}, false
	}
	t, err := time.Parse("15:04", hhmm)
	if err != nil {
		log.Fatalf("-until %q: want HH:MM (UTC)", hhmm)
	}
	from = from.UTC()
	u := time.Date(from.Year(), from.Month(), from.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
	if u.Before(from) {
		u = u.Add(24 * time.Hour)
	}
	return u, true
}

// tfRows is a timeframe's candle rows at steady state.
type tfRows struct {
	tf      string
	opened  int64   // rows that opened in the window
	opens   int     // opens of the timeframe in the window
	series  int64   // series of the timeframe stored
	perDay  float64 // rows a day
	counted bool    // perDay from opened/opens (else series × opens a day)
}

// timeframes are the stored candle timeframes and their lengths (the
// week's opens are Mondays; a day holds 1/7 of them).
var timeframes = []struct {
	name string
	d    time.Duration
}{{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"15m", 15 * time.Minute}, {"30m", 30 * time.Minute},
	{"1h", time.Hour}, {"4h", 4 * time.Hour}, {"1d", 24 * time.Hour}, {"1w", 7 * 24 * time.Hour}}

// candleGrowth is the candle rows a day at steady state, per timeframe:
// the rows that opened in the window (every one is new, whatever history
// loads still ran) per open of the timeframe in the window, times its
// opens a day; a timeframe that did not open in the window counts its
// stored series once a period. And the bytes a candle row costs
// (pg_total_relation_size over the rows, so dead rows of updated open
// candles not yet vacuumed are in it).
func (d *deployment) candleGrowth(t0, t1 time.Time) ([]tfRows, float64) {
	ctx := context.Background()
	opened, series := map[string]int64{}, map[string]int64{}
	scan := func(q string, into map[string]int64, args ...any) {
		rows, err := d.db.Query(ctx, q, args...)
		if err != nil {
			log.Printf("candle growth: %v", err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var tf string
			var n int64
			if rows.Scan(&tf, &n) == nil {
				into[tf] = n
			}
		}
	}
	// Per timeframe, the opens in [t0, the last open before t1): the
	// candle that opened last may not be stored yet at t1.
	for _, tf := range timeframes {
		var n int64
		if err := d.db.QueryRow(ctx, `SELECT count(*) FROM candles WHERE timeframe = $1 AND open_time >= $2 AND open_time < $3`,
			tf.name, t0, t1.Truncate(tf.d)).Scan(&n); err == nil {
			opened[tf.name] = n
		}
	}
	scan(`SELECT timeframe, count(*) FROM (SELECT DISTINCT market, exchange, symbol, timeframe FROM candles) s GROUP BY timeframe`, series)
	var out []tfRows
	for _, tf := range timeframes {
		r := tfRows{tf: tf.name, opened: opened[tf.name], series: series[tf.name]}
		for b := t0.Truncate(tf.d); b.Before(t1.Truncate(tf.d)); b = b.Add(tf.d) {
			if !b.Before(t0) && (tf.name != "1w" || b.Weekday() == time.Monday) {
				r.opens++
			}
		}
		perDay := float64(24*time.Hour) / float64(tf.d)
		if r.opens > 0 {
			r.perDay, r.counted = float64(r.opened)/float64(r.opens)*perDay, true
		} else {
			r.perDay = float64(r.series) * perDay
		}
		out = append(out, r)
	}
	var size float64
	if err := d.db.QueryRow(ctx, `SELECT pg_total_relation_size('candles')::float8 / greatest(count(*), 1) FROM candles`).Scan(&size); err != nil {
		log.Printf("candle row size: %v", err)
	}
	return out, size
}

// spotSymbols lists the binance spot screener (the crypto analytics
// source) once it is filled.
func (d *deployment) spotSymbols() ([]string, error) {
	deadline := now().Add(5 * time.Minute)
	for {
		var rows []struct {
			Symbol string `json:"symbol"`
		}
		_, err := d.getJSON("/screener/crypto/binance/spot", &rows)
		if err == nil && len(rows) > 0 {
			out := make([]string, len(rows))
			for i, row := range rows {
				out[i] = row.Symbol
			}
			slices.Sort(out)
			return out, nil
		}
		if now().After(deadline) {
			return nil, fmt.Errorf("no spot screener after 5 minutes: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// waitScored polls the reports per crypto style until each style has one
// per target symbol, or -cold-limit.
func (d *deployment) waitScored(o options, r *result, deadline time.Time) {
	ctx := context.Background()
	for {
		counts := map[string]int{}
		rows, err := d.db.Query(ctx, `SELECT style, count(*) FROM analytics_reports WHERE market = 'crypto' GROUP BY style`)
		if err == nil {
			for rows.Next() {
				var s string
				var n int
				if rows.Scan(&s, &n) == nil {
					counts[s] = n
				}
			}
			rows.Close()
		}
		var short []string
		for _, st := range styles {
			if counts[st.name] < r.target {
				short = append(short, fmt.Sprintf("%s %d/%d", st.name, counts[st.name], r.target))
			}
		}
		r.cold = now().Sub(d.start)
		if len(short) == 0 {
			r.coldMissing = "all scored"
			return
		}
		if r.cold > o.coldLimit || !deadline.IsZero() && now().After(deadline) {
			r.coldMissing = "NOT all scored: " + strings.Join(short, ", ")
			return
		}
		time.Sleep(2 * time.Second)
	}
}

// closedCandleLatency polls GET /ohlcv for the 1m candle of sym closing
// at b until it shows the close stored at or after b (the final write);
// false when that did not happen within 90 s. The stored close is looked
// up after every poll until it is there (one primary-key read), so the
// figure is the first response that showed it.
func (d *deployment) closedCandleLatency(s series, b time.Time) (time.Duration, bool) {
	open := b.Add(-time.Minute)
	var final *float64
	for now().Sub(b) < 90*time.Second {
		var cs []struct {
			Time  time.Time `json:"time"`
			Close float64   `json:"close"`
		}
		at, err := d.getJSON("/ohlcv/"+s.market+"/"+s.exchange+"/"+s.symbol+"/1m?limit=3", &cs)
		if final == nil {
			final = d.storedFinal(s, open, b)
		}
		for _, c := range cs {
			if err == nil && final != nil && c.Time.Equal(open) && c.Close == *final {
				return at.Sub(b), true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, false
}

// storedFinal is the stored close of a candle if it was written at or
// after its close, nil otherwise (updated_at is Postgres's wall clock).
func (d *deployment) storedFinal(s series, open, closeAt time.Time) *float64 {
	var c float64
	err := d.db.QueryRow(context.Background(), `SELECT close FROM candles WHERE market = $1 AND exchange = $2
		AND symbol = $3 AND timeframe = '1m' AND open_time = $4 AND updated_at >= $5`, s.market, s.exchange, s.symbol, open, closeAt.Add(-clockOffset)).Scan(&c)
	if err != nil {
		return nil
	}
	return &c
}

// closeRescore is the rescoring of one close of a style's timeframe.
type closeRescore struct {
	at      time.Time
	lats    []time.Duration
	missing int
	target  int // the reports there were at the close
	// rewrites is how many reports of the style were written by runs that
	// started at or after the close, within the watch (its archive rows):
	// above target, some were scored twice (a state before the final one,
	// then the final one).
	rewrites int
}

// rescoreLatency watches the reports of a market's style from the close at b for
// sc.watch: when each report there was at b was first seen rewritten after b (committed
// and readable; polled every 250 ms, the time taken once the query
// answered), and how many of target were not. A report counts as
// rewritten when its updated_at differs from the one it had at b: a run
// stamps every report it writes with its own start, which may fall just
// before the close (a run that took the lock then and read the closed
// candles after it), and a run over the whole universe commits its
// reports batch by batch for as long as it takes.
func (d *deployment) rescoreLatency(sc scoredClose, b time.Time) ([]time.Duration, int, int, int) {
	const q = `SELECT symbol, updated_at FROM analytics_reports
		WHERE market = $1 AND style = $2 AND updated_at >= $3`
	since := b.Add(-5 * time.Minute) // a run's start, at most this long before its last write
	atClose := map[string]time.Time{}
	if rows, err := d.db.Query(context.Background(), q, sc.market, sc.style, time.Time{}); err == nil {
		for rows.Next() {
			var sym string
			var at time.Time
			if rows.Scan(&sym, &at) == nil {
				atClose[sym] = at
			}
		}
		rows.Close()
	}
	first := map[string]time.Duration{}
	target := len(atClose)
	for now().Sub(b) < sc.watch && len(first) < target {
		rows, err := d.db.Query(context.Background(), q, sc.market, sc.style, since)
		seenAt := now().Sub(b) // the answer's snapshot is older: an upper bound
		if err == nil {
			for rows.Next() {
				var sym string
				var at time.Time
				if rows.Scan(&sym, &at) != nil {
					continue
				}
				// Only the reports there were at the close: a report
				// first written after it is a cold start's, not a rescoring.
				if had, ok := atClose[sym]; ok && !at.Equal(had) {
					if _, seen := first[sym]; !seen {
						first[sym] = seenAt
					}
				}
			}
			rows.Close()
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Every report written is archived, stamped with its run's start.
	rewrites := 0
	if err := d.db.QueryRow(context.Background(), `SELECT count(*) FROM analytics_report_archive
		WHERE market = $1 AND style = $2 AND published_at >= $3 AND published_at < $4`,
		sc.market, sc.style, b, b.Add(sc.watch)).Scan(&rewrites); err != nil {
		log.Printf("rewrites at %s: %v", b.Format("15:04"), err)
	}
	return slices.Collect(maps.Values(first)), target - len(first), target, rewrites
}

// schemaSize is the bytes of the schema's tables (with indexes and TOAST).
func (d *deployment) schemaSize() int64 {
	var n int64
	err := d.db.QueryRow(context.Background(), `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relkind IN ('r', 'm')`,
		d.schema).Scan(&n)
	if err != nil {
		log.Printf("schema size: %v", err)
	}
	return n
}

// spread picks n symbols evenly over syms.
func spread(syms []string, n int) []string {
	if len(syms) <= n {
		return syms
	}
	out := make([]string, n)
	for i := range out {
		out[i] = syms[i*len(syms)/n]
	}
	return out
}

// report prints the figures as a Markdown table, a column per run.
func report(w io.Writer, rs []*result) {
	for _, r := range rs {
		if r.clock != 0 {
			fmt.Fprintf(w, "\n%s: clock shifted by %s (-clock-at); its times of day below are the shifted clock's.\n", r.name, r.clock)
		}
	}
	fmt.Fprintf(w, "\n| measure | goal |")
	for _, r := range rs {
		fmt.Fprintf(w, " %s |", r.name)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(rs)))
	row := func(label, goal string, f func(*result) string) {
		fmt.Fprintf(w, "| %s | %s |", label, goal)
		for _, r := range rs {
			fmt.Fprintf(w, " %s |", f(r))
		}
		fmt.Fprintln(w)
	}
	row("cold start → every spot symbol has a report in every crypto style", "< 5 min", func(r *result) string {
		if !r.markets.crypto {
			return "—"
		}
		return fmt.Sprintf("%s (%d symbols; %s) %s", r.cold.Round(time.Second), r.target, r.coldMissing,
			verdict(r.coldMissing == "all scored" && r.cold < 5*time.Minute))
	})
	var coldNames []string
	goals := map[string]string{}
	for _, r := range rs {
		for _, c := range r.colds {
			if !slices.Contains(coldNames, c.name) {
				coldNames = append(coldNames, c.name)
				goals[c.name] = c.goal
			}
		}
	}
	for _, name := range coldNames {
		row(name, goals[name], func(r *result) string {
			for _, c := range r.colds {
				if c.name != name {
					continue
				}
				took, done, detail := c.get()
				select {
				case <-c.finished:
				default:
					return fmt.Sprintf("not yet at %s (%s) %s", took.Round(time.Second), detail, verdict(false))
				}
				if !done {
					return fmt.Sprintf("NOT reached within %s (%s) %s", c.limit, detail, verdict(false))
				}
				out := took.Round(time.Second).String()
				if lim, ok := parseGoal(c.goal); ok {
					out += " " + verdict(took < lim)
				}
				return out
			}
			return "—"
		})
	}
	row("warm-up (every cold start above), after which the simulator's since-mark figures count", "", func(r *result) string {
		if r.warmCut {
			return fmt.Sprintf("%s, cut by -warmup-until", r.warmEnd.Round(time.Second))
		}
		return r.warmEnd.Round(time.Second).String()
	})
	for _, group := range []string{groupCrypto, groupStreamed, groupPolled, groupForex} {
		row("closed 1m candle → visible in GET /ohlcv, "+group+", p50 / p95 / max", "p95 < 3 s", func(r *result) string {
			ds := r.candle[group]
			if len(ds) == 0 && r.candleMissing[group] == 0 {
				return "—"
			}
			out := fmt.Sprintf("%s; %d not within 90 s", benchkit.Dist(ds), r.candleMissing[group])
			if n := r.candleNoBar[group]; n > 0 {
				out += fmt.Sprintf("; %d sampled minutes without a trade (no bar)", n)
			}
			return out + " " + verdict(len(ds) > 0 && r.candleMissing[group] == 0 && benchkit.Pct(ds, 0.95) < 3*time.Second)
		})
	}
	var closes []scoredClose
	for _, r := range rs {
		for _, sc := range r.closes {
			if !slices.ContainsFunc(closes, func(c scoredClose) bool { return c.key() == sc.key() }) {
				closes = append(closes, sc)
			}
		}
	}
	for _, sc := range closes {
		row(sc.label+" report rescored, p50 / p95 / max", "p95 < 5 s", func(r *result) string {
			k := sc.key()
			if len(r.rescore[k]) == 0 && r.rescoreMiss[k] == 0 {
				return "no close in the window"
			}
			out := fmt.Sprintf("%s; %d not within %s", benchkit.Dist(r.rescore[k]), r.rescoreMiss[k], sc.watch)
			if cs := r.rescoreCloses[k]; len(cs) > 0 {
				slices.SortFunc(cs, func(a, b closeRescore) int { return a.at.Compare(b.at) })
				var each []string
				for _, c := range cs {
					each = append(each, fmt.Sprintf("%s (%d reports, %d written): %s, %d not within %s", c.at.UTC().Format("15:04"), c.target,
						c.rewrites, benchkit.Dist(c.lats), c.missing, sc.watch))
				}
				out += "; per close: " + strings.Join(each, "; ")
			}
			return out + " " + verdict(r.rescoreMiss[k] == 0 && benchkit.Pct(r.rescore[k], 0.95) < 5*time.Second)
		})
	}
	if slices.ContainsFunc(rs, func(r *result) bool { return r.imp != nil }) {
		importRows(row)
	}
	row("marketd CPU s per minute, cold start / steady", "", func(r *result) string {
		return fmt.Sprintf("%.1f / %.1f (steady window %s)", r.coldCPU, r.steadyCPU, r.steady.Round(time.Second))
	})
	row("marketd RSS: peak VmRSS in the warm-up / in the steady window, VmHWM, VmRSS at the end", "", func(r *result) string {
		mb := func(kb int64) string { return fmt.Sprintf("%.0f MB", float64(kb)/1024) }
		return fmt.Sprintf("%s / %s, %s, %s", mb(r.rssCold), mb(r.rssSteady), mb(r.rssHWM), mb(r.rssLast))
	})
	row("the machine's 1-minute load average over the run (2 cores)", "", func(r *result) string { return r.load.String() })
	row("Postgres growth per day (schema size before and after the steady window, scaled)", "", func(r *result) string {
		return fmt.Sprintf("%.0f MB", r.bytesPerDay/1e6)
	})
	row("candle rows a day at the steady window's rate, every market (opened in the window per open × opens a day), × bytes a row", "", func(r *result) string {
		total := 0.0
		var parts []string
		for _, tf := range r.candleRows {
			total += tf.perDay
			how := fmt.Sprintf("%d opened in %d opens", tf.opened, tf.opens)
			if !tf.counted {
				how = fmt.Sprintf("%d series", tf.series)
			}
			parts = append(parts, fmt.Sprintf("%s %.0f (%s)", tf.tf, tf.perDay, how))
		}
		return fmt.Sprintf("%.2f M rows × %.0f B = %.0f MB a day: %s", total/1e6, r.candleRowSize, total*r.candleRowSize/1e6, strings.Join(parts, ", "))
	})
	budget := func(f exchangesim.FamilyStats) string {
		return fmt.Sprintf("%d / %d (%.0f %%), 429: %d, 418: %d", f.PeakWeight, f.Limit, 100*float64(f.PeakWeight)/float64(max(f.Limit, 1)), f.Refused429, f.Banned418)
	}
	simRow := func(label, goal string, f func(*exchangesim.Stats) string) {
		row(label, goal, func(r *result) string {
			if r.sim == nil {
				return "—"
			}
			return f(r.sim)
		})
	}
	simRow("spot weight: peak per minute / limit", "≤ 80 %, 0 429, 0 418", func(s *exchangesim.Stats) string { return budget(s.Spot) })
	simRow("USDⓈ-M weight: peak per minute / limit", "≤ 80 %, 0 429, 0 418", func(s *exchangesim.Stats) string { return budget(s.Futures) })
	simRow("futures/data: peak per 5 min / limit", "≤ 80 %, 0 429, 0 418", func(s *exchangesim.Stats) string { return budget(s.FuturesData) })
	afterWarm := func(f exchangesim.FamilyStats) string {
		m := f.SinceMark
		return fmt.Sprintf("%d / %d (%.0f %%), 429: %d, 418: %d %s", m.PeakWeight, f.Limit, pct(m.PeakWeight, f.Limit), m.Refused429, m.Banned418,
			verdict(pct(m.PeakWeight, f.Limit) <= 80 && m.Refused429 == 0 && m.Banned418 == 0))
	}
	simRow("after the warm-up: spot weight peak / limit, 429s, 418s", "≤ 80 %, 0 429, 0 418", func(s *exchangesim.Stats) string { return afterWarm(s.Spot) })
	simRow("after the warm-up: USDⓈ-M weight peak / limit, 429s, 418s", "≤ 80 %, 0 429, 0 418", func(s *exchangesim.Stats) string { return afterWarm(s.Futures) })
	alpaca := func(l exchangesim.AlpacaLimitStats, since bool) string {
		peak, n429, during := l.PeakRequests, l.Refused429, l.SentDuring429
		if since {
			peak, n429, during = l.SinceMark.PeakRequests, l.SinceMark.Refused429, l.SinceMark.SentDuring429
		}
		out := fmt.Sprintf("%d / %d (%.0f %%), 429: %d, sent inside a 429's window: %d", peak, l.Limit, pct(peak, l.Limit), n429, during)
		if since {
			out += " " + verdict(pct(peak, l.Limit) <= 80 && n429 == 0)
		}
		return out
	}
	alpacaRow := func(label string, f func(*exchangesim.Stats) string) {
		row(label, "≤ 80 % (160 of 200 on the free plan), 0 429 after the warm-up", func(r *result) string {
			if r.sim == nil || !r.markets.stocks {
				return "—"
			}
			return f(r.sim)
		})
	}
	alpacaRow("Alpaca market data: peak requests per key-minute / limit, whole run", func(s *exchangesim.Stats) string { return alpaca(s.Alpaca.Data, false) })
	alpacaRow("Alpaca market data: after the warm-up", func(s *exchangesim.Stats) string { return alpaca(s.Alpaca.Data, true) })
	alpacaRow("Alpaca trading API: peak requests per key-minute / limit, whole run", func(s *exchangesim.Stats) string { return alpaca(s.Alpaca.Trading, false) })
	alpacaRow("Alpaca trading API: after the warm-up", func(s *exchangesim.Stats) string { return alpaca(s.Alpaca.Trading, true) })
	row("Alpaca stream: connections, refusals, pushes, error codes", "one connection, 0 refused", func(r *result) string {
		if r.sim == nil || !r.markets.stocks {
			return "—"
		}
		b, _ := json.Marshal(r.sim.Alpaca.Stream)
		return "`" + string(b) + "`; REST errors `" + fmt.Sprint(r.sim.Alpaca.RESTErrors) + "`"
	})
	row("OANDA: peak requests per second / limit, 429s, refused connections (whole run; after the warm-up)", "≤ 80 %, 0 429", func(r *result) string {
		if r.sim == nil || !r.markets.forex {
			return "—"
		}
		o := r.sim.Oanda
		out := fmt.Sprintf("%d / %d, 429: %d, refused connections: %d", o.PeakPerSecond, o.LimitPerSecond, o.Refused429, o.RefusedConnections)
		if m := o.SinceMark; m != nil {
			out += fmt.Sprintf("; after: %d / %d, 429: %d, refused connections: %d %s", m.PeakPerSecond, o.LimitPerSecond, m.Refused429, m.RefusedConnections,
				verdict(pct(m.PeakPerSecond, o.LimitPerSecond) <= 80 && m.Refused429 == 0 && m.RefusedConnections == 0))
		}
		return out + fmt.Sprintf("; streams: %d open, %d prices, %d heartbeats", o.Streams.Open, o.Streams.Prices, o.Streams.Heartbeats)
	})
	streams := func(s exchangesim.StreamStats) string {
		return fmt.Sprintf("%d connections (%d open, %d refused), most streams on one %d/%d, %d pushes, %d breaches",
			s.Connections, s.Open, s.Refused429, s.MostStreams, s.MaxStreamsPerConn, s.Pushed, len(s.Breaches))
	}
	simRow("spot streams", "0 refused, 0 breaches", func(s *exchangesim.Stats) string { return streams(s.SpotStreams) })
	simRow("USDⓈ-M streams", "0 refused, 0 breaches", func(s *exchangesim.Stats) string { return streams(s.FuturesStreams) })
}

func pct(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }

// parseGoal reads a "< 2 min" goal.
func parseGoal(g string) (time.Duration, bool) {
	var n int
	var unit string
	if _, err := fmt.Sscanf(g, "< %d %s", &n, &unit); err != nil {
		return 0, false
	}
	switch unit {
	case "min":
		return time.Duration(n) * time.Minute, true
	case "s":
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}
