package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
)

const syntheticSeed = 7

type deployment struct {
	o        Options
	dir      string
	pp       *ports
	pgA, pgB *pgCluster
	rs       *redisSet
	env      []string
	apis     []*proc
	apiPorts [][2]int
	workers  []*proc
	workOps  []int
	scheds   []*proc
	schedOps []int
	haproxy  *proc
	front    int
	key      string

	lg     *exec.Cmd
	lgIn   io.WriteCloser
	lgOut  *bufio.Scanner
	lgMu   sync.Mutex
	events *producer
}

func (d *deployment) logf(format string, args ...any) {
	fmt.Fprintf(d.o.Log, time.Now().Format("15:04:05.000")+" ha: "+format+"\n", args...)
}

// Run brings the deployment up, runs the faults and checks what was lost.
func Run(ctx context.Context, o Options) (*Results, error) {
	for _, b := range []string{"redis-server", "redis-sentinel", "haproxy"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%w: %s (run .ci/ha-deps)", errSkip, b)
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Self = self
	}
	d := &deployment{o: o, pp: &ports{next: 27000 + (os.Getpid()%40)*20}}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "marketd-ha-")
		if err != nil {
			return nil, err
		}
		o.Dir = dir
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	d.dir = o.Dir
	_ = os.Chmod(d.dir, 0o755)
	defer d.teardown()
	if err := d.up(ctx); err != nil {
		return nil, err
	}
	res := &Results{}
	if err := d.faults(res); err != nil {
		return res, err
	}
	d.check(ctx, res)
	return res, nil
}

func (d *deployment) up(ctx context.Context) error {
	if d.o.Marketd == "" {
		d.o.Marketd = filepath.Join(d.dir, "marketd")
		d.logf("building marketd")
		if out, err := exec.Command("go", "build", "-o", d.o.Marketd, "github.com/marketscreener/market/cmd/marketd").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	var err error
	d.logf("postgres primary and streaming replica")
	if d.pgA, err = newPG(d.dir, "pg-a", d.pp.get(), 0); err != nil {
		return err
	}
	if d.pgB, err = newPG(d.dir, "pg-b", d.pp.get(), d.pgA.port); err != nil {
		return err
	}
	d.logf("redis primary, replica and three sentinels")
	if d.rs, err = newRedisSet(d.dir, d.pp); err != nil {
		return err
	}
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", d.pgA.port, d.pgB.port)
	d.env = []string{
		"MARKET_DATABASE_URL=" + dbURL,
		fmt.Sprintf("MARKET_DATABASE_READ_URL=postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", d.pgB.port),
		"MARKET_REDIS_URL=redis://ignored:1/0",
		"MARKET_REDIS_SENTINEL_ADDRS=" + d.rs.sentinelAddrs(),
		"MARKET_REDIS_SENTINEL_MASTER=" + sentinelMaster,
		"MARKET_FEEDS=synthetic",
		"MARKET_SYNTHETIC_SEED=" + strconv.Itoa(syntheticSeed),
		"MARKET_SECRET_KEY=" + strings.Repeat("cd", 32),
		"MARKET_LOG_LEVEL=warn",
		"MARKET_TICKER_INTERVAL=5s",
		"MARKET_CANDLE_INTERVAL=20s",
		"MARKET_SCORE_INTERVAL=30s",
		"MARKET_STATS_INTERVAL=0",
		"MARKET_WEBHOOK_INTERVAL=1s",
		"MARKET_WEBHOOK_ALLOW_PRIVATE=true",
		"MARKET_WEBHOOK_CA_FILE=" + filepath.Join(d.dir, "cert.pem"),
	}
	if err := writeCert(d.dir); err != nil {
		return err
	}
	if out, err := d.cli("migrate"); err != nil {
		return fmt.Errorf("migrate: %v: %s", err, out)
	}
	id, err := d.cli("clients", "create", "--org", "HA", "--tier", "business", "--rate-limit", "1000000")
	if err != nil {
		return fmt.Errorf("clients create: %v: %s", err, id)
	}
	if d.key, err = d.cli("keys", "issue", "--client", strings.TrimSpace(id)); err != nil {
		return fmt.Errorf("keys issue: %v: %s", err, d.key)
	}
	d.key = strings.TrimSpace(d.key)

	d.logf("two api replicas behind haproxy")
	for i := range 2 {
		ports := [2]int{d.pp.get(), d.pp.get()}
		d.apiPorts = append(d.apiPorts, ports)
		d.apis = append(d.apis, d.marketd(fmt.Sprintf("api%d", i), "api", ports[0], ports[1]))
	}
	for i, p := range d.apis {
		if err := p.start(); err != nil {
			return err
		}
		if err := d.waitReady(d.apiPorts[i][1], "/readyz"); err != nil {
			return err
		}
	}
	d.front = d.pp.get()
	cfg := filepath.Join(d.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(d.front, d.apiPorts)), 0o644); err != nil {
		return err
	}
	d.haproxy = &proc{name: "haproxy", bin: "haproxy", args: []string{"-db", "-f", cfg}, log: filepath.Join(d.dir, "haproxy.log")}
	if err := d.haproxy.start(); err != nil {
		return err
	}
	if err := waitFor(30*time.Second, "haproxy", func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/openapi.json", d.front)) }); err != nil {
		return err
	}

	d.logf("load generator (a process of its own)")
	if err := d.startLoadgen(); err != nil {
		return err
	}
	d.logf("two workers and two schedulers")
	for i := range 2 {
		ops := d.pp.get()
		d.workOps = append(d.workOps, ops)
		d.workers = append(d.workers, d.marketd(fmt.Sprintf("worker%d", i), "worker", 0, ops))
		sops := d.pp.get()
		d.schedOps = append(d.schedOps, sops)
		d.scheds = append(d.scheds, d.marketd(fmt.Sprintf("scheduler%d", i), "scheduler", 0, sops))
	}
	for i := range 2 {
		if err := d.workers[i].start(); err != nil {
			return err
		}
		if err := d.scheds[i].start(); err != nil {
			return err
		}
	}
	for i := range 2 {
		if err := d.waitReady(d.workOps[i], "/healthz"); err != nil {
			return err
		}
		if err := d.waitReady(d.schedOps[i], "/healthz"); err != nil {
			return err
		}
	}
	d.events = newProducer(dbURL)
	go d.events.run()
	return nil
}

