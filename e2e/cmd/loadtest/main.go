// Command loadtest measures what the real api costs over a bare net/http
// handler serving the same bytes, with wrk as the load generator in a
// process of its own (make bench-api):
//
//  1. it creates a fresh schema (in the database of -database-url, created
//     when missing), migrates it, creates an enterprise client whose rate
//     limit is lifted (so the gate runs in full on every request without
//     refusing) and issues a key, and seeds binance spot screener rows, 1h
//     and 4h candles and crypto swing analytics from the synthetic feed;
//  2. it starts `marketd api` (this tool's own build, or -api-bin, e.g. an
//     older commit for a before/after pair) as a child process, and captures
//     one response of every -paths entry;
//  3. it starts a bare net/http server (a child process too) answering each
//     path with exactly those bytes and the same Content-Type;
//  4. for every run and path it drives the bare server and then the api
//     with the same wrk command (a warm-up, then the measured run);
//  5. it prints a Markdown table ready to paste into BENCHMARKS.md: req/s,
//     the ratio api/bare, p50/p99/p99.9, non-2xx answers and socket errors,
//     and the CPU the generator and the server used. A run with any non-2xx
//     answer or socket error is invalid and says so.
//
// With -pin (the default on a machine with two or more cores) both servers
// run on the last core (taskset, so GOMAXPROCS is 1) and wrk on core 0:
// each target gets one whole core, and the generator's own CPU is taken
// from neither. Postgres and Redis are not pinned.
//
// -bare-headers (on by default) adds a second baseline, measured in every
// run: the bare handler replaying the api's whole captured answer (every
// header but Date, which net/http writes itself; Content-Length too), so
// that both sides put the same bytes on the wire; the table gives the api's
// ratio to both. The first baseline sends the body with its Content-Type
// only: fewer header bytes, and any body over net/http's 2 KB buffer goes
// out chunked (the api sends Content-Length), so its bytes differ from the
// api's. -bare-headers=false measures that one alone.
//
// -conditional adds a measurement of the api answering 304: the same request
// with If-None-Match set to the ETag it captured (paths with an ETag only).
//
// -flood measures the unknown-key flood instead (see flood.go).
//
//	go run ./e2e/cmd/loadtest [-runs 3] [-duration 10s] [-conns 64] [-paths usage,screener,ohlcv,report]
//	go run ./e2e/cmd/loadtest -api-bin /tmp/marketd-before     # the same measurement of another build
//	go run ./e2e/cmd/loadtest -paths usage -cpuprofile api.pprof
//	go run ./e2e/cmd/loadtest -conditional -paths screener,ohlcv,report,list   # 304 vs 200
//	go run ./e2e/cmd/loadtest -bare-headers -before-bin /tmp/marketd-main     # both baselines, before/after
//	go run ./e2e/cmd/loadtest -flood
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

const basePath = "/api/v1/public"

// pathAliases are the -paths shorthands for the operations the goal names.
var pathAliases = map[string]string{
	"usage":     basePath + "/usage",
	"screener":  basePath + "/screener/crypto/binance/spot",
	"ohlcv":     basePath + "/ohlcv/crypto/binance/BTC_USDT/1h",
	"report":    basePath + "/analytics/crypto/BTC_USDT?lang=en",
	"list":      basePath + "/analytics/crypto/list",
	"topsetups": basePath + "/analytics/top-setups?limit=20",
	"query":     queryPath,
}

// queryPath is POST /screener/query, the one path measured with a body
// (-query-body); its market is seeded up to -query-assets assets.
const queryPath = basePath + "/screener/query"

type options struct {
	runs        int
	duration    time.Duration
	warmup      time.Duration
	conns       int
	paths       []string
	databaseURL string
	redisURL    string
	apiBin      string
	apiLabel    string
	beforeBin   string
	cpuProfile  string
	logLevel    string
	pin         bool
	wrk         string
	flood       bool
	floodConns  int
	payConns    int
	conditional bool
	bareHeaders bool
	queryBody   string
	queryAssets int
}

