// Command loadtest measures what the real api costs over a bare net/http
// handler serving the same bytes, on this machine, in one run:
//
//  1. it creates a fresh schema in the test database, migrates it, creates
//     an enterprise client whose rate limit is lifted (so the limiter runs
//     on every request without refusing) and issues a key, and seeds
//     binance spot screener rows, 1h candles and crypto swing analytics
//     from the synthetic feed (so -path may be /screener/crypto/binance/spot,
//     /ohlcv/crypto/binance/BTC_USDT/1h, /analytics/crypto/list or
//     /analytics/crypto/BTC_USDT);
//  2. it starts the real api in-process (app.Main, role api) and captures
//     one response of -path (default GET /api/v1/public/usage);
//  3. it starts a bare net/http server answering exactly those bytes with
//     the same Content-Type;
//  4. it drives each with the same closed-loop load generator: -conns
//     keep-alive connections for a 2 s warm-up and then -duration;
//  5. it prints requests/s, latency percentiles and errors for both and the
//     ratio api/bare, then stops the api and drops the schema.
//
// Every target is a listener of this process on 127.0.0.1. The generator,
// the api, Postgres and Redis share the machine's cores, which is part of
// what is measured; GOMAXPROCS is left as is.
//
//	go run ./e2e/cmd/loadtest [-duration 10s] [-conns 64] [-path /api/v1/public/usage] [-cpuprofile api.pprof]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/cmd/marketd/app"
)

const basePath = "/api/v1/public"

type options struct {
	duration    time.Duration
	warmup      time.Duration
	conns       int
	path        string
	databaseURL string
	redisURL    string
	cpuProfile  string
	logLevel    string
}

