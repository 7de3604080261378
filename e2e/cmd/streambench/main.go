// Command streambench measures the event stream (GET /stream). Three
// modes:
//
// -mode latency (the default): how long a committed verdict change takes
// to reach every open stream, over several api replicas, and the api
// processes' CPU per delivered event, against a baseline in the same run:
// a bare SSE broadcaster (this program with -bare, another process)
// writing the same bytes to the same number of connections the moment it
// is told, with no Postgres and no poll.
//
//  1. it creates a fresh schema in the test database, migrates it with
//     the marketd binary, creates enterprise clients (50 streams each) and
//     their keys;
//
//  2. it starts -replicas api processes (marketd api, ports 19410…) and
//     the bare broadcaster (port 19430), and opens -streams connections,
//     spread over the replicas, and as many to the broadcaster;
//
//  3. every -interval it commits one verdict change (and tells the
//     broadcaster at the same instant), -events times;
//
//  4. it prints the commit-to-receipt latency over every (event, stream)
//     pair (p50, p99, max), events missing or received twice (must be 0),
//     and the api processes' CPU per delivered event; then stops them and
//     drops the schema.
//
//     go run ./e2e/cmd/streambench -marketd bin/marketd [-streams 500] [-replicas 2] [-events 40] [-interval 100ms]
//
// -mode replay: replays must not take the pool from request traffic. It
// fills a full 48 h log (-screener rows over the 9 combinations of the
// global region, one per combination every 10 s, and -verdicts verdict
// changes), starts one api process, opens -streams streams of one
// enterprise key resuming from the log's oldest id, and meanwhile
// measures another client's GET /usage (-usage-rate a second, for as long
// as the replays last and at least -usage-for): latency p50/p99/max and
// non-200 answers. Then it prints each replay's duration and events, and
// the api's stream query durations (marketd_stream_query_duration_seconds:
// how many, and how many over 1 s and 2 s).
//
//	go run ./e2e/cmd/streambench -marketd bin/marketd -mode replay [-streams 16] [-screener 155520] [-verdicts 20000]
//
// -mode hold: streams must not wait for strangers. One api process, one
// live stream of screener events, and a screener refresh committed every
// -every; after a few seconds a write transaction in another database on
// the same server and an idle-in-transaction session holding an xid in
// this one are held open for -hold. It prints the longest gap between two
// screener events received during the hold and how many refreshes were
// committed and received.
//
//	go run ./e2e/cmd/streambench -marketd bin/marketd -mode hold [-hold 30s] [-every 1s]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// bench is what every mode shares: the schema, the store on it, the
// marketd environment.
type bench struct {
	bin    string
	dbURL  string
	schema string
	env    []string
	db     *store.DB
	admin  *pgx.Conn
}

// newBench creates and migrates a fresh schema.
func newBench(ctx context.Context, bin, dbURL, redisURL string) *bench {
	b := &bench{bin: bin, dbURL: dbURL, schema: fmt.Sprintf("streambench_%d", os.Getpid())}
	admin, err := pgx.Connect(ctx, dbURL)
	check(err)
	b.admin = admin
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+b.schema)
	check(err)
	url := dbURL + "&search_path=" + b.schema
	b.env = append(os.Environ(), "MARKET_DATABASE_URL="+url, "MARKET_REDIS_URL="+redisURL, "MARKET_LOG_LEVEL=warn")
	cmd := exec.Command(bin, "migrate")
	cmd.Env = b.env
	if out, err := cmd.CombinedOutput(); err != nil {
		b.close()
		log.Fatalf("migrate: %v: %s", err, out)
	}
	b.db, err = store.Open(ctx, dbURL, store.Options{Schema: b.schema, MaxConns: 4})
	check(err)
	return b
}

func (b *bench) close() {
	if b.db != nil {
		b.db.Close()
	}
	_, _ = b.admin.Exec(context.Background(), "DROP SCHEMA "+b.schema+" CASCADE")
	_ = b.admin.Close(context.Background())
}

// client creates an enterprise client and returns a key of it.
func (b *bench) client(ctx context.Context, name string) string {
	c := &domain.Client{OrgName: name, Tier: domain.Enterprise, Markets: domain.Markets}
	check(b.db.CreateClient(ctx, c))
	key, _, err := b.db.IssueKey(ctx, c.ID)
	check(err)
	return key
}