func (d *deployment) base() string { return fmt.Sprintf("http://127.0.0.1:%d/api/v1/public", d.front) }

func (d *deployment) marketd(name, role string, httpPort, opsPort int) *proc {
	env := append([]string{}, d.env...)
	if httpPort > 0 {
		env = append(env, fmt.Sprintf("MARKET_HTTP_ADDR=127.0.0.1:%d", httpPort))
	}
	env = append(env, fmt.Sprintf("MARKET_OPS_ADDR=127.0.0.1:%d", opsPort))
	return &proc{name: name, bin: d.o.Marketd, args: []string{role}, env: env, log: filepath.Join(d.dir, name+".log")}
}

func (d *deployment) cli(args ...string) (string, error) {
	cmd := exec.Command(d.o.Marketd, args...)
	cmd.Env = append(os.Environ(), d.env...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out) + string(ee.Stderr), err
	}
	return string(out), err
}

func (d *deployment) waitReady(port int, path string) error {
	return waitFor(90*time.Second, fmt.Sprintf("ops :%d%s", port, path), func() error {
		return httpOK(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	})
}

func (d *deployment) startLoadgen() error {
	cmd := exec.Command(d.o.Self, "-base", d.base(), "-key", d.key, "-dir", d.dir)
	cmd.Env = append(os.Environ(), roleEnv+"=loadgen")
	stderr, err := os.Create(filepath.Join(d.dir, "loadgen.log"))
	if err != nil {
		return err
	}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.lg, d.lgIn = cmd, in
	d.lgOut = bufio.NewScanner(out)
	d.lgOut.Buffer(make([]byte, 1<<20), 256<<20)
	if !d.lgOut.Scan() || d.lgOut.Text() != "ready" {
		b, _ := os.ReadFile(stderr.Name())
		return fmt.Errorf("load generator did not start: %s", b)
	}
	return nil
}

// ask sends the load generator a command and decodes its answer.
func (d *deployment) ask(cmd string, out any) error {
	d.lgMu.Lock()
	defer d.lgMu.Unlock()
	if _, err := fmt.Fprintln(d.lgIn, cmd); err != nil {
		return err
	}
	if !d.lgOut.Scan() {
		return fmt.Errorf("load generator gone: %v", d.lgOut.Err())
	}
	return json.Unmarshal(d.lgOut.Bytes(), out)
}

func (d *deployment) teardown() {
	if d.events != nil {
		d.events.stop()
	}
	if d.lg != nil {
		d.lgIn.Close()
		done := make(chan struct{})
		go func() { _ = d.lg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = d.lg.Process.Kill()
		}
	}
	for _, group := range [][]*proc{d.scheds, d.workers, d.apis, {d.haproxy}} {
		for _, p := range group {
			if p != nil {
				p.kill()
			}
		}
	}
	if d.rs != nil {
		d.rs.stopAll()
	}
	for _, c := range []*pgCluster{d.pgA, d.pgB} {
		if c != nil {
			c.stopImmediate()
		}
	}
}

// phase runs one fault between two marks of the load generator.
func (d *deployment) phase(res *Results, name string, settle time.Duration, fault func() (time.Duration, string, error)) error {
	var discard phaseStats
	if err := d.ask("mark "+name, &discard); err != nil {
		return err
	}
	d.logf("phase %s", name)
	rec, note, err := fault()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if d.o.Short {
		settle /= 2
	}
	time.Sleep(settle)
	var st phaseStats
	if err := d.ask("mark after-"+name, &st); err != nil {
		return err
	}
	f := Fault{Name: name, Requests: st.OK + st.Failed, Non2xx: st.Failed, Recovery: rec, Codes: st.Codes, ByPath: st.ByPath, Examples: st.Examples, Note: note}
	if !st.FirstFail.IsZero() {
		f.ErrorWindow = st.LastFail.Sub(st.FirstFail)
	}
	d.logf("phase %s: %d requests, %d non-2xx, window %.1fs %v %v", name, f.Requests, f.Non2xx, f.ErrorWindow.Seconds(), f.Codes, f.Examples)
	res.Faults = append(res.Faults, f)
	return nil
}

func (d *deployment) restartAfter(p *proc, down time.Duration, ready func() error) (time.Duration, string, error) {
	p.kill()
	killed := time.Now()
	time.Sleep(down)
	if err := p.start(); err != nil {
		return 0, "", err
	}
	if err := ready(); err != nil {
		return 0, "", err
	}
	return time.Since(killed), "", nil
}

func (d *deployment) faults(res *Results) error {
	// Warm: every path the load generator asks answers 200 (the first
	// ingests are in), then the streams have a few seconds to open.
	for _, path := range loadPaths {
		err := waitFor(3*time.Minute, "warm-up "+path, func() error {
			req, _ := http.NewRequest(http.MethodGet, d.base()+path, nil)
			req.Header.Set("X-API-Key", d.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%d", resp.StatusCode)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	time.Sleep(3 * time.Second)
	if err := d.phase(res, "baseline (no fault)", 10*time.Second, func() (time.Duration, string, error) { return 0, "", nil }); err != nil {
		return err
	}
	apiKill := func() (time.Duration, string, error) {
		return d.restartAfter(d.apis[0], 3*time.Second, func() error { return d.waitReady(d.apiPorts[0][1], "/readyz") })
	}
	if err := d.phase(res, "SIGKILL an api", 10*time.Second, apiKill); err != nil {
		return err
	}
	if !d.o.Short {
		if err := d.phase(res, "SIGKILL a worker", 10*time.Second, func() (time.Duration, string, error) {
			return d.restartAfter(d.workers[0], 3*time.Second, func() error { return d.waitReady(d.workOps[0], "/healthz") })
		}); err != nil {
			return err
		}
		if err := d.phase(res, "SIGKILL a scheduler", 10*time.Second, func() (time.Duration, string, error) {
			return d.restartAfter(d.scheds[0], 3*time.Second, func() error { return d.waitReady(d.schedOps[0], "/healthz") })
		}); err != nil {
			return err
		}
	}
	if err := d.phase(res, "SIGKILL the Redis primary", 15*time.Second, d.redisFailover); err != nil {
		return err
	}
	if d.o.Short {
		return nil
	}
	if err := d.phase(res, "SIGKILL the Postgres primary", 20*time.Second, d.pgFailover); err != nil {
		return err
	}
	return d.phase(res, "rolling restart (every process)", 10*time.Second, d.rolling)
}

// redisFailover SIGKILLs the primary the sentinels name, and measures
// until they name the other node; the killed node comes back as a replica.
func (d *deployment) redisFailover() (time.Duration, string, error) {
	i, err := d.rs.primary()
	if err != nil {
		return 0, "", err
	}
	d.rs.nodes[i].kill()
	killed := time.Now()
	err = waitFor(60*time.Second, "sentinel promotion", func() error {
		j, err := d.rs.primary()
		if err != nil {
			return err
		}
		if j == i {
			return fmt.Errorf("still the old primary")
		}
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.rs.nodePorts[j])})
		defer c.Close()
		role, err := c.Do(context.Background(), "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("promoted node's role %v %v", role, err)
		}
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	promoted := time.Since(killed)
	if err := d.rs.nodes[i].start(); err != nil { // the sentinels make it a replica
		return 0, "", err
	}
	return promoted, "recovery: until the sentinels name the promoted replica", nil
}

// pgFailover SIGKILLs the Postgres primary and promotes the replica;
// recovery is until a write through the multi-host URL succeeds.
func (d *deployment) pgFailover() (time.Duration, string, error) {
	if err := d.pgA.sigkill(); err != nil {
		return 0, "", err
	}
	killed := time.Now()
	time.Sleep(pgDetect) // a failover manager's detection (Patroni's ttl, repmgr's checks)
	if err := d.pgB.run("pg_ctl", "-D", d.pgB.dir, "promote", "-w"); err != nil {
		return 0, "", err
	}
	err := waitFor(60*time.Second, "writes on the promoted replica", func() error {
		return d.pgB.exec(context.Background(), "CREATE TABLE IF NOT EXISTS ha_probe (n int); INSERT INTO ha_probe VALUES (1)")
	})
	if err != nil {
		return 0, "", err
	}
	// Writes back: the verdict-event writer (the multi-host URL) commits again.
	err = waitFor(60*time.Second, "verdict events written again", func() error {
		if d.events.longestGap(killed) == 0 || d.events.lastWrite().Before(killed) {
			return fmt.Errorf("no write since the kill")
		}
		return nil
	})
	return d.events.longestGap(killed.Add(-time.Second)), fmt.Sprintf("promoted %s after the kill; recovery: the longest gap between two committed writes through the multi-host URL", pgDetect), err
}

// pgDetect is how long after the Postgres primary's death the replica is
// promoted.
const pgDetect = 5 * time.Second

// rolling stops (SIGTERM) and starts every process one at a time, each
// ready before the next.
func (d *deployment) rolling() (time.Duration, string, error) {
	began := time.Now()
	for i, p := range d.apis {
		p.stop()
		if err := p.start(); err != nil {
			return 0, "", err
		}
		if err := d.waitReady(d.apiPorts[i][1], "/readyz"); err != nil {
			return 0, "", err
		}
		time.Sleep(2 * time.Second) // HAProxy's checks see it up (rise 2 × 500 ms)
	}
	for i := range 2 {
		for _, x := range []struct {
			p   *proc
			ops int
		}{{d.workers[i], d.workOps[i]}, {d.scheds[i], d.schedOps[i]}} {
			x.p.stop()
			if err := x.p.start(); err != nil {
				return 0, "", err
			}
			if err := d.waitReady(x.ops, "/healthz"); err != nil {
				return 0, "", err
			}
		}
	}
	return time.Since(began), "recovery: the whole roll", nil
}

// check waits for the streams and the webhooks to catch up with every
// verdict event written, and compares the stored closed candles with the
// synthetic feed's.
func (d *deployment) check(ctx context.Context, res *Results) {
	written := d.events.stop()
	res.EventsWritten = len(written)
	if len(written) == 0 {
		res.Problems = append(res.Problems, "no verdict event was written")
	}
	var r report
	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := d.ask("report", &r); err != nil {
			res.Problems = append(res.Problems, err.Error())
			return
		}
		res.StreamMissing, res.StreamDups, res.StreamResyncs, res.StreamResumes = nil, r.StreamDups, r.StreamResyncs, r.Reconnects
		missingAny := false
		for _, ids := range r.StreamIDs {
			got := map[string]bool{}
			for _, id := range ids {
				got[id] = true
			}
			n := 0
			for _, id := range written {
				if !got[id] {
					n++
				}
			}
			res.StreamMissing = append(res.StreamMissing, n)
			missingAny = missingAny || n > 0
		}
		res.WebhookMissing, res.WebhookTwice = 0, 0
		for _, id := range written {
			switch c := r.Webhooks[id]; {
			case c == 0:
				res.WebhookMissing++
			case c > 1:
				res.WebhookTwice++
			}
		}
		if (!missingAny && res.WebhookMissing == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for i, n := range res.StreamMissing {
		if n > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("stream %d: %d of %d verdict events never arrived", i, n, len(written)))
		}
		if res.StreamDups[i] > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("stream %d: %d verdict events arrived twice", i, res.StreamDups[i]))
		}
	}
	if res.WebhookMissing > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d verdict events never delivered by webhook", res.WebhookMissing, len(written)))
	}
	if res.WebhookTwice > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d verdict events delivered twice by webhook", res.WebhookTwice))
	}
	d.checkCandles(ctx, res)
}

