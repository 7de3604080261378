package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
)

// DispatchWaker wakes the webhook dispatcher as soon as a verdict event
// commits: it listens for the outbox's Postgres notifications
// (store.VerdictEventsChannel, sent by a trigger when the inserting
// transaction commits) and starts a dispatch pass through its Pipeline.
// Every worker process runs one; their wake-ups for the same event share
// one task id ("webhooks:wake:<event id>"), which the Pipeline claims
// across workers, so the event costs one dispatch pass however many
// workers heard it, and a burst of events heard together costs one. A
// reconnect starts a pass too (events may have committed while the
// connection was down). The scheduler's periodic dispatch
// (MARKET_WEBHOOK_INTERVAL) stays the safety net: a notification lost
// with a connection, or a failed start, only delays an event until the
// next tick.
type DispatchWaker struct {
	// Listen is store.DB.ListenVerdictEvents: it calls onEvent per event
	// id and onConnect after each (re)connect, until ctx ends.
	Listen func(ctx context.Context, onEvent func(id int64), onConnect func()) error
	// Pipeline claims and runs the dispatch passes.
	Pipeline Pipeline
	Logger   *slog.Logger
	Now      func() time.Time
	// Drop, when set, is asked before each wake-up is started; true drops
	// it (tests prove the safety net with it).
	Drop func(eventID int64) bool
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
	_, err := w.Pipeline.Start(ctx, NewWebhookDispatchTask(time.Time{}), id, asynq.MaxRetry(1), asynq.Retention(time.Minute))
	if err != nil && ctx.Err() == nil {
		logger.Warn("dispatch wake-up not run; the next dispatch tick sends the event", "task_id", id, "err", err)
	}
}
