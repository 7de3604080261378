// Command latencybench measures the pipeline from a candle to a client's
// receiver, on real `marketd all` processes with the synthetic feed, for
// one binary or two (this branch and a baseline, e.g. main's, built from a
// git checkout), in one run:
//
//  1. cold: a fresh schema and Redis database; the binary migrates them
//     and creates an enterprise client and key with its own CLI; then
//     `marketd all` starts (defaults, MARKET_STATS_INTERVAL=0) and the
//     tool polls every market's analytics list (crypto in its four
//     styles) until each answers 200: the time from the process start;
//  2. cpu: in the same process, the CPU seconds (user + system, from
//     /proc/<pid>/stat) the process spends per minute over -cpu-window of
//     steady state: ingest, scoring, the scheduler and an idle api;
//  3. latency: a second fresh process with MARKET_CANDLE_INTERVAL=15s
//     (and -latency-score-interval, so that a tick does not race the
//     trigger: see BENCHMARKS.md) and a webhook subscription to a local
//     https receiver (this process, its own goroutines). Every 5 s it
//     primes -prime crypto swing reports: the stored verdict is set to one
//     the current score cannot hold and the report made 16 minutes old, so
//     that the next scoring of the asset (on its next candle write, or a
//     tick) writes a verdict event through the real path. It polls the
//     outbox every 20 ms; for each new event it reads the stored time
//     (updated_at) of the candle the event was scored on: candle stored →
//     event seen; and the receiver's arrival time of the event: event seen
//     → delivery received.
//
// marketd runs as its own process; the tool's Postgres polling and the
// receiver run in this one.
//
// The CPU step also counts the analytics reports each process rescored
// in its window (read from Postgres every 5 s), so that CPU is compared
// at the work done.
//
//	go run ./e2e/cmd/latencybench -bin bin/marketd [-baseline /tmp/main/marketd]
//	go run ./e2e/cmd/latencybench -together -skip-latency -bin bin/marketd -baseline /tmp/main/marketd \
//	    -variant MARKET_SCORE_TRIGGER=false -cpu-window 30m   # ticks alone, the trigger, and main, in one window
package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/e2e/benchkit"
)

