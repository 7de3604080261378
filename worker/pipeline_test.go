package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/scheduler"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// atomicClock is a clock the test moves while workers read it.
type atomicClock struct{ ns atomic.Int64 }

func newAtomicClock(t time.Time) *atomicClock {
	c := &atomicClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *atomicClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *atomicClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// countingScores counts the records of each symbol that scoring saved.
type countingScores struct {
	worker.ScoreStore
	mu    sync.Mutex
	saved map[string]int
}

func (c *countingScores) SaveAnalytics(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord) (int, error) {
	c.mu.Lock()
	for _, r := range recs {
		c.saved[r.Symbol]++
	}
	c.mu.Unlock()
	return c.ScoreStore.SaveAnalytics(ctx, recs, prev)
}

func (c *countingScores) count(sym string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saved[sym]
}

// pipelineFixture is a database, a leased Redis database and a webhook
// receiver with one subscription to crypto; workers are added with
// startWorker.
type pipelineFixture struct {
	*webhookFixture
	url    string
	rdb    *redis.Client
	queue  *asynq.Client
	clk    *atomicClock
	feeds  *feeds.Registry
	scores *countingScores
	recv   *receiver
	// copyDelay is how long the queued copies of the tasks RunNow takes
	// are held back (0: worker.DefaultCopyDelay); newPipelineFixture sets 1 s.
	copyDelay time.Duration

	mu     sync.Mutex
	ranNow map[string]int // task ids the workers ran at once (RunNow)
}

func (f *pipelineFixture) ranNowCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ranNow[id]
}