// checkCandles compares every stored closed candle of the binance and okx
// spot series, of every timeframe up to 15m, opened during the run, with
// the synthetic feed's (a pure function of the seed and the open time).
func (d *deployment) checkCandles(ctx context.Context, res *Results) {
	pool, err := pgxpool.New(ctx, d.events.url)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return
	}
	defer pool.Close()
	syn := feeds.NewSynthetic(syntheticSeed, nil)
	// From the minute the run began, through the candles closed a candle
	// interval and a margin ago (ingested since), at least one 1m close.
	from := d.events.began.Truncate(time.Minute)
	if wait := time.Until(from.Add(time.Minute + 30*time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	through := time.Now().Add(-30 * time.Second)
	for _, c := range []domain.Combination{{Market: "crypto", Exchange: "binance", Instrument: "spot"}, {Market: "crypto", Exchange: "okx", Instrument: "spot"}} {
		syms, _ := syn.Symbols(ctx, c)
		for _, tf := range []domain.Timeframe{"1m", "5m", "15m"} {
			dur := tfDuration(tf)
			for _, sym := range syms {
				want, err := syn.Candles(ctx, c, sym, tf, from, 1000)
				if err != nil {
					continue
				}
				rows, err := pool.Query(ctx, `SELECT open_time, open, high, low, close, volume FROM candles
					WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND open_time >= $5`, c.Market, c.Exchange, sym, string(tf), from)
				if err != nil {
					res.Problems = append(res.Problems, err.Error())
					return
				}
				stored := map[int64][5]float64{}
				for rows.Next() {
					var t time.Time
					var v [5]float64
					if rows.Scan(&t, &v[0], &v[1], &v[2], &v[3], &v[4]) == nil {
						stored[t.Unix()] = v
					}
				}
				rows.Close()
				for _, w := range want {
					if w.Time.Before(from) || w.Time.Add(dur).After(through) {
						continue
					}
					res.CandlesChecked++
					got, ok := stored[w.Time.Unix()]
					exp := [5]float64{w.Open, w.High, w.Low, w.Close, w.Volume}
					if !ok {
						res.CandlesBad = append(res.CandlesBad, fmt.Sprintf("%s %s %s %s: missing", c, sym, tf, w.Time.Format("15:04")))
					} else if !same(got, exp) {
						res.CandlesBad = append(res.CandlesBad, fmt.Sprintf("%s %s %s %s: stored %v, the feed's %v", c, sym, tf, w.Time.Format("15:04"), got, exp))
					}
				}
			}
		}
	}
	if res.CandlesChecked == 0 {
		res.Problems = append(res.Problems, "no closed candle checked")
	}
	if n := len(res.CandlesBad); n > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d closed candles missing or not final; first: %v", n, res.CandlesChecked, res.CandlesBad[:min(n, 5)]))
	}
}

