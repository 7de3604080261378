package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
)

// TypeCandleRetention deletes the candles older than each timeframe's
// retention.
const TypeCandleRetention = "candles:retention"

// DefaultCandleRetention is how long candles of each timeframe are kept;
// a timeframe without an entry is kept forever. The largest read of any
// timeframe is GET /ohlcv's 1,000 newest candles (scoring reads 500 of
// 15m, 1h, 4h and 1d; the statistics every daily one), so each intraday
// timeframe keeps three to four times that: a series that missed ingest for
// a while still serves a full page. Daily and weekly candles, at most 365
// rows a year per symbol, are the statistics' history: kept.
func DefaultCandleRetention() map[domain.Timeframe]time.Duration {
	const day = 24 * time.Hour
	return map[domain.Timeframe]time.Duration{
		domain.TF1m:  3 * day,   // 4,320 candles
		domain.TF5m:  14 * day,  // 4,032
		domain.TF15m: 30 * day,  // 2,880
		domain.TF30m: 60 * day,  // 2,880
		domain.TF1h:  180 * day, // 4,320
		domain.TF4h:  730 * day, // 4,380
	}
}

// RetentionCutoff is the open time before which candles of tf are
// deleted at now; ok is false when tf is kept forever.
func RetentionCutoff(retention map[domain.Timeframe]time.Duration, tf domain.Timeframe, now time.Time) (time.Time, bool) {
	keep, ok := retention[tf]
	if !ok || keep <= 0 {
		return time.Time{}, false
	}
	return tf.Truncate(now.Add(-keep)), true
}

// Batches of the retention task: a batch is one short DELETE, so no lock
// is held long and ingest keeps writing between them; a run stops after
// retentionMaxBatches and the next run goes on, so a backlog (the first
// run on a large database, or a shortened retention) is worked off over
// a few ticks instead of in one long task.
const (
	retentionBatch      = 5000
	retentionMaxBatches = 200
)

// RetentionStore is what the retention task deletes from.
type RetentionStore interface {
	DeleteCandlesBefore(ctx context.Context, tf domain.Timeframe, before time.Time, limit int) (int64, error)
	DeleteCandleBlocksBefore(ctx context.Context, tf domain.Timeframe, before time.Time, limit int) (blocks, candles int64, err error)
}

// RetentionPayload is a retention task's tick (for logs and the task id).
type RetentionPayload struct {
	Tick time.Time `json:"tick"`
}

// NewCandleRetentionTask returns the retention task of a tick.
func NewCandleRetentionTask(tick time.Time) *asynq.Task {
	return newTask(TypeCandleRetention, RetentionPayload{Tick: tick.UTC()})
}

// RetentionJob deletes candles older than their timeframe's retention.
// Deleting what is already gone deletes nothing, so a run repeated, or
// run by two workers at once, is harmless.
type RetentionJob struct {
	Store     RetentionStore
	Retention map[domain.Timeframe]time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
	// Batch and MaxBatches override the batch size and the batches per
	// run (0 = retentionBatch, retentionMaxBatches).
	Batch, MaxBatches int
	// Compact, when set, packs the candles past the hot window into
	// candle blocks after each run (CompactJob): the same tick, so the
	// mover never packs what the run is about to delete.
	Compact *CompactJob
}

// Register adds the retention handler to w.
func (j *RetentionJob) Register(w *Worker) {
	w.Handle(TypeCandleRetention, asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		if _, err := j.Run(ctx); err != nil {
			return err
		}
		if j.Compact == nil {
			return nil
		}
		_, err := j.Compact.Run(ctx)
		return err
	}))
}

// Run deletes, timeframe by timeframe, the candles past their retention,
// in batches (at most MaxBatches in the whole run), and returns how many
// it deleted per timeframe.
func (j *RetentionJob) Run(ctx context.Context) (map[domain.Timeframe]int64, error) {
	batch, maxBatches := j.Batch, j.MaxBatches
	if batch <= 0 {
		batch = retentionBatch
	}
	if maxBatches <= 0 {
		maxBatches = retentionMaxBatches
	}
	logger := j.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := j.Now()
	deleted := map[domain.Timeframe]int64{}
	for _, tf := range domain.Timeframes {
		cut, ok := RetentionCutoff(j.Retention, tf, now)
		if !ok {
			continue
		}
		for maxBatches > 0 {
			maxBatches--
			n, err := j.Store.DeleteCandlesBefore(ctx, tf, cut, batch)
			if err != nil {
				return deleted, fmt.Errorf("worker: candle retention %s before %s: %w", tf, cut.Format(time.RFC3339), err)
			}
			deleted[tf] += n
			if n < int64(batch) {
				break
			}
		}
		// The packed candles past the cut-off, a block (up to a few
		// thousand candles) for a row of the batch.
		for maxBatches > 0 {
			maxBatches--
			blocks, n, err := j.Store.DeleteCandleBlocksBefore(ctx, tf, cut, batch/100+1)
			if err != nil {
				return deleted, fmt.Errorf("worker: candle retention %s blocks before %s: %w", tf, cut.Format(time.RFC3339), err)
			}
			deleted[tf] += n
			if blocks < int64(batch/100+1) {
				break
			}
		}
		if deleted[tf] > 0 {
			logger.Info("deleted candles past retention", "timeframe", tf, "before", cut, "deleted", deleted[tf])
		}
	}
	return deleted, nil
}
