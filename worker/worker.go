// Package worker runs the asynq task handlers: market-data ingest, scoring,
// statistics and webhook delivery. It and package scheduler are the only
// importers of asynq. Tasks are idempotent: asynq delivers at least once.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/marketscreener/market/rediskeys"
)

// Queue names, by priority.
const (
	QueueCritical = "critical" // webhook deliveries
	QueueDefault  = "default"  // scoring, statistics
	QueueLive     = "live"     // screener snapshots: small, frequent, what clients see first
	QueueIngest   = "ingest"   // candles
	QueueMinute   = "minute"   // the 1m bars' polls, a lane of their own
)

// Config configures a Worker.
type Config struct {
	RedisURL string
	// Concurrency is how many bulk tasks (candles, scoring, statistics)
	// run at once; the live lane (screener snapshots, webhook dispatch) has
	// LiveConcurrency slots of its own.
	Concurrency     int
	LiveConcurrency int
	// MinuteConcurrency is how many polls of the 1m bars run at once, in
	// a lane of their own (QueueMinute): a minute's bars are not queued
	// behind the other timeframes' polls and history loads (default 3).
	MinuteConcurrency int
	// PipelineConcurrency is how many tasks RunNow runs at once (default 4).
	PipelineConcurrency int
	// RunNowDelay is how long RunNow waits before it runs a task
	// (DefaultRunNowDelay when 0): what other writes, in this process or
	// another, add to the same task meanwhile is coalesced into it.
	RunNowDelay time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
}

// Worker runs the service's handlers on two asynq servers, the lanes: a
// live lane for the small, frequent tasks clients notice at once (screener
// snapshots, webhook dispatch) and a bulk lane for the long ones (candle
// pages, scoring, statistics). Queue weights alone do not protect the live
// tasks: weights pick among waiting tasks, but a process whose every slot
// holds a minutes-long scoring run has no slot to pick for, and under load
// screener snapshots then missed tick after tick.
//
// The pipeline's tasks (triggered scoring, dispatch wake-ups) run at once
// in the process that claimed them (RunNow, see pipeline.go), without
// asynq; only a run that fails or does not start is enqueued in the
// default queue, held back Pipeline.CopyDelay, for the bulk lane. They have no
// lane of their own: an asynq server costs CPU whether or not it finds
// work (its poll, heartbeat, forwarder, janitor), and each queue a lane
// serves adds a Redis script to every poll that finds nothing.
type Worker struct {
	cfg   Config
	lanes []*asynq.Server
	mux   *asynq.ServeMux
	// client enqueues the queued copy of a task RunNow could not run.
	client *asynq.Client

	// RunNow's state: the context of Run (nil before and after), its
	// slots, and the runs in flight (Run waits for them).
	nowMu  sync.Mutex
	nowCtx context.Context
	nowSem chan struct{}
	nowWG  sync.WaitGroup
	// nowRuns counts the tasks RunNow ran, nowCopies the queued copies
	// it enqueued because a run failed or did not start (tests); onRunNow
	// sees each task id RunNow took (tests).
	nowRuns, nowCopies atomic.Int64
	onRunNow           func(taskID string)
	// gates are taken before a RunNow slot, by task type (Gate).
	gates map[string]RunGate

	// started holds the series (HeaderSeries) this process has started a
	// task of.
	startedMu sync.Mutex
	started   map[string]bool
}

// HeaderNotAfter is the task header carrying the time after which a
// periodic task must not start (RFC 3339): the scheduler sets it to the end
// of the task's tick, because by then the next tick's task supersedes it.
const HeaderNotAfter = "not-after"

// HeaderSeries names the periodic job a task is one tick of (its task id
// without the tick). The first task of a series a process starts runs even
// when late: a later tick would only do the same work, and on a loaded
// cold start the series would otherwise wait for a tick that starts in
// time, with nothing ingested or scored meanwhile.
const HeaderSeries = "series"

// HeaderClosing marks a task of its market's closing read (the
// scheduler's tick at a session's close): it reads the candles that have
// just closed and loads no new series' history, which would take part of
// the budget window kept for the close (the free plan's window holds the
// bell's 4h and 1m bars of every stock exchange, not a history piece
// more); the catch-up a few minutes later and the next session load it.
const HeaderClosing = "closing"

