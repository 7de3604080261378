package scheduler_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/scheduler"
	"github.com/marketscreener/market/worker"
)

// TestReplicasEnqueueEachTickOnce runs three schedulers on the same tick:
// every job is enqueued exactly once.
func TestReplicasEnqueueEachTickOnce(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	entries := scheduler.IngestEntries(domain.DefaultRegion, nil, 10*time.Second, time.Minute)
	tick := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	now := func() time.Time { return tick.Add(3 * time.Second) }
	want := 0
	for _, e := range entries {
		want += len(e.Tasks(tick))
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fresh int
	)
	for range 3 {
		s, err := scheduler.New(scheduler.Config{RedisURL: url, Now: now, Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for _, e := range entries {
				n += s.EnqueueTick(context.Background(), e, tick)
			}
			mu.Lock()
			fresh += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if fresh != want {
		t.Fatalf("three replicas enqueued %d fresh tasks, want %d (each once)", fresh, want)
	}
	opt, _ := asynq.ParseRedisURI(url)
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	size := 0
	for _, q := range []string{worker.QueueLive, worker.QueueIngest, worker.QueueMinute} {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			t.Fatal(err)
		}
		size += info.Size
	}
	if size != want {
		t.Fatalf("queues hold %d tasks, want %d", size, want)
	}
	// Each task names its series: its id without the tick.
	pending, err := insp.ListPendingTasks(worker.QueueLive)
	if err != nil || len(pending) == 0 {
		t.Fatalf("live queue: %d tasks, %v", len(pending), err)
	}
	for _, p := range pending {
		if want := strings.TrimSuffix(p.ID, ":20261122T101500"); p.Headers[worker.HeaderSeries] != want || want == p.ID {
			t.Errorf("task %s: series %q, want %q", p.ID, p.Headers[worker.HeaderSeries], want)
		}
	}
}

// TestRunEnqueuesCurrentTickAtStart: a scheduler enqueues the current tick
// at once (data within seconds of a start), not at the next boundary.
func TestRunEnqueuesCurrentTickAtStart(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	entries := scheduler.IngestEntries(domain.DefaultRegion, nil, time.Hour, time.Hour)
	s, err := scheduler.New(scheduler.Config{RedisURL: url, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	opt, _ := asynq.ParseRedisURI(url)
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := insp.GetQueueInfo(worker.QueueIngest)
		if err == nil && info.Size > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing enqueued within 5 s of start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCandleIngestLoadsScoredSeriesFirst: a tick's candle tasks start with
// the series scoring reads (each market's analytics source exchange in its
// styles' timeframes, the default style's first), so a cold start scores before the
// display-only series load; every series is still ingested exactly once.
func TestCandleIngestLoadsScoredSeriesFirst(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	var jobs []scheduler.Job
	for _, e := range scheduler.IngestEntries(domain.DefaultRegion, nil, time.Minute, time.Minute) {
		if e.Name == "ingest:candles" {
			jobs = e.Tasks(tick)
		}
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(j.ID, "ingest:candles:"), ":20261122T101500"))
	}
	want := []string{
		"crypto:binance:spot:4h", "forex:oanda:major:4h", "forex:oanda:minor:4h", "stocks:nasdaq:stock:4h",
		"stocks:nyse:stock:4h", "stocks:arca:stock:4h", "stocks:amex:stock:4h", "stocks:bats:stock:4h",
		"crypto:binance:spot:15m", "crypto:binance:spot:1h", "crypto:binance:spot:1d",
		// the display-only series follow, in an order rotated per tick (TestTickerOrderRotates)
	}
	if len(ids) <= len(want) || !slices.Equal(ids[:len(want)], want) {
		t.Fatalf("candle tasks start %v, want %v", ids[:min(len(ids), len(want))], want)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("series %s ingested twice in a tick", id)
		}
		seen[id] = true
	}
	n := 0
	for _, c := range domain.Catalogue(domain.DefaultRegion) {
		if c.HasCandles() {
			n += len(domain.Timeframes)
		}
	}
	if len(ids) != n {
		t.Errorf("%d candle tasks a tick, want %d (every series once)", len(ids), n)
	}
}

// TestUnservedCombinationsAreNotScheduled: with binance alone configured,
// no tick enqueues anything for okx, forex or stocks (their tasks could
// only fail); crypto, whose analytics source binance serves, is still
// ingested, scored, refreshed and counted.
func TestUnservedCombinationsAreNotScheduled(t *testing.T) {
	t.Parallel()
	binanceOnly := func(c domain.Combination) bool { return c.Exchange == "binance" }
	tick := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	entries := append(scheduler.IngestEntries(domain.DefaultRegion, binanceOnly, time.Minute, time.Minute),
		scheduler.ScoreEntries(domain.DefaultRegion, binanceOnly, time.Minute)...)
	entries = append(entries, scheduler.StatsEntries(domain.DefaultRegion, binanceOnly, time.Minute)...)
	entries = append(entries, scheduler.FundamentalsEntries(domain.DefaultRegion, binanceOnly, time.Minute)...)
	kinds := map[string]int{}
	for _, e := range entries {
		for _, j := range e.Tasks(tick) {
			for _, other := range []string{":okx:", ":oanda:", ":nasdaq:", ":nyse:", ":forex:", ":stocks:"} {
				if strings.Contains(j.ID, other) {
					t.Errorf("unserved combination scheduled: %s", j.ID)
				}
			}
			kinds[e.Name]++
		}
	}
	for _, name := range []string{"ingest:tickers", "ingest:candles", "score", "stats", "ingest:fundamentals"} {
		if kinds[name] == 0 {
			t.Errorf("no %s job for crypto on binance: %v", name, kinds)
		}
	}
	// nil serves every combination: forex and stocks come back.
	all := 0
	for _, e := range scheduler.IngestEntries(domain.DefaultRegion, nil, time.Minute, time.Minute) {
		all += len(e.Tasks(tick))
	}
	if served := kinds["ingest:tickers"] + kinds["ingest:candles"]; all <= served {
		t.Errorf("every combination: %d ingest jobs, binance alone %d", all, served)
	}
}

// TestServedSourceIsScheduledFirst: with okx alone served, crypto's
// analytics source is okx spot: its series in the scored timeframes load
// first, and its fundamentals, scoring and statistics are scheduled.
func TestServedSourceIsScheduledFirst(t *testing.T) {
	t.Parallel()
	okxOnly := func(c domain.Combination) bool { return c.Market == domain.Crypto && c.Exchange == "okx" }
	tick := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	ids := map[string][]string{}
	entries := append(scheduler.IngestEntries(domain.DefaultRegion, okxOnly, time.Minute, time.Minute),
		scheduler.ScoreEntries(domain.DefaultRegion, okxOnly, time.Minute)...)
	entries = append(entries, scheduler.StatsEntries(domain.DefaultRegion, okxOnly, time.Minute)...)
	entries = append(entries, scheduler.FundamentalsEntries(domain.DefaultRegion, okxOnly, time.Minute)...)
	for _, e := range entries {
		for _, j := range e.Tasks(tick) {
			ids[e.Name] = append(ids[e.Name], strings.TrimSuffix(j.ID, ":20261122T101500"))
		}
	}
	want := []string{"ingest:candles:crypto:okx:spot:4h", "ingest:candles:crypto:okx:spot:15m",
		"ingest:candles:crypto:okx:spot:1h", "ingest:candles:crypto:okx:spot:1d"}
	if got := ids["ingest:candles"]; len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("candle tasks start %v, want okx spot's scored series first %v", got[:min(len(got), len(want))], want)
	}
	if got := ids["ingest:fundamentals"]; !slices.Equal(got, []string{"ingest:fundamentals:crypto:okx:spot"}) {
		t.Errorf("fundamentals tasks %v, want crypto's", got)
	}
	if len(ids["score"]) != len(analytics.ScoredStyles(domain.Crypto)) || !slices.Equal(ids["stats"], []string{"stats:crypto"}) {
		t.Errorf("score tasks %v, stats tasks %v; want crypto's only", ids["score"], ids["stats"])
	}
	for _, e := range scheduler.FundamentalsEntries(domain.DefaultRegion, okxOnly, time.Minute) {
		for _, j := range e.Tasks(tick) {
			var p worker.IngestPayload
			if err := json.Unmarshal(j.Task.Payload(), &p); err != nil || p.Exchange != "okx" || p.Instrument != "spot" {
				t.Errorf("fundamentals task %s: payload %+v, %v; want okx spot's", j.ID, p, err)
			}
		}
	}
}

// TestRetentionEntryOncePerTick: the candle retention task is enqueued once
// per tick on the default queue, however many replicas enqueue it.
func TestRetentionEntryOncePerTick(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	entries := scheduler.RetentionEntries(15 * time.Minute)
	tick := entries[0].Tick(time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC))
	if want := time.Date(2026, 11, 22, 10, 7, 30, 0, time.UTC); !tick.Equal(want) {
		t.Fatalf("the retention's tick at 10:15 is %s, want %s: halfway between two 15-minute closes", tick, want)
	}
	s, err := scheduler.New(scheduler.Config{RedisURL: url, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.EnqueueTick(context.Background(), entries[0], tick) + s.EnqueueTick(context.Background(), entries[0], tick); n != 1 {
		t.Fatalf("two enqueues of one tick added %d tasks, want 1", n)
	}
	opt, _ := asynq.ParseRedisURI(url)
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	tasks, err := insp.ListPendingTasks(worker.QueueDefault)
	if err != nil || len(tasks) != 1 || tasks[0].Type != worker.TypeCandleRetention {
		t.Fatalf("default queue holds %v (%v), want one %s task", tasks, err, worker.TypeCandleRetention)
	}
}

// The fundamentals refresh never ticks on a 15-minute close (its
// rescoring would land beside the closed candles'), and still ticks once
// per interval.
func TestFundamentalsTicksAvoidTheCloses(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for _, every := range []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute,
		15 * time.Minute, time.Hour, 4 * time.Hour} {
		e := scheduler.FundamentalsEntries(domain.DefaultRegion, nil, every)[0]
		if every == 15*time.Minute && e.Offset != 7*time.Minute+30*time.Second {
			t.Errorf("15m refresh offset %s, want 7m30s", e.Offset)
		}
		seen := map[time.Time]bool{}
		for at := day; at.Before(day.Add(24 * time.Hour)); at = at.Add(15 * time.Second) {
			tick := e.Tick(at)
			if tick.After(at) || at.Sub(tick) >= every {
				t.Fatalf("every %s: tick %s for %s", every, tick.Format(time.TimeOnly), at.Format(time.TimeOnly))
			}
			if tick.Equal(tick.Truncate(15 * time.Minute)) {
				t.Fatalf("every %s: a tick at %s, a 15-minute close", every, tick.Format(time.TimeOnly))
			}
			seen[tick] = true
		}
		if want := int(24 * time.Hour / every); len(seen) < want || len(seen) > want+1 {
			t.Errorf("every %s: %d ticks a day, want %d", every, len(seen), want)
		}
	}
}

// TestTickerOrderRotates: each tick holds every combination's ticker task
// once, and over as many consecutive ticks as there are combinations each
// combination is first once; the display-only candle series rotate too. A worker too slow to finish a tick drops
// the tick's last tasks as superseded; a fixed order would drop the same
// combinations every tick and leave their screeners empty.
func TestTickerOrderRotates(t *testing.T) {
	t.Parallel()
	const every = 2 * time.Second
	var tickers scheduler.Entry
	for _, e := range scheduler.IngestEntries(domain.DefaultRegion, nil, every, time.Minute) {
		if e.Name == "ingest:tickers" {
			tickers = e
		}
	}
	combos := len(domain.Catalogue(domain.DefaultRegion))
	start := time.Date(2026, 11, 27, 6, 40, 0, 0, time.UTC)
	first := map[string]int{}
	for i := range combos {
		jobs := tickers.Tasks(start.Add(time.Duration(i) * every))
		ids := map[string]bool{}
		for _, j := range jobs {
			ids[j.ID[:strings.LastIndex(j.ID, ":")]] = true
		}
		if len(jobs) != combos || len(ids) != combos {
			t.Fatalf("tick %d: %d ticker tasks over %d combinations, want %d each once", i, len(jobs), len(ids), combos)
		}
		first[jobs[0].ID[:strings.LastIndex(jobs[0].ID, ":")]]++
	}
	if len(first) != combos {
		t.Fatalf("over %d ticks %d combinations were first (%v), want every one once", combos, len(first), first)
	}

	// Candles: the series scoring reads keep their order at the head of
	// every tick, the 1m series theirs right after them; the other
	// display-only ones after those rotate.
	var candles scheduler.Entry
	for _, e := range scheduler.IngestEntries(domain.DefaultRegion, nil, every, time.Minute) {
		if e.Name == "ingest:candles" {
			candles = e
		}
	}
	key := func(j scheduler.Job) string { return j.ID[:strings.LastIndex(j.ID, ":")] }
	a, b := candles.Tasks(start), candles.Tasks(start.Add(time.Minute))
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("candle ticks of %d and %d tasks", len(a), len(b))
	}
	scoredSeries := 0
	for _, j := range a {
		var p worker.IngestPayload
		if err := json.Unmarshal(j.Task.Payload(), &p); err != nil {
			t.Fatal(err)
		}
		if !worker.ScoresSeries(domain.DefaultRegion, nil, p.Market, p.Exchange, p.Timeframe) {
			break
		}
		scoredSeries++
	}
	if scoredSeries == 0 || scoredSeries == len(a) {
		t.Fatalf("%d of %d candle series are scored ones at the head of the tick", scoredSeries, len(a))
	}
	head := scoredSeries
	for head < len(a) && strings.HasSuffix(key(a[head]), ":1m") {
		head++
	}
	if head == scoredSeries {
		t.Fatalf("no 1m series right after the scored ones: %s", key(a[scoredSeries]))
	}
	for i := range head {
		if key(a[i]) != key(b[i]) {
			t.Fatalf("series %d at the head (scored, then 1m) moved between ticks: %s, then %s", i, key(a[i]), key(b[i]))
		}
	}
	for _, j := range a[head:] {
		if strings.HasSuffix(key(j), ":1m") {
			t.Fatalf("a 1m series among the rotating ones: %s", key(j))
		}
	}
	if key(a[head]) == key(b[head]) || key(a[head+1]) != key(b[head]) {
		t.Errorf("display-only series did not rotate: %s, %s then %s first", key(a[head]), key(a[head+1]), key(b[head]))
	}
}

// TestRunFollowsItsClock: a scheduler whose clock is not the wall clock
// (a benchmark's, hours ahead) still enqueues every tick as its clock
// passes it, instead of waiting for the wall clock to reach the tick.
func TestRunFollowsItsClock(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	ahead := 10 * time.Hour
	entry := scheduler.Entry{Name: "probe", Interval: time.Second, Tasks: func(tick time.Time) []scheduler.Job {
		return []scheduler.Job{{ID: "probe:" + tick.Format("150405"), Task: asynq.NewTask("probe", nil), Queue: worker.QueueIngest}}
	}}
	s, err := scheduler.New(scheduler.Config{RedisURL: url, Entries: []scheduler.Entry{entry},
		Now: func() time.Time { return time.Now().Add(ahead) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	opt, _ := asynq.ParseRedisURI(url)
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	size := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if info, err := insp.GetQueueInfo(worker.QueueIngest); err == nil {
			if size = info.Size; size >= 3 {
				return
			}
		}
	}
	t.Fatalf("%d ticks enqueued in 20 s of a 1 s entry on a clock %s ahead, want at least 3", size, ahead)
}