func main() {
	var o options
	defaultDB := os.Getenv("MARKET_TEST_DATABASE_URL")
	if defaultDB == "" {
		defaultDB = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured duration per target (after the warm-up)")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up per target, not measured")
	flag.IntVar(&o.conns, "conns", 64, "concurrent keep-alive connections (one request in flight each)")
	flag.StringVar(&o.path, "path", basePath+"/usage", "path to GET (relative paths are under "+basePath+")")
	flag.StringVar(&o.databaseURL, "database-url", defaultDB, "Postgres database in which a temporary schema is created")
	flag.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379/13", "Redis of the api (rate-limit windows, invalidations)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the api run (api and load generator: one process) to this file")
	flag.StringVar(&o.logLevel, "log-level", "warn", "MARKET_LOG_LEVEL of the api (info writes one access-log line per request)")
	flag.Parse()
	if o.duration <= 0 || o.warmup < 0 || o.conns < 1 {
		fmt.Fprintln(os.Stderr, "loadtest: -duration must be > 0, -warmup ≥ 0, -conns ≥ 1")
		os.Exit(2)
	}
	if !strings.HasPrefix(o.path, "/api/") {
		o.path = basePath + "/" + strings.TrimPrefix(o.path, "/")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	// 1. A schema of our own, dropped whatever happens.
	schema := "loadtest_" + randomHex(6)
	if err := execSQL(ctx, o.databaseURL, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() {
		if derr := execSQL(context.Background(), o.databaseURL, "DROP SCHEMA "+schema+" CASCADE"); derr != nil {
			err = errors.Join(err, fmt.Errorf("drop schema %s: %w", schema, derr))
		}
	}()
	dbURL, err := withSearchPath(o.databaseURL, schema)
	if err != nil {
		return err
	}
	env := map[string]string{
		"MARKET_DATABASE_URL": dbURL,
		"MARKET_REDIS_URL":    o.redisURL,
		"MARKET_HTTP_ADDR":    "127.0.0.1:0",
		"MARKET_OPS_ADDR":     "127.0.0.1:0",
		"MARKET_LOG_LEVEL":    o.logLevel,
		"MARKET_SECRET_KEY":   randomHex(32),
	}
	if _, err := cli(ctx, env, "migrate"); err != nil {
		return err
	}
	// Market data for the /screener and /ohlcv paths (binance spot, 1h).
	if err := seed(ctx, dbURL); err != nil {
		return err
	}
	clientID, err := cli(ctx, env, "clients", "create", "--org", "loadtest", "--tier", "enterprise", "--rate-limit", "100000000")
	if err != nil {
		return err
	}
	key, err := cli(ctx, env, "keys", "issue", "--client", clientID)
	if err != nil {
		return err
	}
	defer forgetWindow(o.redisURL, clientID)

	// 2. The real api, in this process.
	apiCtx, stopAPI := context.WithCancel(ctx)
	defer stopAPI()
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: os.Stderr}
	done := make(chan int, 1)
	go func() { done <- m.Run(apiCtx, []string{"api"}) }()
	defer func() {
		stopAPI()
		select {
		case code := <-done:
			if code != 0 {
				err = errors.Join(err, fmt.Errorf("marketd api exited %d", code))
			}
		case <-time.After(20 * time.Second):
			err = errors.Join(err, errors.New("marketd api did not stop within 20 s"))
		}
	}()
	select {
	case <-m.Listening():
	case code := <-done:
		done <- code
		return fmt.Errorf("marketd api exited %d before listening", code)
	case <-time.After(15 * time.Second):
		return errors.New("marketd api did not listen within 15 s")
	}
	readyStatus, err := waitReady(ctx, "http://"+m.OpsAddr()+"/readyz")
	if err != nil {
		return err
	}
	apiURL := "http://" + m.HTTPAddr() + o.path
	body, contentType, err := capture(ctx, apiURL, key)
	if err != nil {
		return err
	}

	// 3. The bare handler: the same bytes, no work.
	bareLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bare := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = bare.Serve(bareLn) }()
	defer bare.Close()
	bareURL := "http://" + bareLn.Addr().String() + o.path

	fmt.Fprintf(out, "loadtest: %s, GOMAXPROCS=%d, NumCPU=%d, %s/%s\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(out, "GET %s (%d-byte %s body), %d connections, %s warm-up + %s measured per target\n",
		o.path, len(body), contentType, o.conns, o.warmup, o.duration)
	fmt.Fprintf(out, "api: in-process marketd api, MARKET_LOG_LEVEL=%s, /readyz %s, schema %s, Redis %s\n", o.logLevel, readyStatus, schema, o.redisURL)
	fmt.Fprintf(out, "note: the load generator shares the %d cores with the api, Postgres and Redis (and anything else running: load average %s)\n\n",
		runtime.NumCPU(), loadAvg())

	// 4. The same generator against each.
	bareRes := drive(ctx, "bare", bareURL, key, o)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	apiRes := drive(ctx, "api", apiURL, key, o)
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// 5. The report.
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\trequests\treq/s\tp50\tp90\tp99\tp99.9\tmax\terrors\tcpu this process\tcpu machine\t")
	for _, r := range []result{bareRes, apiRes} {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%.2f\t\n", r.name, r.requests, r.rps(),
			ms(r.quantile(0.50)), ms(r.quantile(0.90)), ms(r.quantile(0.99)), ms(r.quantile(0.999)), ms(r.quantile(1)), r.errors,
			r.procCPU, r.busyCPU)
	}
	_ = tw.Flush()
	ratio := 0.0
	if bareRes.rps() > 0 {
		ratio = apiRes.rps() / bareRes.rps()
	}
	fmt.Fprintf(out, "\nratio api/bare req/s: %.2f (target ≥ 0.50: %s)\n", ratio, verdict(ratio >= 0.5))
	fmt.Fprintf(out, "api p99: %s (target ≤ 10 ms: %s)\n", ms(apiRes.quantile(0.99)), verdict(apiRes.quantile(0.99) <= 10*time.Millisecond))
	if o.cpuProfile != "" {
		fmt.Fprintf(out, "cpu profile of the api run: %s (go tool pprof -top %s)\n", o.cpuProfile, o.cpuProfile)
	}
	var errs []error
	for _, r := range []result{bareRes, apiRes} {
		if r.errors > 0 {
			errs = append(errs, fmt.Errorf("%s: %d errors (statuses %v; first: %s)", r.name, r.errors, r.statuses, r.firstErr))
		}
	}
	return errors.Join(errs...)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// result is what one target did during the measured window.
type result struct {
	name     string
	requests int64
	errors   int64
	elapsed  time.Duration
	lat      []time.Duration // sorted, measured requests only
	procCPU  float64         // cores used by this process (api and generator) over the run
	busyCPU  float64         // cores busy on the whole machine over the run (-1 if unknown)
	statuses map[int]int64   // non-200 statuses (0: transport error)
	firstErr string
}

func (r result) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.requests) / r.elapsed.Seconds()
}

