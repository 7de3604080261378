package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// DispatchWaker wakes the webhook dispatcher as soon as a verdict event
// commits: it listens for the outbox's Postgres notifications
// (store.VerdictEventsChannel, sent by a trigger when the inserting
// transaction commits) and runs a dispatch task. Every worker process
// runs one; their wake-ups for the same event share one id
// ("webhooks:wake:<event id>", claimed in Redis for a minute), so the
// event costs one dispatch pass however many workers heard it, and a burst
// of events heard together costs one. A reconnect enqueues a pass too (events
// may have committed while the connection was down). The scheduler's
// periodic dispatch (MARKET_WEBHOOK_INTERVAL) stays the safety net: a
// notification lost with a connection, or a failed enqueue, only delays an
// event until the next tick.
type DispatchWaker struct {
	// Listen is store.DB.ListenVerdictEvents: it calls onEvent per event
	// id and onConnect after each (re)connect, until ctx ends.
	Listen func(ctx context.Context, onEvent func(id int64), onConnect func()) error
	// Redis holds the claims of the wake-up ids (keys "pipeline:claim:<id>").
	Redis  redis.UniversalClient
	Queue  *asynq.Client
	Logger *slog.Logger
	Now    func() time.Time
	// Drop, when set, is asked before each wake-up is enqueued; true drops
	// it (tests prove the safety net with it).
	Drop func(eventID int64) bool
	// RunNow, when set (Worker.RunNow), runs the dispatch pass of each
	// wake-up this waker claimed in this process at once (enqueued, held
	// back CopyDelay, only when that run fails; 0: DefaultCopyDelay);
	// unset, the pass is enqueued.
	RunNow    func(t *asynq.Task, taskID string, copyOpts ...asynq.Option) bool
	CopyDelay time.Duration
}

// Run listens and enqueues until ctx ends.
func (w *DispatchWaker) Run(ctx context.Context) error {
	logger := w.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := w.Now
	if now == nil {
		now = time.Now
	}
	// The listener only signals; one goroutine enqueues, taking every id
	// heard meanwhile as one wake-up (the newest id names it).
	ids := make(chan int64, 1024)
	go func() {
		for {
			var newest int64
			select {
			case <-ctx.Done():
				return
			case newest = <-ids:
			}
		drain:
			for {
				select {
				case id := <-ids:
					newest = max(newest, id)
				default:
					break drain
				}
			}
			w.enqueue(ctx, logger, fmt.Sprintf("webhooks:wake:%d", newest), newest)
		}
	}()
	return w.Listen(ctx, func(id int64) {
		select {
		case ids <- id:
		default: // full: a wake-up is already pending, which covers this event
		}
	}, func() {
		// Reconnected: a pass catches up on what was missed. Workers that
		// reconnect in the same second share it.
		w.enqueue(ctx, logger, "webhooks:wake:connect:"+now().UTC().Format("20060102T150405"), 0)
	})
}

func (w *DispatchWaker) enqueue(ctx context.Context, logger *slog.Logger, id string, eventID int64) {
	if w.Drop != nil && w.Drop(eventID) {
		return
	}
	claimed, err := w.Redis.SetNX(ctx, "pipeline:claim:"+id, 1, time.Minute).Result()
	if err == nil && claimed {
		err = runPipeline(ctx, w.Queue, NewWebhookDispatchTask(time.Time{}), id, w.RunNow, w.CopyDelay,
			asynq.MaxRetry(1), asynq.Retention(time.Minute))
	}
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) && !errors.Is(err, asynq.ErrDuplicateTask) && ctx.Err() == nil {
		logger.Warn("dispatch wake-up not run; the next dispatch tick sends the event", "task_id", id, "err", err)
	}
}

// runPipeline runs a pipeline task (a triggered scoring, a dispatch
// wake-up) whose id this process claimed: at once in this process when
// runNow is set (Worker.RunNow), which enqueues it only when the run fails
// or does not start (held back for copyDelay; 0: DefaultCopyDelay);
// otherwise, or when RunNow does not take it, the task is enqueued under
// id in the default queue at once. Its time-out is RunNow's
// (runNowTimeout).
func runPipeline(ctx context.Context, q *asynq.Client, task *asynq.Task, id string,
	runNow func(*asynq.Task, string, ...asynq.Option) bool, copyDelay time.Duration, opts ...asynq.Option) error {
	opts = append(slices.Clip(opts), asynq.TaskID(id), asynq.Queue(QueueDefault), asynq.Timeout(runNowTimeout))
	if runNow != nil {
		if copyDelay <= 0 {
			copyDelay = DefaultCopyDelay
		}
		if runNow(task, id, append(slices.Clip(opts), asynq.ProcessIn(copyDelay))...) {
			return nil
		}
	}
	_, err := q.EnqueueContext(ctx, task, opts...)
	return err
}
