package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/store"
)

// BackfillStore is what a backfill reads and writes.
type BackfillStore interface {
	UpsertCandles(ctx context.Context, k store.CandleKey, candles []domain.Candle) error
	BackfillProgressOf(ctx context.Context, k store.CandleKey) (store.BackfillProgress, bool, error)
	SaveBackfillProgress(ctx context.Context, k store.CandleKey, p store.BackfillProgress) error
}

// BackfillEvent reports progress to the operator.
type BackfillEvent struct {
	Symbol       string
	SymbolIndex  int // 1-based
	Symbols      int
	Candles      int // stored so far for this symbol
	Total        int // stored so far in the whole backfill
	Until        time.Time
	SymbolDone   bool
	Resumed      bool
	SkippedCause string
}

// backfillPage is the number of candles asked per provider request.
const backfillPage = 1000

// RetainedStart is where a backfill from start begins: start, or the
// retention's cut-off of tf when start is older (what the retention task
// would delete is never loaded), on tf's boundary.
func (in *Ingester) RetainedStart(tf domain.Timeframe, start time.Time) time.Time {
	return retainedSince(in.Retention, tf, in.Now(), tf.Truncate(start))
}

// retainedSince is t, or the cut-off of tf's retention at now when t is
// before it.
func retainedSince(retention map[domain.Timeframe]time.Duration, tf domain.Timeframe, now, t time.Time) time.Time {
	if cut, ok := RetentionCutoff(retention, tf, now); ok && t.Before(cut) {
		return cut
	}
	return t
}

// Backfill loads the history of the given symbols from start to now, page
// by page, saving its progress after every page so an interrupted run
// resumes where it stopped (a series already finished from an earlier or
// equal start is skipped). A start older than tf's retention begins at the
// retention's cut-off instead. Its requests are bulk work
// (hostbudget.Bulk), so a backfill run beside a deployment leaves its
// ingest part of every window of the providers' budgets.
func (in *Ingester) Backfill(ctx context.Context, bs BackfillStore, c domain.Combination, tf domain.Timeframe,
	symbols []string, start time.Time, progress func(BackfillEvent)) (int, error) {
	ctx = hostbudget.WithClass(ctx, hostbudget.Bulk)
	p, ok := in.Feeds.For(c)
	if !ok {
		return 0, fmt.Errorf("worker: backfill: no configured feed serves %s", c)
	}
	if len(symbols) == 0 {
		var err error
		if symbols, err = p.Symbols(ctx, c); err != nil {
			return 0, fmt.Errorf("worker: backfill: symbols of %s: %w", c, err)
		}
	}
	start = in.RetainedStart(tf, start)
	total := 0
	for i, sym := range symbols {
		k := store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: tf}
		ev := BackfillEvent{Symbol: sym, SymbolIndex: i + 1, Symbols: len(symbols)}
		prog, found, err := bs.BackfillProgressOf(ctx, k)
		if err != nil {
			return total, err
		}
		symStart, since := start, start
		if found && !prog.StartAt.After(start) {
			// Resume: re-read from the last stored candle (it may have been open).
			ev.Resumed = true
			symStart, since = prog.StartAt, prog.DoneUntil
		}
		for {
			now := in.Now()
			cs, err := p.Candles(ctx, c, sym, tf, since, backfillPage)
			if err != nil {
				return total, fmt.Errorf("worker: backfill %s %s from %s: %w", sym, tf, since.Format(time.RFC3339), err)
			}
			if len(cs) > 0 {
				if err := bs.UpsertCandles(ctx, k, cs); err != nil {
					return total, err
				}
				ev.Candles += len(cs)
				total += len(cs)
			}
			last := since
			if len(cs) > 0 {
				last = cs[len(cs)-1].Time
			}
			done := len(cs) < backfillPage || !last.Before(tf.Truncate(now))
			prog = store.BackfillProgress{StartAt: symStart, DoneUntil: last, Finished: done}
			if err := bs.SaveBackfillProgress(ctx, k, prog); err != nil {
				return total, err
			}
			ev.Total, ev.Until = total, last
			if progress != nil {
				progress(ev)
			}
			if done || !last.After(since) {
				break
			}
			since = last.Add(tf.Duration())
		}
		ev.SymbolDone, ev.Total = true, total
		if progress != nil {
			progress(ev)
		}
	}
	return total, nil
}