func newPipelineFixture(t *testing.T) *pipelineFixture {
	t.Helper()
	recv := newReceiver(t, 0, nil)
	f := &pipelineFixture{webhookFixture: newWebhookFixture(t, recv, true), recv: recv, url: redistest.LeaseDB(t),
		ranNow: map[string]int{}, copyDelay: time.Second, clk: newAtomicClock(time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC))}
	opts, err := redis.ParseURL(f.url)
	if err != nil {
		t.Fatal(err)
	}
	f.rdb = redis.NewClient(opts)
	t.Cleanup(func() { _ = f.rdb.Close() })
	if f.queue, err = worker.NewQueueClient(f.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.queue.Close() })
	if f.feeds, err = feeds.New(feeds.Config{Names: []string{"synthetic"}, Now: f.clk.now, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	f.scores = &countingScores{ScoreStore: f.db, saved: map[string]int{}}
	c := f.client(t, domain.Crypto)
	f.subscribe(t, c.ID, recv.srv.URL+"/hook", nil)
	return f
}

// workerParts are one worker process's pipeline pieces.
type workerParts struct {
	w       *worker.Worker
	in      *worker.Ingester
	trigger *worker.ScoreTrigger
	drops   atomic.Int64 // wake-ups the waker dropped
}

// startWorker runs a worker process (asynq lanes, trigger, dispatcher and
// notification waker) until the test ends. dropWakeups drops every
// scoring trigger and dispatch wake-up (the events are lost on purpose).
func (f *pipelineFixture) startWorker(t *testing.T, dropWakeups bool) *workerParts {
	t.Helper()
	w, err := worker.New(worker.Config{RedisURL: f.url, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	w.OnRunNow(func(id string) {
		f.mu.Lock()
		f.ranNow[id]++
		f.mu.Unlock()
	})
	p := &workerParts{w: w}
	sc := &worker.Scorer{Store: f.scores, Region: "global", Logger: discard(), Now: f.clk.now}
	sc.Register(w)
	pipe := worker.Pipeline{Redis: f.rdb, Queue: f.queue, RunNow: w.RunNow, CopyDelay: f.copyDelay}
	p.trigger = &worker.ScoreTrigger{Pipeline: pipe, Scorer: sc, Region: "global", Logger: discard(),
		Drop: func(domain.Market, analytics.Style) bool { return dropWakeups }}
	p.trigger.Register(w)
	p.in = &worker.Ingester{Store: f.db, Feeds: f.feeds, Now: f.clk.now, Changes: p.trigger}
	p.in.Register(w)
	disp := f.dispatcher(f.recv, true)
	disp.Register(w)
	waker := &worker.DispatchWaker{Listen: f.db.ListenVerdictEvents, Pipeline: pipe, Logger: discard(),
		Drop: func(int64) bool {
			if dropWakeups {
				p.drops.Add(1)
			}
			return dropWakeups
		}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() { _ = waker.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return p
}

// eventually polls cond every 50 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *pipelineFixture) report(t *testing.T, sym string) (store.AnalyticsRecord, bool) {
	t.Helper()
	r, err := f.db.AnalyticsReport(context.Background(), domain.Crypto, sym, analytics.Swing)
	if domain.ErrorCode(err) == domain.ENOTFOUND {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

// flip makes the stored swing report of sym look stale and give the
// opposite verdict, so that its next scoring writes a verdict event: the
// stored verdict is the one the current score cannot hold (decline for a
// score ≥ 0, growth below), its close differs from the candle's and it is
// a day old (past the open-candle rule).
func (f *pipelineFixture) flip(t *testing.T, sym string) {
	t.Helper()
	_, err := f.db.Pool.Exec(context.Background(), `UPDATE analytics_reports SET
		verdict = CASE WHEN overall_score >= 0 THEN 'decline' ELSE 'growth' END,
		candle_close = candle_close + 1, updated_at = updated_at - interval '1 day'
		WHERE market = 'crypto' AND style = 'swing' AND symbol = $1`, sym)
	if err != nil {
		t.Fatal(err)
	}
}

func (f *pipelineFixture) events(t *testing.T) []store.VerdictEvent {
	t.Helper()
	evs, err := f.db.VerdictEvents(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// deliveredIDs lists the event ids the receiver got, in order.
func (f *pipelineFixture) deliveredIDs() []string {
	var ids []string
	for _, h := range f.recv.got() {
		var body struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(h.body, &body)
		ids = append(ids, body.ID)
	}
	return ids
}

// quiet waits until no task of the leased database is pending, scheduled,
// active or retrying, so that what a test counts afterwards is final.
func (f *pipelineFixture) quiet(t *testing.T) {
	t.Helper()
	opt, _ := asynq.ParseRedisURI(f.url)
	ins := asynq.NewInspector(opt)
	defer ins.Close()
	eventually(t, 30*time.Second, "the queues to drain", func() bool {
		qs, err := ins.Queues()
		if err != nil {
			return false
		}
		for _, q := range qs {
			info, err := ins.GetQueueInfo(q)
			if err != nil || info.Pending+info.Active+info.Scheduled+info.Retry > 0 {
				return false
			}
		}
		return true
	})
}

var pipelineSymbols = []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"}

// A candle ingested is scored at once, without a scheduler: the first
// candles of a series are scored as soon as they are stored, a new candle
// of one asset rescores that asset (and no other), and a verdict change
// reaches the receiver through the notification wake-up.
func TestIngestedCandleScoredWithoutTick(t *testing.T) {
	t.Parallel()
	f := newPipelineFixture(t)
	p := f.startWorker(t, false)
	ctx := context.Background()
	if _, err := p.in.IngestCandles(ctx, spot, domain.TF4h, pipelineSymbols); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first scoring of the ingested assets", func() bool {
		for _, sym := range pipelineSymbols {
			if _, ok := f.report(t, sym); !ok {
				return false
			}
		}
		return true
	})
	eth, _ := f.report(t, "ETH_USDT")
	btc, _ := f.report(t, "BTC_USDT")

	// Five minutes later the open candle of BTC moved (ingested for BTC
	// only), and its report was made to hold the opposite verdict.
	f.flip(t, "BTC_USDT")
	f.clk.add(5 * time.Minute)
	if _, err := p.in.IngestCandles(ctx, spot, domain.TF4h, []string{"BTC_USDT"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "BTC_USDT rescored on its changed candle", func() bool {
		r, _ := f.report(t, "BTC_USDT")
		return r.UpdatedAt.After(btc.UpdatedAt)
	})
	eventually(t, 30*time.Second, "the verdict event delivered without a dispatch tick", func() bool {
		evs := f.events(t)
		ids := f.deliveredIDs()
		return len(evs) == 1 && len(ids) == 1 && ids[0] == strconv.FormatInt(evs[0].ID, 10)
	})
	if evs := f.events(t); evs[0].Symbol != "BTC_USDT" {
		t.Fatalf("events = %+v, want BTC_USDT's", evs)
	}
	f.quiet(t)
	if r, _ := f.report(t, "ETH_USDT"); !r.UpdatedAt.Equal(eth.UpdatedAt) {
		t.Errorf("ETH_USDT rescored (%s → %s) though only BTC_USDT's candles changed", eth.UpdatedAt, r.UpdatedAt)
	}
}

// With every wake-up lost on purpose (the trigger's and the
// notification's enqueues dropped), the scheduler's ticks still score the
// ingested assets and deliver the verdict change.
func TestLostWakeupsCaughtByTicks(t *testing.T) {
	t.Parallel()
	f := newPipelineFixture(t)
	p := f.startWorker(t, true)
	ctx := context.Background()
	if _, err := p.in.IngestCandles(ctx, spot, domain.TF4h, pipelineSymbols); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{RedisURL: f.url, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	// Run the ticks as the scheduler would, each a tick of its own (a new
	// task id), on the real clock (the worker skips a tick past its end).
	tick := func(entries []scheduler.Entry) {
		for _, e := range entries {
			s.EnqueueTick(ctx, e, time.Now().Truncate(time.Second))
		}
	}
	tick(scheduler.ScoreEntries("global", nil, time.Minute))
	eventually(t, 30*time.Second, "the score tick to score the ingested assets", func() bool {
		_, ok := f.report(t, "SOL_USDT")
		return ok
	})
	f.flip(t, "SOL_USDT")
	time.Sleep(time.Second) // the next tick's task id is the next second's
	tick(scheduler.ScoreEntries("global", nil, time.Minute))
	eventually(t, 30*time.Second, "the verdict event of the rescored asset", func() bool { return len(f.events(t)) == 1 })
	eventually(t, 30*time.Second, "the event's notification, dropped", func() bool { return p.drops.Load() > 0 })
	f.quiet(t)
	if got := f.deliveredIDs(); len(got) != 0 {
		t.Fatalf("delivered %v with every wake-up dropped; want nothing before the dispatch tick", got)
	}
	tick(scheduler.WebhookEntries(5 * time.Second))
	ev := f.events(t)[0]
	eventually(t, 30*time.Second, "the dispatch tick to deliver the event", func() bool {
		ids := f.deliveredIDs()
		return len(ids) == 1 && ids[0] == strconv.FormatInt(ev.ID, 10)
	})
}

// Two workers hear the same wake-ups (both are told of the same changed
// candles, both listen for the same notification): the asset is scored
// once, one verdict event is written, and it is delivered once, by one
// dispatch wake-up task.
func TestTwoWorkersOneWakeup(t *testing.T) {
	t.Parallel()
	f := newPipelineFixture(t)
	a, b := f.startWorker(t, false), f.startWorker(t, false)
	ctx := context.Background()
	if _, err := a.in.IngestCandles(ctx, spot, domain.TF4h, pipelineSymbols); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first scoring", func() bool {
		_, ok := f.report(t, "ETH_USDT")
		return ok
	})
	f.quiet(t)
	before := f.scores.count("ETH_USDT")
	f.flip(t, "ETH_USDT")
	changed := []store.CandleKey{{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF4h}}
	var wg sync.WaitGroup
	wg.Go(func() { a.trigger.CandlesChanged(ctx, changed) })
	wg.Go(func() { b.trigger.CandlesChanged(ctx, changed) })
	wg.Wait()
	eventually(t, 30*time.Second, "one event delivered", func() bool { return len(f.deliveredIDs()) == 1 })
	f.quiet(t)
	if n := f.scores.count("ETH_USDT") - before; n != 1 {
		t.Errorf("ETH_USDT scored %d times after the shared wake-up, want 1", n)
	}
	evs := f.events(t)
	if len(evs) != 1 || evs[0].Symbol != "ETH_USDT" {
		t.Fatalf("events = %+v, want one, of ETH_USDT", evs)
	}
	if ids := f.deliveredIDs(); len(ids) != 1 || ids[0] != strconv.FormatInt(evs[0].ID, 10) {
		t.Fatalf("delivered %v, want event %d once", ids, evs[0].ID)
	}
	// One wake-up task ran (the other worker's claim of its id failed),
	// at once, in the worker that claimed it.
	if n := f.ranNowCount("webhooks:wake:" + strconv.FormatInt(evs[0].ID, 10)); n != 1 {
		t.Errorf("%d dispatch wake-ups ran for event %d heard by two workers, want 1", n, evs[0].ID)
	}
}

// The pipeline's hops do not wait for a lane: with the queued copies held
// back for the default CopyDelay (15 s), an ingested candle is scored and
// its verdict event delivered, each by the task its enqueuer ran at once,
// and no task goes through asynq (a copy is enqueued only for a run that
// failed or did not start).
func TestPipelineRunsAtOnceWithoutTheLane(t *testing.T) {
	t.Parallel()
	f := newPipelineFixture(t)
	f.copyDelay = 0 // worker.DefaultCopyDelay
	p := f.startWorker(t, false)
	ctx := context.Background()
	if _, err := p.in.IngestCandles(ctx, spot, domain.TF4h, pipelineSymbols); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the scoring of the ingested assets", func() bool {
		_, ok := f.report(t, "SOL_USDT")
		return ok
	})
	f.flip(t, "SOL_USDT")
	f.clk.add(5 * time.Minute)
	if _, err := p.in.IngestCandles(ctx, spot, domain.TF4h, []string{"SOL_USDT"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the verdict event delivered", func() bool { return len(f.deliveredIDs()) == 1 })
	f.quiet(t) // nothing pending for the lane
	ran, copies := p.w.RunNowCounts()
	if ran < 3 || copies != 0 {
		t.Fatalf("ran %d tasks at once and enqueued %d queued copies; want ≥ 3 (2 scorings, 1 dispatch) and none", ran, copies)
	}
	opt, _ := asynq.ParseRedisURI(f.url)
	ins := asynq.NewInspector(opt)
	defer ins.Close()
	if qs, err := ins.Queues(); err == nil {
		for _, q := range qs {
			if info, err := ins.GetQueueInfo(q); err == nil && info.Processed > 0 {
				t.Errorf("queue %s processed %d tasks; want every pipeline task run at once, none through asynq", q, info.Processed)
			}
		}
	}
}

// A task that fails when run at once is enqueued for the lane (and
// asynq's retries) with its enqueuer's options: held back, under its id.
func TestRunNowFailureEnqueuesTheQueuedCopy(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	w, err := worker.New(worker.Config{RedisURL: url, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	w.Handle("test:fail", asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return errors.New("down")
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	opt, _ := asynq.ParseRedisURI(url)
	ins := asynq.NewInspector(opt)
	defer ins.Close()
	task := asynq.NewTask("test:fail", nil)
	id := "fail:1"
	// RunNow takes tasks once Run started. Held back a minute, as the
	// enqueuers hold theirs.
	eventually(t, 10*time.Second, "RunNow to take a task", func() bool {
		return w.RunNow(task, id, asynq.TaskID(id), asynq.Queue(worker.QueueDefault), asynq.ProcessIn(time.Minute))
	})
	eventually(t, 10*time.Second, "the failed run's queued copy", func() bool { _, copies := w.RunNowCounts(); return copies == 1 })
	if ran, _ := w.RunNowCounts(); ran != 1 || calls.Load() != 1 {
		t.Fatalf("ran %d at once, %d calls; want 1", ran, calls.Load())
	}
	if info, err := ins.GetTaskInfo(worker.QueueDefault, id); err != nil || info.State != asynq.TaskStateScheduled {
		t.Fatalf("the queued copy of a task that failed at once: %+v (%v), want it held back", info, err)
	}
}

// When RunNow does not take a task (its process stopping), the queued
// copy is the safety net: held back for CopyDelay, then run by the bulk
// lane (the copies wait in the default queue).
func TestQueuedCopyRunsWhenRunNowDoesNot(t *testing.T) {
	t.Parallel()
	f := newPipelineFixture(t)
	p := f.startWorker(t, false)
	var asked atomic.Int64
	p.trigger.Pipeline.RunNow = func(*asynq.Task, string, ...asynq.Option) bool { asked.Add(1); return false }
	if _, err := p.in.IngestCandles(context.Background(), spot, domain.TF4h, pipelineSymbols); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the queued copy to score the ingested assets", func() bool {
		_, ok := f.report(t, "SOL_USDT")
		return ok
	})
	if asked.Load() == 0 {
		t.Fatal("the trigger never offered its task to RunNow")
	}
}

// noCandidates is a scoring store in which nothing is to be scored.
type noCandidates struct{ worker.ScoreStore }

func (noCandidates) RescoreCandidates(context.Context, store.RescoreQuery) ([]store.RescoreCandidate, int, error) {
	return nil, 0, nil
}

func (noCandidates) SaveAnalytics(context.Context, []store.AnalyticsRecord, map[string]store.AnalyticsRecord) (int, error) {
	return 0, nil
}

// A burst of changes to one market and style runs one task per generation
// of its pending set: the first write claims the generation and runs the
// task, later writes before the task takes the set only add to it; once
// taken, the next write runs the next generation's task. Nothing is
// enqueued in asynq on the way.
func TestTriggerClaimsOneTaskPerGeneration(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	queue, err := worker.NewQueueClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer queue.Close()
	var ran []*asynq.Task
	var ids []string
	tr := &worker.ScoreTrigger{Region: "global", Logger: discard(),
		Scorer: &worker.Scorer{Store: noCandidates{}, Region: "global", Logger: discard(), Now: time.Now},
		Pipeline: worker.Pipeline{Redis: rdb, Queue: queue, RunNow: func(t *asynq.Task, id string, _ ...asynq.Option) bool {
			ran, ids = append(ran, t), append(ids, id)
			return true
		}}}
	ctx := context.Background()
	key := func(sym string) []store.CandleKey {
		return []store.CandleKey{{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF4h}}
	}
	tr.CandlesChanged(ctx, key("BTC_USDT"))
	tr.CandlesChanged(ctx, key("ETH_USDT"))
	if want := []string{"score:assets:crypto:swing:g0"}; !slices.Equal(ids, want) {
		t.Fatalf("tasks run for two writes of one generation: %v, want %v", ids, want)
	}
	if err := tr.HandleScoreAssets(ctx, ran[0]); err != nil { // takes both
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, "pipeline:score:pending:crypto:swing").Result(); err != nil || n != 0 {
		t.Fatalf("pending set after the take: %d (%v), want gone", n, err)
	}
	tr.CandlesChanged(ctx, key("SOL_USDT"))
	if want := []string{"score:assets:crypto:swing:g0", "score:assets:crypto:swing:g1"}; !slices.Equal(ids, want) {
		t.Fatalf("tasks run: %v, want %v", ids, want)
	}
	opt, _ := asynq.ParseRedisURI(url)
	ins := asynq.NewInspector(opt)
	defer ins.Close()
	if qs, err := ins.Queues(); err != nil || len(qs) != 0 {
		t.Fatalf("asynq queues %v (%v); want none: every task ran at once", qs, err)
	}
}

// The trigger's and the waker's tasks are claimed by one Pipeline under
// one key scheme, in the deployment's space: a claimed task id is claimed
// once (a second start, from any worker, does not run it), and every key
// the pipeline writes starts with the space's prefix.
func TestPipelineClaimsOnceUnderTheSpace(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	queue, err := worker.NewQueueClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer queue.Close()
	const space = "test:space:"
	var ids []string
	pipe := worker.Pipeline{Redis: rdb, Keys: space, Queue: queue, RunNow: func(_ *asynq.Task, id string, _ ...asynq.Option) bool {
		ids = append(ids, id)
		return true
	}}
	tr := &worker.ScoreTrigger{Pipeline: pipe, Region: "global", Logger: discard(),
		Scorer: &worker.Scorer{Store: noCandidates{}, Region: "global", Logger: discard(), Now: time.Now}}
	ctx := context.Background()
	tr.CandlesChanged(ctx, []store.CandleKey{{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF4h}})
	task := worker.NewWebhookDispatchTask(time.Time{})
	for range 2 { // two workers hearing event 7
		if _, err := pipe.Start(ctx, task, "webhooks:wake:7"); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"score:assets:crypto:swing:g0", "webhooks:wake:7"}; !slices.Equal(ids, want) {
		t.Fatalf("tasks run %v, want %v", ids, want)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{space + "pipeline:claim:score:assets:crypto:swing:g0", space + "pipeline:claim:webhooks:wake:7",
		space + "pipeline:score:pending:crypto:swing"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
}

// decidedSymbols is a scoring store in which nothing is to be scored; it
// records the symbols each run asked about.
type decidedSymbols struct {
	worker.ScoreStore
	mu   sync.Mutex
	asks [][]string
}

func (d *decidedSymbols) RescoreCandidates(_ context.Context, q store.RescoreQuery) ([]store.RescoreCandidate, int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asks = append(d.asks, slices.Clone(q.Symbols))
	return nil, 0, nil
}

func (d *decidedSymbols) asked() [][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asks)
}

// A triggered scoring task waits for its market and style's run lock
// before it takes one of RunNow's slots, not in one: while a run of
// (crypto, swing) is under way, the next (crypto, swing) task waits
// without a slot, and another task runs in the only slot meanwhile. The
// waiting task takes its pending set only once it holds the lock, so what
// is written while it waits joins its run. (Before, it took the slot and
// its set, then waited for the lock in the slot: at the 16:00 close the
// stock runs queued on their lock held every slot, and the crypto closes
// of the minute waited 6 s for one.)
func TestScoringTaskWaitsForItsRunLockOutsideASlot(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	queue, err := worker.NewQueueClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer queue.Close()
	w, err := worker.New(worker.Config{RedisURL: url, Logger: discard(), PipelineConcurrency: 1, RunNowDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := &decidedSymbols{}
	scorer := &worker.Scorer{Store: st, Region: "global", Logger: discard(), Now: time.Now}
	tr := &worker.ScoreTrigger{Region: "global", Logger: discard(), Scorer: scorer,
		Pipeline: worker.Pipeline{Redis: rdb, Queue: queue, RunNow: w.RunNow}}
	tr.Register(w)
	other := make(chan struct{})
	w.Handle("test:other", asynq.HandlerFunc(func(context.Context, *asynq.Task) error { close(other); return nil }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 10*time.Second, "RunNow to take tasks", func() bool { return w.RunNow(asynq.NewTask("test:noop", nil), "noop") })

	// A run of (crypto, swing) under way: the test holds its lock.
	_, unlock, err := scorer.LockRun(ctx, domain.Crypto, analytics.Swing)
	if err != nil {
		t.Fatal(err)
	}
	btc := []store.CandleKey{{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF4h}}
	tr.CandlesChanged(ctx, btc)
	if !w.RunNow(asynq.NewTask("test:other", nil), "other") {
		t.Fatal("RunNow did not take the other task")
	}
	select {
	case <-other:
	case <-time.After(10 * time.Second):
		t.Fatal("the other task did not run in 10 s: the waiting scoring task holds the only slot")
	}
	if n, err := rdb.Exists(ctx, "pipeline:score:pending:crypto:swing").Result(); err != nil || n != 1 {
		t.Fatalf("pending set while the run lock is held: %d (%v); want it there: the waiting task took it", n, err)
	}
	// Written while the task waits: the same generation, the same run.
	eth := []store.CandleKey{{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF4h}}
	tr.CandlesChanged(ctx, eth)
	if asks := st.asked(); len(asks) != 0 {
		t.Fatalf("runs while the lock is held: %v", asks)
	}
	unlock()
	eventually(t, 10*time.Second, "the waiting task's run", func() bool { return len(st.asked()) > 0 })
	// One run (it asks each of the market's sources once), over both.
	for _, ask := range st.asked() {
		if got, want := slices.Sorted(slices.Values(ask)), []string{"BTC_USDT", "ETH_USDT"}; !slices.Equal(got, want) {
			t.Fatalf("runs after the lock was released asked for %v; want one run over %v", st.asked(), want)
		}
	}
}
