// Command compactbench measures compact candle storage (make bench-compact):
// the bytes a candle costs as a row of the candles table and packed in
// candle_blocks, and the read latency of the two layouts in the same run.
//
//  1. It creates two schemas in the database of -database-url, migrates
//     both, and fills one ("today") with a synthetic crypto universe:
//     -symbols series of 1h candles over -days days, 1d over -years years
//     and 5m over three days, prices on a tick of five significant digits
//     and volumes on lot sizes as an exchange quotes them; -old of the 1h
//     series stopped 60 days ago (delisted). The other ("packed") gets a
//     copy, then the mover (worker.CompactJob, the retention tick's) packs
//     everything past the hot window; the tool times it.
//
//  2. Sizes: pg_total_relation_size (heap, TOAST, indexes) per candle of the
//     candles table in "today", of candle_blocks and of what stays hot in
//     "packed" (after VACUUM FULL, so that deleted rows do not count).
//
//  3. Reads: store.DB.Candles (GET /ohlcv's read on a cache miss) -reads
//     times per range and layout, the layouts alternating, rotating over
//     the symbols: the newest 24 1h candles (in the hot window), the newest
//     1,000 (across the boundary), the newest 1,000 of a delisted series
//     (all packed but the newest) and the newest 1,000 1d candles (all
//     packed but the current month's).
//
//  4. HTTP: `marketd api` (-bin) on each schema, wrk (its own process) with
//     a script rotating over the symbols of each range, both layouts per
//     range (the order swapped every run), -duration each, -runs times, and
//     the medians: p50/p99 as served (the api's read cache holds each
//     series 10 s, so a run measures hits and the misses of the rotation).
//
// Usage:
//
//	go run ./e2e/cmd/compactbench -bin bin/marketd [-symbols 100] [-old 20] [-days 365] [-years 5] [-runs 5] [-duration 8s]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

type options struct {
	databaseURL, redisURL, bin, wrk string
	symbols, old, days, years       int
	reads, conns, runs              int
	duration                        time.Duration
	keep                            bool
}

func main() {
	var o options
	flag.StringVar(&o.databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "Postgres database for the two temporary schemas")
	flag.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379/13", "Redis of the api")
	flag.StringVar(&o.bin, "bin", "bin/marketd", "the marketd binary run as the api (\"\": skip the HTTP measurement)")
	flag.StringVar(&o.wrk, "wrk", "wrk", "the wrk binary")
	flag.IntVar(&o.symbols, "symbols", 100, "series per timeframe")
	flag.IntVar(&o.old, "old", 20, "of them, 1h series that stopped 60 days ago")
	flag.IntVar(&o.days, "days", 365, "days of 1h candles")
	flag.IntVar(&o.years, "years", 5, "years of 1d candles")
	flag.IntVar(&o.reads, "reads", 400, "store reads per range and layout")
	flag.IntVar(&o.conns, "conns", 16, "wrk connections")
	flag.IntVar(&o.runs, "runs", 5, "wrk runs per range and layout")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "wrk run per range and layout")
	flag.BoolVar(&o.keep, "keep", false, "keep the schemas")
	flag.Parse()
	if o.old >= o.symbols || o.symbols < 2 {
		fmt.Fprintln(os.Stderr, "compactbench: -old < -symbols, -symbols ≥ 2")
		os.Exit(2)
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compactbench:", err)
		os.Exit(1)
	}
}