type options struct {
	bin, baseline         string
	databaseURL, redisURL string
	httpPort, opsPort     int
	cpuWindow, latWindow  time.Duration
	settle                time.Duration
	prime                 int
	latencyScoreInterval  string
	baselineScoreInterval string
	skipCPU               bool
	skipLatency           bool
	logLevel              string
	repeat                int
	pprofDir              string
	pprofPort             int
	together              bool
	baselineEnv           benchkit.EnvFlag
	variants              variantFlag
	// barrier, when set, is called when the CPU window is about to start
	// and returns when it starts (-together: both processes' windows
	// start at the same instant).
	barrier func()
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/marketd", "the marketd binary under test")
	flag.StringVar(&o.baseline, "baseline", "", "a baseline marketd binary (e.g. main's), measured the same way first")
	flag.StringVar(&o.databaseURL, "database-url", envOr("MARKET_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "Postgres database (a schema of its own is created per run)")
	flag.StringVar(&o.redisURL, "redis-url", envOr("MARKET_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"), "Redis; a database is leased like the tests do (redistest)")
	flag.IntVar(&o.httpPort, "http-port", 19110, "marketd's public port")
	flag.IntVar(&o.opsPort, "ops-port", 19111, "marketd's ops port")
	flag.DurationVar(&o.cpuWindow, "cpu-window", 3*time.Minute, "steady-state window of the CPU measure")
	flag.DurationVar(&o.settle, "settle", 30*time.Second, "wait this long after every list is 200 before the CPU window (-together: the windows start once both waited)")
	flag.DurationVar(&o.latWindow, "latency-window", 3*time.Minute, "how long events are primed and measured")
	flag.IntVar(&o.prime, "prime", 2, "crypto swing reports primed every 5 s")
	flag.StringVar(&o.latencyScoreInterval, "latency-score-interval", "1h", "MARKET_SCORE_INTERVAL of the -bin latency run")
	flag.StringVar(&o.baselineScoreInterval, "baseline-score-interval", "1m", "MARKET_SCORE_INTERVAL of the -baseline latency run (its only path)")
	flag.BoolVar(&o.skipCPU, "skip-cpu", false, "skip the CPU window")
	flag.BoolVar(&o.skipLatency, "skip-latency", false, "skip the latency run")
	flag.StringVar(&o.logLevel, "log-level", "warn", "MARKET_LOG_LEVEL of marketd (its logs are kept in the temp directory)")
	flag.IntVar(&o.repeat, "repeat", 1, "measure (baseline, this build) this many times, back to back")
	flag.StringVar(&o.pprofDir, "pprof", "", "a directory: a CPU profile of each CPU window is saved there (marketd's MARKET_PPROF_ADDR; the binaries must serve it)")
	flag.IntVar(&o.pprofPort, "pprof-port", 19112, "loopback port of marketd's pprof listener (-pprof)")
	flag.BoolVar(&o.together, "together", false, "run every column (-baseline, each -variant, -bin) at the same time (the n-th on the ports +10·n), "+
		"their CPU windows starting at the same instant: the same clock phase (candle closes, ticks) and the same machine load for all (implies -skip-latency)")
	flag.Var(&o.baselineEnv, "baseline-env", "KEY=VALUE set in the -baseline process's environment (repeatable), e.g. "+
		"MARKET_SCORE_TRIGGER=false with -baseline the same binary as -bin: ticks alone against the trigger, the same code otherwise")
	flag.Var(&o.variants, "variant", "KEY=VALUE[,KEY=VALUE...]: also measure -bin with these settings (repeatable), "+
		"e.g. MARKET_SCORE_TRIGGER=false: with -together, the tick-only mode of this build in the same window as the baseline and this build")
	flag.Parse()
	if o.together {
		if o.baseline == "" && len(o.variants) == 0 {
			log.Fatal("-together needs -baseline or -variant")
		}
		o.skipLatency = true
	}
	log.SetFlags(log.Ltime)
	var results []*result
	for i := range max(o.repeat, 1) {
		suffix := ""
		if o.repeat > 1 {
			suffix = fmt.Sprintf(" #%d", i+1)
		}
		runs := o.runs(suffix)
		if o.together {
			rs, err := measureTogether(o, runs)
			if err != nil {
				log.Fatal(err)
			}
			results = append(results, rs...)
			continue
		}
		for _, rn := range runs {
			r, err := measure(o, rn)
			if err != nil {
				log.Fatalf("%s: %v", rn.name, err)
			}
			results = append(results, r)
		}
	}
	report(os.Stdout, o, results)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type result struct {
	name, bin    string
	cold         map[string]time.Duration
	coldAll      time.Duration
	cpuPerMinute float64
	cpuSeconds   float64
	// rescored counts the reports rewritten in the CPU window, by
	// "market/style" (see countRescorings).
	rescored        map[string]int
	candleToEvent   []time.Duration
	eventToDelivery []time.Duration
	events, lost    int
}

// run is one binary with its settings, measured as one column.
type run struct {
	name, bin string
	// scoreInterval is MARKET_SCORE_INTERVAL of its latency run.
	scoreInterval string
	env           benchkit.EnvFlag
}

// runs are the columns of one repetition: the baseline, the variants of
// this build, this build.
func (o options) runs(suffix string) []run {
	var rs []run
	if o.baseline != "" {
		rs = append(rs, run{name: "baseline" + suffix, bin: o.baseline, scoreInterval: o.baselineScoreInterval, env: o.baselineEnv})
	}
	for _, v := range o.variants {
		rs = append(rs, run{name: "this build" + suffix, bin: o.bin, scoreInterval: o.latencyScoreInterval, env: v})
	}
	return append(rs, run{name: "this build" + suffix, bin: o.bin, scoreInterval: o.latencyScoreInterval})
}

func measure(o options, rn run) (*result, error) {
	r := &result{name: rn.name, bin: rn.bin, cold: map[string]time.Duration{}}
	if len(rn.env) > 0 {
		r.name += " " + strings.Join(rn.env.Pairs(), " ")
	}
	log.Printf("%s (%s): cold start and CPU", r.name, rn.bin)
	if err := withEnv(o, rn.bin, rn.env, func(e *env) error { return e.coldAndCPU(o, r) }); err != nil {
		return nil, err
	}
	if o.skipLatency {
		return r, nil
	}
	log.Printf("%s: latency", r.name)
	vars := map[string]string{"MARKET_CANDLE_INTERVAL": "15s", "MARKET_SCORE_INTERVAL": rn.scoreInterval}
	for k, v := range rn.env {
		vars[k] = v
	}
	if err := withEnv(o, rn.bin, vars, func(e *env) error { return e.latency(o, r) }); err != nil {
		return nil, err
	}
	return r, nil
}

// measureTogether runs every run at once (the n-th on the ports +10·n),
// and starts their CPU windows at the same instant, once all are warm and
// -settle past it.
func measureTogether(o options, runs []run) ([]*result, error) {
	// Each run arrives at its window, or when it ends (a run that failed
	// first lets the others start without it).
	arrived := make(chan struct{}, 2*len(runs))
	start := make(chan struct{})
	barrier := func() {
		arrived <- struct{}{}
		<-start
	}
	go func() {
		for range runs {
			<-arrived
		}
		close(start)
	}()
	results := make([]*result, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, rn := range runs {
		oi := o
		oi.barrier = barrier
		oi.httpPort, oi.opsPort, oi.pprofPort = o.httpPort+10*i, o.opsPort+10*i, o.pprofPort+10*i
		wg.Go(func() {
			defer func() { arrived <- struct{}{} }()
			results[i], errs[i] = measure(oi, rn)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return results, nil
}

// env is one fresh schema and Redis database with a running marketd.
type env struct {
	vars   map[string]string
	dbURL  string
	schema string
	key    string
	proc   *exec.Cmd
	start  time.Time
	base   string
	ops    string
	http   *http.Client
	recv   *receiver
}

func withEnv(o options, bin string, extra map[string]string, fn func(*env) error) (err error) {
	ctx := context.Background()
	e := &env{schema: "latency_" + benchkit.RandomHex(6), http: &http.Client{Timeout: 10 * time.Second},
		base: fmt.Sprintf("http://127.0.0.1:%d/api/v1/public", o.httpPort), ops: fmt.Sprintf("http://127.0.0.1:%d", o.opsPort)}
	if err := benchkit.ExecSQL(ctx, o.databaseURL, "CREATE SCHEMA "+e.schema); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, benchkit.ExecSQL(context.Background(), o.databaseURL, "DROP SCHEMA "+e.schema+" CASCADE"))
	}()
	// The lease outlasts the run: cold start (≤ 5 min), -settle, the
	// windows, and a margin.
	redisURL, release, err := benchkit.LeaseRedisDB(ctx, o.redisURL, 10*time.Minute+o.settle+o.cpuWindow+o.latWindow)
	if err != nil {
		return err
	}
	defer release()
	u, _ := url.Parse(o.databaseURL)
	q := u.Query()
	q.Set("search_path", e.schema)
	u.RawQuery = q.Encode()
	e.dbURL = u.String()
	e.recv = newReceiver()
	defer e.recv.srv.Close()
	caFile := filepath.Join(os.TempDir(), e.schema+"-ca.pem")
	if err := os.WriteFile(caFile, e.recv.caPEM(), 0o600); err != nil {
		return err
	}
	defer os.Remove(caFile)
	e.vars = map[string]string{
		"MARKET_DATABASE_URL": e.dbURL, "MARKET_REDIS_URL": redisURL, "MARKET_SECRET_KEY": benchkit.RandomHex(32),
		"MARKET_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", o.httpPort), "MARKET_OPS_ADDR": fmt.Sprintf("127.0.0.1:%d", o.opsPort),
		"MARKET_LOG_LEVEL": o.logLevel, "MARKET_FEEDS": "synthetic", "MARKET_STATS_INTERVAL": "0",
		"MARKET_WEBHOOK_ALLOW_PRIVATE": "true", "MARKET_WEBHOOK_CA_FILE": caFile,
	}
	if o.pprofDir != "" {
		e.vars["MARKET_PPROF_ADDR"] = fmt.Sprintf("127.0.0.1:%d", o.pprofPort)
	}
	for k, v := range extra {
		e.vars[k] = v
	}
	if _, err := e.cli(bin, "migrate"); err != nil {
		return err
	}
	clientID, err := e.cli(bin, "clients", "create", "--org", "latencybench", "--tier", "enterprise", "--rate-limit", "100000")
	if err != nil {
		return err
	}
	if e.key, err = e.cli(bin, "keys", "issue", "--client", clientID); err != nil {
		return err
	}
	logFile, err := os.CreateTemp("", "latencybench-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	e.proc = exec.Command(bin, "all")
	e.proc.Env = e.environ()
	e.proc.Stdout, e.proc.Stderr = logFile, logFile
	e.start = time.Now()
	if err := e.proc.Start(); err != nil {
		return err
	}
	defer func() {
		_ = e.proc.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = e.proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = e.proc.Process.Kill()
			<-done
		}
		log.Printf("marketd log: %s", logFile.Name())
	}()
	return fn(e)
}

func (e *env) environ() []string { return benchkit.Environ(e.vars) }

func (e *env) cli(bin string, args ...string) (string, error) {
	return benchkit.CLI(e.vars, bin, args...)
}

func (e *env) get(path string) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodGet, e.base+path, nil)
	req.Header.Set("X-API-Key", e.key)
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

// lists are the analytics lists a client sees: every market in the
// default style, crypto in each style.
var lists = []string{"crypto?style=scalp", "crypto?style=intraday", "crypto?style=swing", "crypto?style=position",
	"forex?style=swing", "stocks?style=swing"}

// warm polls every list until each answers 200 and returns when all do.
func (e *env) warm(r *result, limit time.Duration) error {
	deadline := e.start.Add(limit)
	for {
		pending := 0
		for _, l := range lists {
			if _, ok := r.cold[l]; ok {
				continue
			}
			m, q, _ := strings.Cut(l, "?")
			code, _, err := e.get("/analytics/" + m + "/list?" + q)
			if err == nil && code == http.StatusOK {
				r.cold[l] = time.Since(e.start)
				continue
			}
			pending++
		}
		if pending == 0 {
			for _, d := range r.cold {
				r.coldAll = max(r.coldAll, d)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lists not 200 after %s: %d of %d", limit, pending, len(lists))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) coldAndCPU(o options, r *result) error {
	if err := e.warm(r, 5*time.Minute); err != nil {
		return err
	}
	log.Printf("%s: every list 200 after %s", r.name, r.coldAll.Round(10*time.Millisecond))
	if o.skipCPU {
		return nil
	}
	// Steady state: the start's backlog (300 candles a series) is done.
	time.Sleep(o.settle)
	if o.barrier != nil {
		o.barrier()
	}
	c0, err := benchkit.ProcCPU(e.proc.Process.Pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	log.Printf("CPU window from %s", t0.UTC().Format(time.RFC3339Nano))
	profiled := make(chan struct{})
	if o.pprofDir != "" {
		go func() {
			defer close(profiled)
			e.profile(o, r, int(o.cpuWindow.Seconds())-1)
		}()
	} else {
		close(profiled)
	}
	counted := make(chan map[string]int, 1)
	stop := make(chan struct{})
	go func() { counted <- e.countRescorings(t0, stop) }()
	time.Sleep(o.cpuWindow)
	<-profiled
	c1, err := benchkit.ProcCPU(e.proc.Process.Pid)
	if err != nil {
		return err
	}
	t1 := time.Now()
	close(stop)
	r.rescored = <-counted
	r.cpuSeconds = (c1 - c0).Seconds()
	r.cpuPerMinute = r.cpuSeconds / t1.Sub(t0).Minutes()
	log.Printf("%s: CPU %.3f s per minute, %d reports rescored (window to %s)", r.name, r.cpuPerMinute, r.rescoredTotal(), t1.UTC().Format(time.RFC3339Nano))
	return nil
}

// countRescorings reads (market, style, symbol, updated_at) of every
// analytics report every 5 s from t0 until stop, and once more then, and
// counts the reports rewritten in between: an updated_at that changed and
// is at or after t0. A scoring rewrites its report's updated_at even when
// the result is the same, so this counts the scorings of both builds alike
// (read from outside the process, whatever its code); two scorings of one
// report within 5 s would count once (the open-candle rule spaces them by
// at least 2 minutes).
func (e *env) countRescorings(t0 time.Time, stop <-chan struct{}) map[string]int {
	ctx := context.Background()
	counts := map[string]int{}
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		log.Printf("counting rescorings: %v", err)
		return nil
	}
	defer conn.Close(ctx)
	seen := map[[3]string]time.Time{}
	poll := func() {
		rows, err := conn.Query(ctx, "SELECT market, style, symbol, updated_at FROM analytics_reports")
		if err != nil {
			log.Printf("counting rescorings: %v", err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var k [3]string
			var at time.Time
			if err := rows.Scan(&k[0], &k[1], &k[2], &at); err != nil {
				log.Printf("counting rescorings: %v", err)
				return
			}
			if prev, ok := seen[k]; (!ok || !prev.Equal(at)) && !at.Before(t0) {
				counts[k[0]+"/"+k[1]]++
			}
			seen[k] = at
		}
	}
	for {
		poll()
		select {
		case <-stop:
			poll()
			return counts
		case <-time.After(5 * time.Second):
		}
	}
}

func (r *result) rescoredTotal() int {
	n := 0
	for _, c := range r.rescored {
		n += c
	}
	return n
}

// variantFlag is a repeatable KEY=VALUE[,KEY=VALUE...] flag.
type variantFlag []benchkit.EnvFlag

func (f *variantFlag) String() string { return fmt.Sprint(*f) }

func (f *variantFlag) Set(s string) error {
	var v benchkit.EnvFlag
	for _, kv := range strings.Split(s, ",") {
		if err := v.Set(kv); err != nil {
			return err
		}
	}
	*f = append(*f, v)
	return nil
}

// profile saves a CPU profile of the next seconds of marketd in
// o.pprofDir (named after the run and the time).
func (e *env) profile(o options, r *result, seconds int) {
	c := &http.Client{Timeout: time.Duration(seconds+30) * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", o.pprofPort, seconds))
	if err != nil {
		log.Printf("pprof: %v", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		log.Printf("pprof: status %d: %v", resp.StatusCode, err)
		return
	}
	name := strings.NewReplacer(" ", "-", "#", "").Replace(r.name) + "-" + time.Now().UTC().Format("150405") + ".pprof"
	path := filepath.Join(o.pprofDir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Printf("pprof: %v", err)
		return
	}
	log.Printf("CPU profile: %s", path)
}

func (e *env) latency(o options, r *result) error {
	ctx := context.Background()
	if err := e.warm(&result{cold: map[string]time.Duration{}}, 5*time.Minute); err != nil {
		return err
	}
	body := strings.NewReader(`{"callback_url":"` + e.recv.srv.URL + `/hook"}`)
	req, _ := http.NewRequest(http.MethodPost, e.base+"/webhooks", body)
	req.Header.Set("X-API-Key", e.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("subscribe: %s", resp.Status)
	}
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var lastID int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM verdict_events`).Scan(&lastID); err != nil {
		return err
	}
	seen := map[int64]time.Time{}
	end := time.Now().Add(o.latWindow)
	nextPrime := time.Now()
	for time.Now().Before(end) {
		if time.Now().After(nextPrime) {
			nextPrime = nextPrime.Add(5 * time.Second)
			if _, err := conn.Exec(ctx, `UPDATE analytics_reports SET
					verdict = CASE WHEN overall_score >= 0 THEN 'decline' ELSE 'growth' END,
					updated_at = updated_at - interval '16 minutes'
				WHERE (market, style, symbol) IN (SELECT market, style, symbol FROM analytics_reports
					WHERE market = 'crypto' AND style = 'swing' AND updated_at > now() - interval '5 minutes'
					ORDER BY random() LIMIT $1)`, o.prime); err != nil {
				return fmt.Errorf("prime: %w", err)
			}
		}
		rows, err := conn.Query(ctx, `SELECT e.id, c.updated_at FROM verdict_events e
			JOIN analytics_reports a ON a.market = e.market AND a.symbol = e.symbol AND a.style = 'swing'
			JOIN candles c ON c.market = a.market AND c.exchange = a.exchange AND c.symbol = a.symbol
				AND c.timeframe = '4h' AND c.open_time = a.candle_time
			WHERE e.id > $1 ORDER BY e.id`, lastID)
		if err != nil {
			return err
		}
		now := time.Now()
		for rows.Next() {
			var id int64
			var stored time.Time
			if err := rows.Scan(&id, &stored); err != nil {
				rows.Close()
				return err
			}
			lastID = id
			seen[id] = now
			r.events++
			if d := now.Sub(stored); d >= 0 {
				r.candleToEvent = append(r.candleToEvent, d)
			} else {
				r.lost++ // the candle was written again after the event: no sample
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Deliveries of the events seen: wait up to a minute for stragglers.
	deadline := time.Now().Add(time.Minute)
	for {
		got := e.recv.arrivals()
		missing := 0
		for id := range seen {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			for id, at := range seen {
				if arr, ok := got[id]; ok {
					r.eventToDelivery = append(r.eventToDelivery, max(arr.Sub(at), 0))
				}
			}
			if missing > 0 {
				log.Printf("%d of %d events not delivered within a minute", missing, len(seen))
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Printf("%d events, %d deliveries", r.events, len(r.eventToDelivery))
	return nil
}

// receiver is the https webhook endpoint: it records when each event id
// first arrived.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	at  map[int64]time.Time
}

func newReceiver() *receiver {
	r := &receiver{at: map[int64]time.Time{}}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		now := time.Now()
		b, _ := io.ReadAll(req.Body)
		var body struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &body) == nil {
			if id, err := strconv.ParseInt(body.ID, 10, 64); err == nil {
				r.mu.Lock()
				if _, ok := r.at[id]; !ok {
					r.at[id] = now
				}
				r.mu.Unlock()
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.StartTLS()
	return r
}

func (r *receiver) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

func (r *receiver) arrivals() map[int64]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]time.Time, len(r.at))
	for k, v := range r.at {
		out[k] = v
	}
	return out
}

func report(w io.Writer, o options, rs []*result) {
	fmt.Fprintf(w, "\n| measure | %s |\n|---|%s\n", names(rs), strings.Repeat("---|", len(rs)))
	row := func(label string, f func(*result) string) {
		cells := make([]string, len(rs))
		for i, r := range rs {
			cells[i] = f(r)
		}
		fmt.Fprintf(w, "| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	for _, l := range lists {
		row("cold start → "+l+" list 200", func(r *result) string { return fmt.Sprintf("%.1f s", r.cold[l].Seconds()) })
	}
	row("cold start → every list 200", func(r *result) string { return fmt.Sprintf("**%.1f s**", r.coldAll.Seconds()) })
	if !o.skipCPU {
		row(fmt.Sprintf("CPU s per minute (marketd all, %s steady state)", o.cpuWindow), func(r *result) string { return fmt.Sprintf("%.3f", r.cpuPerMinute) })
		row("reports rescored in the window", func(r *result) string { return strconv.Itoa(r.rescoredTotal()) })
		row("… by market/style", func(r *result) string {
			keys := slices.Sorted(maps.Keys(r.rescored))
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = fmt.Sprintf("%s %d", k, r.rescored[k])
			}
			return strings.Join(out, ", ")
		})
		row("CPU ms per rescored report (whole process)", func(r *result) string {
			if n := r.rescoredTotal(); n > 0 {
				return fmt.Sprintf("%.2f", 1000*r.cpuSeconds/float64(n))
			}
			return "—"
		})
	}
	row("candle stored → verdict event committed, p50 / p95 / max", func(r *result) string { return benchkit.Dist(r.candleToEvent) })
	row("verdict event committed → delivery received, p50 / p95 / max", func(r *result) string { return benchkit.Dist(r.eventToDelivery) })
	row("events (no candle sample: candle rewritten first)", func(r *result) string { return fmt.Sprintf("%d (%d)", r.events, r.lost) })
}

func names(rs []*result) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name + " (`" + r.bin + "`)"
	}
	return strings.Join(out, " | ")
}