// bodyOf is the request body of a path ("" for a GET); a query body's
// {n} (a new query each request, -query-body's) reads 0.
func (o options) bodyOf(path string) string {
	if path == queryPath {
		return strings.ReplaceAll(o.queryBody, "{n}", "0")
	}
	return ""
}

// postLua makes wrk send body as a JSON POST; a body with {n} is a new
// body each request, {n} replaced by the request's number (so POST
// /screener/query finds neither its compiled program nor its page kept).
func postLua(body string) string {
	if strings.Contains(body, "{n}") {
		return "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n" +
			"local template = [==[" + body + "]==]\nlocal counter = 0\n" +
			"request = function()\n  counter = counter + 1\n  local body = (string.gsub(template, \"{n}\", tostring(counter)))\n" +
			"  return wrk.format(nil, nil, nil, body)\nend\n"
	}
	return "wrk.method = \"POST\"\nwrk.body = [==[" + body + "]==]\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
}

func main() {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "child-") {
		os.Exit(child(os.Args[1], os.Args[2:]))
	}
	var o options
	var paths string
	flag.IntVar(&o.runs, "runs", 3, "measured runs per path (each: bare, then api)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured duration per target")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up per target (a wrk run of its own, not measured)")
	flag.IntVar(&o.conns, "conns", 64, "wrk connections (wrk -t1: one generator thread)")
	flag.StringVar(&paths, "paths", "usage,screener,ohlcv,report", "comma-separated paths or aliases ("+aliasList()+")")
	flag.StringVar(&o.databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/marketd_bench?sslmode=disable",
		"Postgres database for the temporary schema (created when missing; its own database so pg_stat_database counts only this tool)")
	flag.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379/13", "Redis of the api")
	flag.StringVar(&o.apiBin, "api-bin", "", "run this marketd binary as the api instead of this tool's own build")
	flag.StringVar(&o.beforeBin, "before-bin", "", "also measure this marketd build (e.g. main's) in every run, between the bare handler and the api: a before/after pair per run")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the api process (this build only) to this file, and of the bare server to this file + .bare")
	flag.StringVar(&o.logLevel, "log-level", "warn", "MARKET_LOG_LEVEL of the api")
	flag.BoolVar(&o.pin, "pin", runtime.NumCPU() >= 2, "pin the servers to the last core and wrk to core 0 (taskset)")
	flag.StringVar(&o.wrk, "wrk", "wrk", "the wrk binary (Debian package wrk)")
	flag.BoolVar(&o.flood, "flood", false, "measure the unknown-key flood (a paying client beside an attacker minting keys) instead")
	flag.IntVar(&o.floodConns, "flood-conns", 32, "-flood: attacker connections")
	flag.IntVar(&o.payConns, "pay-conns", 16, "-flood: paying client connections")
	flag.BoolVar(&o.conditional, "conditional", false, "also measure the api answering 304 (If-None-Match with the captured ETag) in every run, after its 200 (paths answered without an ETag, such as /usage, are not)")
	flag.BoolVar(&o.bareHeaders, "bare-headers", true, "also measure, in every run, a second bare server replaying the api's whole captured answer (every header but Date, which net/http writes; Content-Length included), and report the api's ratio to both baselines")
	flag.StringVar(&o.queryBody, "query-body", `{"market":"crypto","where":"verdict == \"growth\" && factors.rsi_14.value < 70","order_by":"overall_score desc","limit":50}`,
		"-paths query: the body of POST /screener/query; {n} in it is replaced by each request's number (a new query every request: no kept program or page serves it)")
	flag.IntVar(&o.queryAssets, "query-assets", 13000, "-paths query: crypto assets scored in the seeded market (copies of the synthetic feed's reports under other symbols)")
	flag.Parse()
	if o.runs < 1 || o.duration <= 0 || o.warmup < 0 || o.conns < 1 {
		fmt.Fprintln(os.Stderr, "loadtest: -runs ≥ 1, -duration > 0, -warmup ≥ 0, -conns ≥ 1")
		os.Exit(2)
	}
	for _, p := range strings.Split(paths, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if full, ok := pathAliases[p]; ok {
			p = full
		} else if !strings.HasPrefix(p, "/api/") {
			p = basePath + "/" + strings.TrimPrefix(p, "/")
		}
		o.paths = append(o.paths, p)
	}
	if o.cpuProfile != "" && o.apiBin != "" {
		fmt.Fprintln(os.Stderr, "loadtest: -cpuprofile profiles this build's api; it cannot be combined with -api-bin")
		os.Exit(2)
	}
	o.apiLabel = "this build"
	if o.apiBin != "" {
		o.apiLabel = o.apiBin
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if o.flood {
		err = runFlood(ctx, o, os.Stdout)
	} else {
		err = run(ctx, o, os.Stdout)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func aliasList() string { return "usage, screener, ohlcv, report, list, topsetups, query" }

// run is the throughput comparison: bare handler vs api, path by path.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	env, cleanup, err := prepare(ctx, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	api, err := startAPI(ctx, o, env.vars, o.apiBin, o.cpuProfile, "api")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, api.stop()) }()
	var before *server
	if o.beforeBin != "" {
		if before, err = startAPI(ctx, o, env.vars, o.beforeBin, "", "before"); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, before.stop()) }()
	}
	bodies := map[string]capturedBody{}
	for _, p := range o.paths {
		b, err := capture(ctx, api.base+p, env.key, o.bodyOf(p))
		if err != nil {
			return err
		}
		bodies[p] = b
		if o.conditional && b.ETag != "" {
			if err := checkNotModified(ctx, api.base+p, env.key, b.ETag, o.bodyOf(p)); err != nil {
				return err
			}
		}
	}
	bare, err := startBare(ctx, o, bodies, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bare.stop()) }()
	var bareFull *server
	if o.bareHeaders {
		if bareFull, err = startBare(ctx, o, bodies, true); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, bareFull.stop()) }()
	}

	printHeader(out, o, env, bodies)
	var rows []row
	for r := 1; r <= o.runs; r++ {
		for _, p := range o.paths {
			fmt.Fprintf(os.Stderr, "run %d/%d %s (load average %s)\n", r, o.runs, p, loadAvg())
			b, err := measure(ctx, o, bare, p, env.key)
			if err != nil {
				return err
			}
			rw := row{path: p, run: r, bare: b}
			if bareFull != nil {
				bf, err := measure(ctx, o, bareFull, p, env.key)
				if err != nil {
					return err
				}
				rw.bareHeaders = &bf
			}
			if before != nil {
				bf, err := measure(ctx, o, before, p, env.key)
				if err != nil {
					return err
				}
				rw.before = &bf
			}
			if rw.api, err = measure(ctx, o, api, p, env.key); err != nil {
				return err
			}
			if o.conditional && bodies[p].ETag != "" {
				c, err := measure(ctx, o, api, p, env.key, "If-None-Match: "+bodies[p].ETag)
				if err != nil {
					return err
				}
				rw.notModified = &c
			}
			rows = append(rows, rw)
		}
	}
	return printTable(out, o, rows)
}

// measure runs a warm-up and then the measured wrk run of one target.
func measure(ctx context.Context, o options, s *server, path, key string, headers ...string) (wrkResult, error) {
	var script string
	if body := o.bodyOf(path); body != "" {
		script = postLua(o.queryBody)
	}
	if o.warmup > 0 {
		if _, err := runWrk(ctx, o, wrkRun{url: s.base + path, key: key, headers: headers, conns: o.conns, duration: o.warmup, script: script}); err != nil {
			return wrkResult{}, fmt.Errorf("%s warm-up: %w", s.name, err)
		}
	}
	cpu0 := s.cpu()
	res, err := runWrk(ctx, o, wrkRun{url: s.base + path, key: key, headers: headers, conns: o.conns, duration: o.duration, script: script})
	if err != nil {
		return wrkResult{}, fmt.Errorf("%s: %w", s.name, err)
	}
	used := s.cpu() - cpu0
	res.serverCPU = used.Seconds() / res.elapsed().Seconds()
	if res.Requests > 0 {
		res.serverPerReq = used / time.Duration(res.Requests)
	}
	return res, nil
}