// New returns a worker; handlers are added with Handle before Run.
func New(cfg Config) (*Worker, error) {
	opt, err := rediskeys.AsynqOpt(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("worker: redis url: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 6 // with the live lane, within the process's Postgres pool (16), leaving room for the api in "all"
	}
	if cfg.LiveConcurrency <= 0 {
		cfg.LiveConcurrency = 3
	}
	if cfg.MinuteConcurrency <= 0 {
		cfg.MinuteConcurrency = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PipelineConcurrency <= 0 {
		cfg.PipelineConcurrency = 4
	}
	if cfg.RunNowDelay <= 0 {
		cfg.RunNowDelay = DefaultRunNowDelay
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	lane := func(concurrency int, queues map[string]int) *asynq.Server {
		return asynq.NewServer(opt, asynq.Config{
			Concurrency:     concurrency,
			Queues:          queues,
			Logger:          NewAsynqLogger(cfg.Logger),
			ShutdownTimeout: 20 * time.Second,
			ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
				cfg.Logger.Warn("task failed", "type", t.Type(), "err", err)
			}),
		})
	}
	w := &Worker{cfg: cfg, mux: asynq.NewServeMux(), client: asynq.NewClient(opt),
		nowSem: make(chan struct{}, cfg.PipelineConcurrency), started: map[string]bool{}, gates: map[string]RunGate{}}
	w.lanes = []*asynq.Server{
		lane(cfg.LiveConcurrency, map[string]int{QueueCritical: 2, QueueLive: 1}),
		// Ingest before analytics: scores are only as fresh as the data.
		// The default queue also holds the pipeline's queued copies, due
		// Pipeline.CopyDelay after their enqueue: the safety net, not the path.
		lane(cfg.Concurrency, map[string]int{QueueIngest: 3, QueueDefault: 2}),
		lane(cfg.MinuteConcurrency, map[string]int{QueueMinute: 1}),
	}
	w.mux.Use(w.skipSuperseded, instrument)
	return w, nil
}

// skipSuperseded drops a periodic task that starts after its tick ended
// (HeaderNotAfter): the next tick's task does the same work with fresher
// data, and a late start would only spend a slot. Tasks without the header
// always run, and so does the first task of a series (HeaderSeries) this
// process starts, until one has run without an error.
func (w *Worker) skipSuperseded(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		h := t.Headers()
		series := h[HeaderSeries]
		first := false
		if series != "" {
			w.startedMu.Lock()
			first = !w.started[series]
			w.started[series] = true
			w.startedMu.Unlock()
		}
		if v, ok := h[HeaderNotAfter]; ok && !first {
			if notAfter, err := time.Parse(time.RFC3339Nano, v); err == nil && w.cfg.Now().After(notAfter) {
				id, _ := asynq.GetTaskID(ctx)
				w.cfg.Logger.Debug("task superseded by a later tick", "type", t.Type(), "task_id", id, "not_after", v)
				return nil
			}
		}
		err := next.ProcessTask(ctx, t)
		if err != nil && first {
			// Its retry, or the next tick, is then the first to run.
			w.startedMu.Lock()
			delete(w.started, series)
			w.startedMu.Unlock()
		}
		return err
	})
}

// Handle registers a handler for a task type.
func (w *Worker) Handle(taskType string, h asynq.Handler) { w.mux.Handle(taskType, h) }

// RunGate is what a task of a type must hold before RunNow gives it one of
// its slots: it waits until the task may run (a scoring task, for its
// market and style's run lock) and returns the context the task runs with
// (which tells the handler what it holds) and the release, called when the
// task ends. An error (ctx ended while waiting) leaves the task to its
// queued copy.
//
// Without a gate, a task that waits inside its handler waits in a slot:
// at a close, runs queued behind another market's run held every slot,
// and a third market's close waited for a slot it could have used.
type RunGate func(ctx context.Context, t *asynq.Task) (runCtx context.Context, release func(), err error)

// Gate registers the gate RunNow takes before a slot for tasks of a type.
// A gate that a handler's own lock also takes must tell the handler it is
// held (through runCtx): RunNow's tasks then wait for a slot only once
// they may run, and never hold one while they wait.
func (w *Worker) Gate(taskType string, g RunGate) { w.gates[taskType] = g }

// Run processes tasks until ctx ends, then shuts down gracefully (running
// tasks get ShutdownTimeout to finish; unfinished ones go back to the queue).
func (w *Worker) Run(ctx context.Context) error {
	for i, srv := range w.lanes {
		if err := srv.Start(w.mux); err != nil {
			for _, started := range w.lanes[:i] {
				started.Shutdown()
			}
			return fmt.Errorf("worker: start: %w", err)
		}
	}
	w.cfg.Logger.Info("worker started", "concurrency", w.cfg.Concurrency, "live_concurrency", w.cfg.LiveConcurrency)
	w.nowMu.Lock()
	w.nowCtx = ctx
	w.nowMu.Unlock()
	<-ctx.Done()
	w.nowMu.Lock()
	w.nowCtx = nil
	w.nowMu.Unlock()
	w.nowWG.Wait()
	_ = w.client.Close()
	var wg sync.WaitGroup
	for _, srv := range w.lanes {
		wg.Go(srv.Shutdown)
	}
	wg.Wait()
	w.cfg.Logger.Info("worker stopped")
	return nil
}

// Monitor returns the asynqmon UI mounted at rootPath (for the ops
// listener) and a function releasing its Redis connections. Read-only by
// default (asynqmon refuses every request but GET). Writable, it asks for
// the token on every request (basic-auth password, so a browser asks once
// and sends it with the UI's requests; or a bearer token), compared in
// constant time. Either way, a cross-origin write (a page in the operator's
// browser posting to the ops port) is refused.
func Monitor(redisURL, rootPath string, o MonitorOptions) (http.Handler, func(), error) {
	opt, err := rediskeys.AsynqOpt(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: redis url: %w", err)
	}
	if o.Writable && o.Token == "" {
		return nil, nil, fmt.Errorf("worker: a writable asynqmon needs a token")
	}
	mon := asynqmon.New(asynqmon.Options{RootPath: rootPath, RedisConnOpt: opt, ReadOnly: !o.Writable})
	var h http.Handler = mon
	if o.Writable {
		h = requireToken(h, o.Token)
	}
	return http.NewCrossOriginProtection().Handler(h), func() { _ = mon.Close() }, nil
}

// asynqLogger adapts slog to asynq's Logger interface.
type asynqLogger struct{ l *slog.Logger }

// NewAsynqLogger adapts a slog.Logger for asynq servers and schedulers.
func NewAsynqLogger(l *slog.Logger) asynq.Logger { return asynqLogger{l.With("component", "asynq")} }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...)) }