// quantile is the latency at q (nearest rank) of the measured requests.
func (r result) quantile(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(q*float64(len(r.lat))+0.999999) - 1
	return r.lat[min(max(i, 0), len(r.lat)-1)]
}

// drive runs o.conns closed-loop workers against url: each sends a request,
// reads the whole answer and sends the next, over its own keep-alive
// connection. Requests started during the warm-up are not measured; no
// request starts after the measured window, so the run ends by itself.
func drive(ctx context.Context, name, url, key string, o options) result {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        2 * o.conns,
		MaxIdleConnsPerHost: 2 * o.conns,
		MaxConnsPerHost:     o.conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	type worker struct {
		lat      []time.Duration
		errors   int64
		statuses map[int]int64
		firstErr string
	}
	cpu0, busy0 := processCPU(), machineBusy()
	start := time.Now()
	measureFrom := start.Add(o.warmup)
	end := measureFrom.Add(o.duration)
	workers := make([]worker, o.conns)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(wk *worker) {
			defer wg.Done()
			wk.statuses = map[int]int64{}
			wk.lat = make([]time.Duration, 0, 1<<14)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				wk.errors++
				wk.firstErr = err.Error()
				return
			}
			req.Header.Set("X-API-Key", key)
			buf := make([]byte, 32<<10)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				status, err := once(client, req, buf)
				d := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				wk.lat = append(wk.lat, d)
				if err != nil || status != http.StatusOK {
					wk.errors++
					wk.statuses[status]++
					if wk.firstErr == "" {
						if err != nil {
							wk.firstErr = err.Error()
						} else {
							wk.firstErr = fmt.Sprintf("status %d", status)
						}
					}
				}
			}
		}(&workers[w])
	}
	wg.Wait()
	finished := time.Now()
	wall := finished.Sub(start).Seconds()
	r := result{name: name, elapsed: finished.Sub(measureFrom), statuses: map[int]int64{},
		procCPU: (processCPU() - cpu0).Seconds() / wall, busyCPU: -1}
	if busy1 := machineBusy(); busy0 >= 0 && busy1 >= 0 {
		r.busyCPU = (busy1 - busy0).Seconds() / wall
	}
	for _, wk := range workers {
		r.lat = append(r.lat, wk.lat...)
		r.errors += wk.errors
		for s, n := range wk.statuses {
			r.statuses[s] += n
		}
		if r.firstErr == "" {
			r.firstErr = wk.firstErr
		}
	}
	r.requests = int64(len(r.lat))
	slices.Sort(r.lat)
	return r
}

// once sends req and reads the whole body (so the connection is reused).
func once(client *http.Client, req *http.Request, buf []byte) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.CopyBuffer(io.Discard, resp.Body, buf)
	resp.Body.Close()
	return resp.StatusCode, err
}

// capture fetches one answer of the api, which the bare handler replays.
func capture(ctx context.Context, url, key string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("capture: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("capture: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("capture: GET %s answered %d: %s (the tool seeds binance spot screener rows, 1h candles and crypto swing analytics only)",
			req.URL.Path, resp.StatusCode, bytes.TrimSpace(body))
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// waitReady polls /readyz until it answers 200 and returns its status
// ("ready", or "degraded" when Redis is unreachable).
func waitReady(ctx context.Context, url string) (string, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if bytes.Contains(b, []byte(`"degraded"`)) {
					return "degraded (Redis unreachable: the fallback limiter is measured)", nil
				}
				return "ready", nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("api not ready within 15 s (last: %v)", err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cli runs one marketd command in-process and returns its trimmed stdout.
func cli(ctx context.Context, env map[string]string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: &stdout, Stderr: &stderr}
	if code := m.Run(ctx, args); code != 0 {
		return "", fmt.Errorf("marketd %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func execSQL(ctx context.Context, databaseURL, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func withSearchPath(databaseURL, schema string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("-database-url: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// forgetWindow deletes the client's rate-limit log (it would expire by
// itself a minute later).
func forgetWindow(redisURL, clientID string) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = rdb.Del(ctx, "ratelimit:{"+clientID+"}").Err()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the non-idle CPU time of the whole machine so far (from
// /proc/stat, Linux), or -1.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return -1
	}
	var ticks int64
	for i, v := range f[1:8] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}

// loadAvg is the 1-, 5- and 15-minute load average, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