func same(a, b [5]float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

func tfDuration(tf domain.Timeframe) time.Duration {
	switch tf {
	case "1m":
		return time.Minute
	case "5m":
		return 5 * time.Minute
	}
	return 15 * time.Minute
}

// producer writes a verdict event every 250 ms through the multi-host URL
// (the primary, wherever it is), retrying each until it commits.
type producer struct {
	url   string
	began time.Time
	mu    sync.Mutex
	ids   []string
	times []time.Time // when each write committed
	quit  chan struct{}
	done  chan struct{}
}

func newProducer(url string) *producer {
	return &producer{url: url, began: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
}

func (p *producer) run() {
	defer close(p.done)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, p.url)
	if err != nil {
		return
	}
	defer pool.Close()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	verdicts := []string{"growth", "neutral", "decline"}
	for n := 0; ; n++ {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		for {
			var id int64
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := pool.QueryRow(cctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, model_version)
				VALUES ('crypto', $1, $2, $3, 10, now(), 'ha') RETURNING id`, fmt.Sprintf("HA%d_USDT", n), verdicts[n%3], verdicts[(n+1)%3]).Scan(&id)
			cancel()
			if err == nil {
				p.mu.Lock()
				p.ids = append(p.ids, strconv.FormatInt(id, 10))
				p.times = append(p.times, time.Now())
				p.mu.Unlock()
				break
			}
			select {
			case <-p.quit:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// longestGap is the longest time between two committed writes from
// `from` on (the writes stop meanwhile while no primary takes them).
func (p *producer) longestGap(from time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, t := range p.times {
		if t.Before(from) {
			continue
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return gap
}

func (p *producer) lastWrite() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.times) == 0 {
		return time.Time{}
	}
	return p.times[len(p.times)-1]
}

// stop ends the writes (once) and returns the ids of the events written.
func (p *producer) stop() []string {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids
}
