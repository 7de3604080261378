package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/rediskeys"
)

// The pipeline's tasks (a triggered scoring, a dispatch wake-up) answer a
// write at once, and every worker process hears the same writes: each
// worker that stored a candle of the same (market, style), each that
// LISTENs for the same verdict event. This file is their one mechanism:
//
//  1. Claim once across workers: the task id is claimed in Redis
//     (SET NX under rediskeys.Space.PipelineClaim, for claimTTL), and only
//     the worker that claimed it goes on. A claim is a task id, so two
//     workers that heard the same thing name it alike and one of them runs
//     it, while a later write (a new generation, a new event) names a new
//     task.
//  2. Run now: the claimer runs the task in its own process
//     (Worker.RunNow), after RunNowDelay, without asynq. A hop that waited
//     for a lane would wait up to its poll interval (1 s), and polling
//     faster costs CPU whether or not there is work.
//  3. Else a held-back copy: a run that fails, or does not start because
//     the process is stopping, is enqueued in the default queue under the
//     same id, held back CopyDelay, and the bulk lane runs it with asynq's
//     retries. When RunNow is not set (or does not take the task) the task
//     is enqueued at once.
//
// Nothing depends on this path: the scheduler's ticks score and dispatch
// whatever it missed (a claim lost with its process, Redis away), so every
// task is idempotent and a duplicate run is harmless.

// claimTTL is how long a claim lasts: a process that dies after its claim
// leaves the task to the next claim after that (and to the ticks
// meanwhile).
const claimTTL = time.Minute

// DefaultCopyDelay is how long the queued copy of a task that RunNow took
// but did not run to success (it failed, or Run ended first) is held back
// (asynq.ProcessIn) before the bulk lane runs it, with asynq's retries: a
// first back-off. Never pending at once on the bulk lane: there, behind
// the candle pages, candle → event p95 measured 8.8 s. A process that
// dies mid-run leaves no copy; the scheduler's ticks are the safety net
// (scoring every MARKET_SCORE_INTERVAL, dispatch every
// MARKET_WEBHOOK_INTERVAL).
const DefaultCopyDelay = 15 * time.Second

// DefaultRunNowDelay is RunNow's coalescing delay: a burst of candle
// writes, from one worker or several, makes one scoring run.
const DefaultRunNowDelay = 100 * time.Millisecond

// runNowTimeout bounds a RunNow run and, as asynq.Timeout, its queued
// copy's: a hung run must not hold a slot for ever.
const runNowTimeout = 5 * time.Minute

// Pipeline starts the pipeline's tasks: claim once across workers, run now,
// else a held-back copy (see above). The score trigger and the dispatch
// waker each hold one.
type Pipeline struct {
	// Redis holds the claims, named by Keys (the deployment's space).
	Redis redis.UniversalClient
	Keys  rediskeys.Space
	// Queue enqueues a task RunNow does not take.
	Queue *asynq.Client
	// RunNow, when set (Worker.RunNow), runs each claimed task in this
	// process at once; unset, claimed tasks are enqueued.
	RunNow func(t *asynq.Task, taskID string, copyOpts ...asynq.Option) bool
	// CopyDelay holds back the queued copy of a run that failed
	// (0: DefaultCopyDelay).
	CopyDelay time.Duration
}

// NewQueueClient returns the asynq client a Pipeline enqueues with (close
// it when done).
func NewQueueClient(redisURL string) (*asynq.Client, error) {
	opt, err := rediskeys.AsynqOpt(redisURL)
	if err != nil {
		return nil, fmt.Errorf("worker: redis url: %w", err)
	}
	return asynq.NewClient(opt), nil
}

