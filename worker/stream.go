package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
)

// TypeStreamPrune deletes the event stream's log rows older than
// domain.StreamRetention. It runs on its own schedule, apart from the
// writers of the log: a prune never lengthens an ingest's or a scorer's
// transaction (and with it the lock their commits take to order the log).
const TypeStreamPrune = "stream:prune"

// NewStreamPruneTask builds the prune task of one scheduler tick.
func NewStreamPruneTask(tick time.Time) *asynq.Task {
	return newTask(TypeStreamPrune, struct {
		Tick time.Time `json:"tick"`
	}{tick.UTC()})
}

// StreamPruneStore is what the prune deletes from (store.DB).
type StreamPruneStore interface {
	PruneStreamEvents(ctx context.Context, before time.Time) (int64, error)
}

// StreamPruner runs TypeStreamPrune.
type StreamPruner struct {
	Store  StreamPruneStore
	Logger *slog.Logger
	Now    func() time.Time
}

// Register adds the prune's handler to a worker.
func (p *StreamPruner) Register(w *Worker) {
	w.Handle(TypeStreamPrune, asynq.HandlerFunc(p.HandleStreamPrune))
}

// HandleStreamPrune deletes what the retention no longer keeps; running
// it twice deletes nothing more.
func (p *StreamPruner) HandleStreamPrune(ctx context.Context, _ *asynq.Task) error {
	n, err := p.Store.PruneStreamEvents(ctx, p.Now().Add(-domain.StreamRetention))
	if err != nil {
		return fmt.Errorf("worker: prune stream events: %w", err)
	}
	if n > 0 && p.Logger != nil {
		p.Logger.Info("pruned stream events", "deleted", n, "retention", domain.StreamRetention.String())
	}
	return nil
}