// layout is one schema: its store and its api environment.
type layout struct {
	name, schema string
	db           *store.DB
	vars         map[string]string
	key          string
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	tag := randomHex(4)
	var layouts []*layout
	defer func() {
		for _, l := range layouts {
			if l.db != nil {
				l.db.Close()
			}
			if !o.keep {
				err = errors.Join(err, execSQL(context.Background(), o.databaseURL, "DROP SCHEMA "+l.schema+" CASCADE"))
			}
		}
	}()
	for _, name := range []string{"today", "packed"} {
		l, err := newLayout(ctx, o, name, "compactbench_"+name+"_"+tag)
		if err != nil {
			return err
		}
		layouts = append(layouts, l)
	}
	today, packed := layouts[0], layouts[1]
	now := time.Now().UTC()
	start := time.Now()
	n, err := seed(ctx, today.db, o, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "seeded %d candles in %s\n", n, time.Since(start).Round(time.Second))
	if _, err := packed.db.Pool.Exec(ctx, `INSERT INTO candles SELECT * FROM `+today.schema+`.candles`); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	start = time.Now()
	job := &worker.CompactJob{Store: packed.db, HotWindow: worker.DefaultCandleHotWindow(), Now: func() time.Time { return now }, MaxRows: math.MaxInt32}
	moved, err := job.Run(ctx)
	if err != nil {
		return err
	}
	took := time.Since(start)
	var total int64
	for _, m := range moved {
		total += m
	}
	fmt.Fprintf(out, "\nmover: packed %d candles in %s (%.0f candles/s), per timeframe %v\n\n", total, took.Round(time.Millisecond),
		float64(total)/took.Seconds(), moved)
	for _, l := range layouts {
		// FULL: the rows the mover deleted would otherwise still count in
		// the hot table's size (a live table reuses their space for new
		// candles instead).
		for _, t := range []string{"candles", "candle_blocks"} {
			if _, err := l.db.Pool.Exec(ctx, `VACUUM (FULL, ANALYZE) `+t); err != nil {
				return err
			}
		}
	}
	if err := sizes(ctx, out, today, packed); err != nil {
		return err
	}
	ranges := readRanges(o)
	fmt.Fprintf(out, "\nstore.DB.Candles, %d sequential reads per range and layout (µs)\n\n", o.reads)
	fmt.Fprintln(out, "| range | candles read | today p50 | today p99 | packed p50 | packed p99 |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, r := range ranges {
		lat, got, err := storeReads(ctx, []*store.DB{today.db, packed.db}, r, o.reads)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		var cells []string
		for _, l := range lat {
			cells = append(cells, strconv.Itoa(int(l[len(l)/2].Microseconds())), strconv.Itoa(int(l[len(l)*99/100].Microseconds())))
		}
		fmt.Fprintf(out, "| %s | %d | %s |\n", r.name, got, strings.Join(cells, " | "))
	}
	if o.bin == "" {
		return nil
	}
	bases := make([]string, len(layouts))
	for i, l := range layouts {
		base, stop, err := startAPI(o, l)
		if err != nil {
			return err
		}
		defer stop()
		bases[i] = base
	}
	fmt.Fprintf(out, "\nGET /ohlcv through `marketd api` (one per layout, both running), wrk -t1 -c%d -d%s, the symbols of a range in rotation, %d runs, the layouts' order swapped every run (ms)\n\n",
		o.conns, o.duration, o.runs)
	fmt.Fprintln(out, "| run | range | today req/s | today p50 | today p99 | packed req/s | packed p50 | packed p99 |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	type sample struct{ rps, p50, p99 []float64 }
	samples := make([][]sample, len(ranges))
	for ri := range ranges {
		samples[ri] = make([]sample, len(layouts))
	}
	for run := 1; run <= o.runs; run++ {
		for ri, r := range ranges {
			res := make([]wrkResult, len(layouts))
			for j := range layouts {
				i := j
				if run%2 == 0 {
					i = len(layouts) - 1 - j
				}
				var err error
				if res[i], err = httpReads(ctx, o, bases[i], layouts[i], r); err != nil {
					return fmt.Errorf("%s %s: %w", layouts[i].name, r.name, err)
				}
			}
			var cells []string
			for i, w := range res {
				rps := float64(w.Requests) / (float64(w.DurationUS) / 1e6)
				smp := &samples[ri][i]
				smp.rps, smp.p50, smp.p99 = append(smp.rps, rps), append(smp.p50, float64(w.P50)/1000), append(smp.p99, float64(w.P99)/1000)
				cells = append(cells, fmt.Sprintf("%.0f | %.2f | %.2f", rps, float64(w.P50)/1000, float64(w.P99)/1000))
			}
			fmt.Fprintf(out, "| %d | %s | %s |\n", run, r.name, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintf(out, "\nMedians of the %d runs (ms)\n\n", o.runs)
	fmt.Fprintln(out, "| range | today req/s | today p50 | today p99 | packed req/s | packed p50 | packed p99 | packed p99 ÷ today p99 |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	for ri, r := range ranges {
		var cells []string
		for _, smp := range samples[ri] {
			cells = append(cells, fmt.Sprintf("%.0f | %.2f | %.2f", median(smp.rps), median(smp.p50), median(smp.p99)))
		}
		fmt.Fprintf(out, "| %s | %s | %.2f |\n", r.name, strings.Join(cells, " | "), median(samples[ri][1].p99)/median(samples[ri][0].p99))
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func newLayout(ctx context.Context, o options, name, schema string) (*layout, error) {
	if err := execSQL(ctx, o.databaseURL, "CREATE SCHEMA "+schema); err != nil {
		return nil, err
	}
	l := &layout{name: name, schema: schema}
	u, err := url.Parse(o.databaseURL)
	if err != nil {
		return l, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	l.vars = map[string]string{"MARKET_DATABASE_URL": u.String(), "MARKET_REDIS_URL": o.redisURL,
		"MARKET_LOG_LEVEL": "warn", "MARKET_SECRET_KEY": randomHex(32)}
	if _, err := cli(ctx, l.vars, "migrate"); err != nil {
		return l, err
	}
	client, err := cli(ctx, l.vars, "clients", "create", "--org", "compactbench", "--tier", "enterprise", "--rate-limit", "100000000")
	if err != nil {
		return l, err
	}
	if l.key, err = cli(ctx, l.vars, "keys", "issue", "--client", client); err != nil {
		return l, err
	}
	l.db, err = store.Open(ctx, u.String(), store.Options{})
	return l, err
}

// symbol is the i-th synthetic base asset against USDT.
func symbol(i int) string {
	return fmt.Sprintf("%c%c%c_USDT", 'B'+i/676%24, 'A'+i/26%26, 'A'+i%26)
}

// seed writes the synthetic universe: per symbol a random walk of the
// timeframe's volatility, prices on a tick of five significant digits and
// volumes on a lot size, as an exchange quotes them.
func seed(ctx context.Context, db *store.DB, o options, now time.Time) (int, error) {
	r := mrand.New(mrand.NewPCG(37, 4))
	total := 0
	type spec struct {
		tf    domain.Timeframe
		n     int
		sigma float64
	}
	for _, s := range []spec{{domain.TF1h, o.days * 24, 0.006}, {domain.TF1d, o.years * 365, 0.03}, {domain.TF5m, 3 * 288, 0.0015}} {
		batch := map[store.CandleKey][]domain.Candle{}
		rows := 0
		for i := range o.symbols {
			end := s.tf.Truncate(now)
			if s.tf == domain.TF1h && i < o.old {
				end = end.AddDate(0, 0, -60)
			}
			k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: symbol(i), Timeframe: s.tf}
			batch[k] = walk(r, end.Add(-time.Duration(s.n-1)*s.tf.Duration()), s.n, s.tf, s.sigma)
			rows += s.n
			if rows >= 50000 {
				if err := db.UpsertCandleSeries(ctx, batch); err != nil {
					return total, err
				}
				total += rows
				batch, rows = map[store.CandleKey][]domain.Candle{}, 0
			}
		}
		if err := db.UpsertCandleSeries(ctx, batch); err != nil {
			return total, err
		}
		total += rows
	}
	return total, nil
}

func walk(r *mrand.Rand, start time.Time, n int, tf domain.Timeframe, sigma float64) []domain.Candle {
	p := math.Exp(r.Float64()*math.Log(1e7)) / 100 // 0.01 to 100,000, log-uniform
	tick := math.Pow10(int(math.Floor(math.Log10(p))) - 4)
	lotDecimals := max(0, min(6, int(math.Floor(math.Log10(p)))+1))
	onTick := func(v float64) float64 {
		if tick >= 1 {
			return math.Max(tick, math.Round(v/tick)*tick)
		}
		d := math.Round(-math.Log10(tick))
		return math.Max(tick, math.Round(v*math.Pow10(int(d)))/math.Pow10(int(d)))
	}
	out := make([]domain.Candle, n)
	closePrice := onTick(p)
	for i := range out {
		o := closePrice
		c := onTick(o * math.Exp(r.NormFloat64()*sigma))
		h := onTick(math.Max(o, c) * (1 + math.Abs(r.NormFloat64())*sigma/2))
		l := onTick(math.Min(o, c) * (1 - math.Abs(r.NormFloat64())*sigma/2))
		h, l = math.Max(h, math.Max(o, c)), math.Min(l, math.Min(o, c))
		v := math.Round(math.Exp(r.NormFloat64()+8)/p*math.Pow10(lotDecimals)) / math.Pow10(lotDecimals)
		out[i] = domain.Candle{Time: start.Add(time.Duration(i) * tf.Duration()), Open: o, High: h, Low: l, Close: c, Volume: v}
		closePrice = c
	}
	return out
}

func sizes(ctx context.Context, out io.Writer, today, packed *layout) error {
	type size struct {
		bytes, candles float64
	}
	measure := func(db *store.DB, q string) (size, error) {
		var s size
		err := db.Pool.QueryRow(ctx, q).Scan(&s.bytes, &s.candles)
		return s, err
	}
	rowSize, err := measure(today.db, `SELECT pg_total_relation_size('candles')::float8, count(*)::float8 FROM candles`)
	if err != nil {
		return err
	}
	hot, err := measure(packed.db, `SELECT pg_total_relation_size('candles')::float8, count(*)::float8 FROM candles`)
	if err != nil {
		return err
	}
	blocks, err := measure(packed.db, `SELECT pg_total_relation_size('candle_blocks')::float8, coalesce(sum(n), 0)::float8 FROM candle_blocks`)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "| storage | candles | bytes (heap + TOAST + indexes) | bytes per candle |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for _, r := range []struct {
		name string
		s    size
	}{{"today: every candle a row of `candles`", rowSize}, {"packed: the hot rows left in `candles`", hot},
		{"packed: `candle_blocks`", blocks}, {"packed: both", size{hot.bytes + blocks.bytes, hot.candles + blocks.candles}}} {
		fmt.Fprintf(out, "| %s | %.0f | %.1f MB | %.1f |\n", r.name, r.s.candles, r.s.bytes/1e6, r.s.bytes/math.Max(r.s.candles, 1))
	}
	for _, tf := range []domain.Timeframe{domain.TF5m, domain.TF1h, domain.TF1d} {
		var b, n float64
		if err := packed.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(pg_column_size(b.*)), 0)::float8, coalesce(sum(n), 0)::float8
			FROM candle_blocks b WHERE timeframe = $1`, string(tf)).Scan(&b, &n); err != nil {
			return err
		}
		fmt.Fprintf(out, "\n%s: %.0f candles packed, rows %.1f bytes a candle (without indexes)", tf, n, b/math.Max(n, 1))
	}
	fmt.Fprintln(out)
	return nil
}

// readRange is one GET /ohlcv read: a timeframe, a limit and the symbols
// it rotates over.
type readRange struct {
	name    string
	tf      domain.Timeframe
	limit   int
	symbols []string
}

func readRanges(o options) []readRange {
	var live, old []string
	for i := range o.symbols {
		if i < o.old {
			old = append(old, symbol(i))
		} else {
			live = append(live, symbol(i))
		}
	}
	return []readRange{
		{"1h newest 24 (hot window)", domain.TF1h, 24, live},
		{"1h newest 1,000 (across the boundary)", domain.TF1h, 1000, live},
		{"1h newest 1,000 of a delisted series (packed)", domain.TF1h, 1000, old},
		{"1d newest 1,000 (packed but the month)", domain.TF1d, 1000, live},
	}
}

// storeReads reads the range from each layout in turn, reads times each,
// alternating so that a change of the host's load weighs on both alike,
// and returns each layout's latencies, sorted, and the candles a read got.
func storeReads(ctx context.Context, dbs []*store.DB, r readRange, reads int) ([][]time.Duration, int, error) {
	lat := make([][]time.Duration, len(dbs))
	n := 0
	for i := range reads {
		k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: r.symbols[i%len(r.symbols)], Timeframe: r.tf}
		for j, db := range dbs {
			start := time.Now()
			cs, err := db.Candles(ctx, k, r.limit)
			if err != nil {
				return nil, 0, err
			}
			lat[j] = append(lat[j], time.Since(start))
			n = len(cs)
		}
	}
	for _, l := range lat {
		slices.Sort(l)
	}
	return lat, n, nil
}

type wrkResult struct {
	Requests   int64 `json:"requests"`
	DurationUS int64 `json:"duration_us"`
	P50        int64 `json:"p50"`
	P99        int64 `json:"p99"`
	Status     int64 `json:"status"`
	Errors     int64 `json:"errors"`
}

const wrkScript = `
local paths = {%s}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i %% #paths) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\nWRKJSON {"requests":%%d,"duration_us":%%d,"p50":%%d,"p99":%%d,"status":%%d,"errors":%%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout))
end
`

// startAPI starts `marketd api` on the layout's schema and returns its
// base URL and how to stop it.
func startAPI(o options, l *layout) (string, func(), error) {
	httpAddr, opsAddr := freeAddr(), freeAddr()
	cmd := exec.Command(o.bin, "api")
	cmd.Env = os.Environ()
	for k, v := range l.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "MARKET_HTTP_ADDR="+httpAddr, "MARKET_OPS_ADDR="+opsAddr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	if err := waitReady("http://"+opsAddr+"/readyz", 30*time.Second); err != nil {
		stop()
		return "", nil, fmt.Errorf("api not ready: %w: %s", err, stderr.String())
	}
	return "http://" + httpAddr, stop, nil
}

func httpReads(ctx context.Context, o options, base string, l *layout, r readRange) (wrkResult, error) {
	var paths []string
	for _, s := range r.symbols {
		paths = append(paths, strconv.Quote(fmt.Sprintf("/api/v1/public/ohlcv/crypto/binance/%s/%s?limit=%d", s, r.tf, r.limit)))
	}
	f, err := os.CreateTemp("", "compactbench-*.lua")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.Remove(f.Name())
	if _, err := fmt.Fprintf(f, wrkScript, strings.Join(paths, ", ")); err != nil {
		return wrkResult{}, err
	}
	f.Close()
	out, err := exec.CommandContext(ctx, o.wrk, "-t1", "-c"+strconv.Itoa(o.conns), "-d"+strconv.Itoa(int(o.duration.Seconds()))+"s",
		"--timeout", "10s", "-s", f.Name(), "-H", "X-API-Key: "+l.key, base).Output()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w", err)
	}
	_, line, ok := strings.Cut(string(out), "WRKJSON ")
	if !ok {
		return wrkResult{}, fmt.Errorf("wrk printed no report: %s", out)
	}
	line, _, _ = strings.Cut(line, "\n")
	var res wrkResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return res, err
	}
	if res.Status > 0 || res.Errors > 0 || res.Requests == 0 {
		return res, fmt.Errorf("invalid run: %d requests, %d non-2xx, %d socket errors", res.Requests, res.Status, res.Errors)
	}
	return res, nil
}

func waitReady(u string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %v", u, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
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
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