// Start claims taskID across workers and, when this call claimed it, runs
// the task at once or enqueues it (opts are the queued copy's: retries,
// retention). It reports whether it claimed the task; a task already
// queued under its id (a claim that ran out) is not an error, as that
// task runs anyway.
func (p *Pipeline) Start(ctx context.Context, task *asynq.Task, taskID string, opts ...asynq.Option) (claimed bool, err error) {
	claimed, err = p.Redis.SetNX(ctx, p.Keys.PipelineClaim(taskID), 1, claimTTL).Result()
	if err != nil || !claimed {
		return false, err
	}
	opts = append(slices.Clip(opts), asynq.TaskID(taskID), asynq.Queue(QueueDefault), asynq.Timeout(runNowTimeout))
	if p.RunNow != nil {
		delay := p.CopyDelay
		if delay <= 0 {
			delay = DefaultCopyDelay
		}
		if p.RunNow(task, taskID, append(slices.Clip(opts), asynq.ProcessIn(delay))...) {
			return true, nil
		}
	}
	_, err = p.Queue.EnqueueContext(ctx, task, opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) || errors.Is(err, asynq.ErrDuplicateTask) {
		err = nil
	}
	return true, err
}

// RunNow runs a pipeline task in this process at once (after
// RunNowDelay, which coalesces bursts), in a goroutine; a Pipeline calls
// it after it claimed taskID. Only a task that fails, or does not start
// because Run is ending, is enqueued in the default queue under taskID
// with copyOpts (the Pipeline's options, held back CopyDelay: see
// DefaultCopyDelay), and the bulk lane runs it then, with asynq's
// retries. At most PipelineConcurrency run at once; the others wait for a
// slot, each after its type's gate (Gate) if it has one. It reports
// whether it took the task: when it did not (before or after Run), the
// Pipeline enqueues the task itself.
//
// A task that succeeds costs no Redis round trip here: no copy is
// enqueued ahead of the run as a safety net, because most triggered runs
// find nothing to score and two asynq scripts per run would be most of
// their cost; the scheduler's ticks are the safety net instead.
func (w *Worker) RunNow(t *asynq.Task, taskID string, copyOpts ...asynq.Option) bool {
	w.nowMu.Lock()
	defer w.nowMu.Unlock()
	ctx := w.nowCtx
	if ctx == nil {
		return false
	}
	if w.onRunNow != nil {
		w.onRunNow(taskID)
	}
	w.nowWG.Add(1)
	go func() {
		defer w.nowWG.Done()
		select {
		case <-time.After(w.cfg.RunNowDelay):
		case <-ctx.Done():
			w.enqueueCopy(t, taskID, copyOpts) // shutting down
			return
		}
		// The task's gate first (its run lock), then a slot: a task
		// waiting for its lock does not hold a slot another task could run
		// in.
		taskCtx := ctx
		if gate := w.gates[t.Type()]; gate != nil {
			gctx, release, err := gate(ctx, t)
			if err != nil {
				w.enqueueCopy(t, taskID, copyOpts)
				return
			}
			defer release()
			taskCtx = gctx
		}
		// Wait for a slot rather than leave the task to the lane's poll.
		select {
		case w.nowSem <- struct{}{}:
		case <-ctx.Done():
			w.enqueueCopy(t, taskID, copyOpts)
			return
		}
		defer func() { <-w.nowSem }()
		w.nowRuns.Add(1)
		runCtx, cancel := context.WithTimeout(taskCtx, runNowTimeout)
		defer cancel()
		if err := w.mux.ProcessTask(runCtx, t); err != nil {
			w.cfg.Logger.Warn("task failed; its queued copy retries it", "type", t.Type(), "task_id", taskID, "err", err)
			w.enqueueCopy(t, taskID, copyOpts)
		}
	}()
	return true
}

// enqueueCopy enqueues the queued copy of a task RunNow took but did not
// run to success. An id already waiting (asynq.ErrTaskIDConflict) is the
// same task: nothing is lost.
func (w *Worker) enqueueCopy(t *asynq.Task, taskID string, copyOpts []asynq.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := w.client.EnqueueContext(ctx, t, copyOpts...)
	switch {
	case err == nil:
		w.nowCopies.Add(1)
	case errors.Is(err, asynq.ErrTaskIDConflict), errors.Is(err, asynq.ErrDuplicateTask):
	default:
		w.cfg.Logger.Warn("queued copy not enqueued; the next tick catches up", "type", t.Type(), "task_id", taskID, "err", err)
	}
}