// api starts replica i of marketd api and waits until it is ready.
func (b *bench) api(i int) *exec.Cmd {
	p := exec.Command(b.bin, "api")
	p.Env = append(b.env, fmt.Sprintf("MARKET_HTTP_ADDR=127.0.0.1:%d", 19410+i), fmt.Sprintf("MARKET_OPS_ADDR=127.0.0.1:%d", 19420+i))
	p.Stderr = os.Stderr
	check(p.Start())
	return p
}

func main() {
	bare := flag.Bool("bare", false, "run as the bare SSE broadcaster (internal)")
	mode := flag.String("mode", "latency", "latency, replay or hold (see the command's doc)")
	verdicts := flag.Int("verdicts", 20000, "replay: verdict changes in the 48 h log")
	screener := flag.Int("screener", 155520, "replay: screener events in the 48 h log (9 combinations, one every 10 s each: 155,520)")
	usageRate := flag.Int("usage-rate", 8, "replay: GET /usage requests a second (the other client's; enterprise allows 10)")
	usageFor := flag.Duration("usage-for", 20*time.Second, "replay: measure GET /usage at least this long")
	hold := flag.Duration("hold", 30*time.Second, "hold: how long the outside transactions stay open")
	every := flag.Duration("every", time.Second, "hold: a screener refresh committed this often")
	bin := flag.String("marketd", "bin/marketd", "the marketd binary")
	streams := flag.Int("streams", 500, "open streams (and as many to the baseline)")
	replicas := flag.Int("replicas", 2, "api replicas")
	events := flag.Int("events", 40, "verdict changes committed")
	interval := flag.Duration("interval", 100*time.Millisecond, "pause between two commits")
	dbURL := flag.String("db", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "Postgres (a schema is created and dropped)")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/15", "Redis")
	flag.Parse()
	if *bare {
		runBare()
		return
	}
	ctx := context.Background()
	b := newBench(ctx, *bin, *dbURL, *redisURL)
	defer b.close()
	switch *mode {
	case "latency":
		runLatency(ctx, b, *streams, *replicas, *events, *interval)
	case "replay":
		if !flagSet("streams") {
			*streams = 16
		}
		runReplay(ctx, b, *streams, *verdicts, *screener, *usageRate, *usageFor)
	case "hold":
		runHold(ctx, b, *hold, *every)
	default:
		log.Printf("unknown -mode %q (latency, replay, hold)", *mode)
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func runLatency(ctx context.Context, b *bench, streams, replicas, events int, interval time.Duration) {
	db := b.db
	var keys []string
	for len(keys)*50 < streams {
		keys = append(keys, b.client(ctx, fmt.Sprintf("bench %d", len(keys))))
	}

	var procs []*exec.Cmd
	var bases []string
	for i := range replicas {
		procs = append(procs, b.api(i))
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", 19410+i))
	}
	self, _ := os.Executable()
	bp := exec.Command(self, "-bare")
	bp.Stderr = os.Stderr
	check(bp.Start())
	defer func() {
		for _, p := range append(procs, bp) {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := range replicas {
		waitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", 19420+i))
	}
	waitReady("http://127.0.0.1:19430/ready")

	commits := make([]time.Time, events)
	var mu sync.Mutex
	live := newRecorder(events)
	base := newRecorder(events)
	for i := range streams {
		go live.read(bases[i%len(bases)]+"/api/v1/public/stream?events=verdict_changed", keys[i/50], &mu, commits)
		go base.read("http://127.0.0.1:19430/stream", "", &mu, commits)
	}
	live.waitOpen(streams)
	base.waitOpen(streams)
	cpu0 := cpuOf(procs)

	for i := range events {
		var id int64
		mu.Lock()
		err := db.Pool.QueryRow(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
			VALUES ('crypto', $1, 'neutral', 'growth', 30, clock_timestamp()) RETURNING id`, fmt.Sprintf("B%d_USDT", i)).Scan(&id)
		commits[i] = time.Now()
		mu.Unlock()
		check(err)
		live.ids.Store(id, i)
		base.ids.Store(id, i)
		resp, err := http.Post("http://127.0.0.1:19430/publish?id="+strconv.FormatInt(id, 10), "text/plain", nil)
		check(err)
		resp.Body.Close()
		time.Sleep(interval)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (live.count() < streams*events || base.count() < streams*events) {
		time.Sleep(50 * time.Millisecond)
	}
	cpu := cpuOf(procs) - cpu0
	fmt.Printf("streams %d over %d api replicas, %d events every %s\n", streams, replicas, events, interval)
	b50, b99, bmax := base.report()
	l50, l99, lmax := live.report()
	fmt.Printf("baseline (bare broadcaster): p50 %s  p99 %s  max %s  missing %d  twice %d\n", b50, b99, bmax, base.missing(streams*events), base.twice)
	fmt.Printf("GET /stream:                 p50 %s  p99 %s  max %s  missing %d  twice %d\n", l50, l99, lmax, live.missing(streams*events), live.twice)
	fmt.Printf("ratio stream/baseline: p50 %.1f  p99 %.1f\n", float64(l50)/float64(max(b50, 1)), float64(l99)/float64(max(b99, 1)))
	fmt.Printf("api CPU per delivered event: %s (%d deliveries, %s in all replicas)\n",
		time.Duration(int64(cpu)/int64(max(live.count(), 1))), live.count(), cpu)
}

// recorder collects receipts: latency of each (event, stream).
type recorder struct {
	ids   sync.Map // verdict event id → index
	mu    sync.Mutex
	open  int
	lat   []time.Duration
	seen  map[string]bool
	twice int
}

func newRecorder(n int) *recorder { return &recorder{seen: map[string]bool{}} }

func (r *recorder) read(url, key string, commitMu *sync.Mutex, commits []time.Time) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		log.Fatalf("open %s: %v %v", url, resp, err)
	}
	r.mu.Lock()
	r.open++
	conn := r.open
	r.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		now := time.Now()
		var v struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(line[6:]), &v) != nil {
			continue
		}
		id, _ := strconv.ParseInt(v.ID, 10, 64)
		i, ok := r.ids.Load(id)
		for !ok { // received before the driver stored the id: wait for it
			time.Sleep(time.Millisecond)
			i, ok = r.ids.Load(id)
		}
		commitMu.Lock()
		at := commits[i.(int)]
		commitMu.Unlock()
		k := fmt.Sprintf("%d/%d", conn, id)
		r.mu.Lock()
		if r.seen[k] {
			r.twice++
		}
		r.seen[k] = true
		r.lat = append(r.lat, now.Sub(at))
		r.mu.Unlock()
	}
}

func (r *recorder) waitOpen(n int) {
	for {
		r.mu.Lock()
		o := r.open
		r.mu.Unlock()
		if o >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *recorder) missing(want int) int { return want - r.count() }

func (r *recorder) report() (p50, p99, pmax time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond / 10), s[len(s)*99/100].Round(time.Millisecond / 10), s[len(s)-1].Round(time.Millisecond / 10)
}

// runBare is the baseline: an SSE server that writes an event to every
// connection when told to, from memory.
func runBare() {
	var mu sync.Mutex
	subs := map[chan []byte]bool{}
	http.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {})
	http.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan []byte, 1024)
		mu.Lock()
		subs[ch] = true
		mu.Unlock()
		defer func() { mu.Lock(); delete(subs, ch); mu.Unlock() }()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = w.Write([]byte("retry: 2000\n\n"))
		_ = rc.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case b := <-ch:
				if _, err := w.Write(b); err != nil {
					return
				}
				_ = rc.Flush()
			}
		}
	})
	http.HandleFunc("/publish", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		b := []byte("id: " + id + "\nevent: verdict_changed\ndata: " + `{"id":"` + id + `","event":"verdict_changed","market":"crypto","symbol":"B_USDT","old_verdict":"neutral","new_verdict":"growth","overall_score":30,"timestamp":"2026-11-22T10:15:00Z"}` + "\n\n")
		mu.Lock()
		for ch := range subs {
			ch <- b
		}
		mu.Unlock()
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:19430", nil))
}

func waitReady(url string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatalf("%s not ready", url)
}

// cpuOf is the user+system CPU the processes used so far (Linux).
func cpuOf(ps []*exec.Cmd) time.Duration {
	var total time.Duration
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+s) * 10 * time.Millisecond // USER_HZ = 100
	}
	return total
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
