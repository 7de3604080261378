package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// DefaultCandleHotWindow is how long candles of each timeframe stay rows
// of the candles table (the hot window) before the mover packs them into
// candle blocks (store.CompactSeries): a day, a week of weekly candles. The
// push feeds and REST ingest write the open candle and the newest closed
// ones; a repair of an older candle writes a row that wins over the block
// until the next move, so the window only has to hold what is written
// every second. Blocks are packed whole: a candle stays hot until the
// whole period of its block (a day of 1m and 5m, a month of 15m to 1d, a
// year of 1w: store.CandleBlockStart) is older than the window, so a block
// is written once, not at every tick.
func DefaultCandleHotWindow() map[domain.Timeframe]time.Duration {
	const day = 24 * time.Hour
	out := map[domain.Timeframe]time.Duration{}
	for _, tf := range domain.Timeframes {
		out[tf] = day
	}
	out[domain.TF1w] = 7 * day
	return out
}

// CompactCutoff is the open time before which candles of tf are packed at
// now: the start of the block period of now minus the hot window; ok is
// false when tf has no hot window (never packed).
func CompactCutoff(hot map[domain.Timeframe]time.Duration, tf domain.Timeframe, now time.Time) (time.Time, bool) {
	w, ok := hot[tf]
	if !ok || w <= 0 {
		return time.Time{}, false
	}
	return store.CandleBlockStart(tf, now.Add(-w)), true
}

// Bounds of a compaction run: a transaction moves at most compactBatch
// candles of one series (a few blocks: the rows it locks are old ones no
// feed writes, and the versions lock every writer of a scored timeframe
// takes is held only from its last statement to its commit); a run moves at
// most compactMaxRows and the next tick goes on, so a backlog (the first
// run on a database of years of rows) is worked off over ticks.
const (
	compactBatch   = 20000
	compactMaxRows = 2000000
	compactSeries  = 500
)

// CompactStore is what the mover reads and writes.
type CompactStore interface {
	CompactableSeries(ctx context.Context, tf domain.Timeframe, before time.Time, n int) ([]store.CandleKey, error)
	CompactSeries(ctx context.Context, k store.CandleKey, before time.Time, maxRows int) (int, error)
}

// CompactJob packs the candles older than their timeframe's hot window
// into candle blocks, series by series. Moving what is moved already moves
// nothing, so a run repeated, or run by two workers at once, is harmless.
type CompactJob struct {
	Store     CompactStore
	HotWindow map[domain.Timeframe]time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
	// Batch and MaxRows override the candles a transaction and a run
	// move (0 = compactBatch, compactMaxRows).
	Batch, MaxRows int
}

// Run packs, timeframe by timeframe, the candles past the hot window and
// returns how many it moved per timeframe.
func (j *CompactJob) Run(ctx context.Context) (map[domain.Timeframe]int64, error) {
	batch, budget := j.Batch, j.MaxRows
	if batch <= 0 {
		batch = compactBatch
	}
	if budget <= 0 {
		budget = compactMaxRows
	}
	logger := j.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := j.Now()
	moved := map[domain.Timeframe]int64{}
	for _, tf := range domain.Timeframes {
		cut, ok := CompactCutoff(j.HotWindow, tf, now)
		if !ok {
			continue
		}
		for budget > 0 {
			keys, err := j.Store.CompactableSeries(ctx, tf, cut, compactSeries)
			if err != nil {
				return moved, fmt.Errorf("worker: compact %s candles before %s: %w", tf, cut.Format(time.RFC3339), err)
			}
			round := 0
			for _, k := range keys {
				for budget > 0 {
					n, err := j.Store.CompactSeries(ctx, k, cut, min(batch, budget))
					if err != nil {
						return moved, fmt.Errorf("worker: compact %s before %s: %w", k, cut.Format(time.RFC3339), err)
					}
					moved[tf] += int64(n)
					round += n
					budget -= n
					if n < batch {
						break
					}
				}
			}
			if round == 0 {
				break // nothing left (or only what another mover holds)
			}
		}
		if moved[tf] > 0 {
			logger.Info("packed candles past the hot window", "timeframe", tf, "before", cut, "moved", moved[tf])
		}
	}
	return moved, nil
}
