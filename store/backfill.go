package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// BackfillProgress is how far a backfill of one series got.
type BackfillProgress struct {
	StartAt   time.Time
	DoneUntil time.Time
	Finished  bool
}

// BackfillProgressOf returns the progress of a series; ok is false when
// no backfill of it was started.
func (db *DB) BackfillProgressOf(ctx context.Context, k CandleKey) (p BackfillProgress, ok bool, err error) {
	err = db.Pool.QueryRow(ctx, `SELECT start_at, done_until, finished FROM backfill_progress
		WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4`,
		string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe)).Scan(&p.StartAt, &p.DoneUntil, &p.Finished)
	if err == pgx.ErrNoRows {
		return p, false, nil
	}
	p.StartAt, p.DoneUntil = p.StartAt.UTC(), p.DoneUntil.UTC()
	return p, err == nil, translate(err, "backfill progress")
}

// SaveBackfillProgress records progress after each stored page.
func (db *DB) SaveBackfillProgress(ctx context.Context, k CandleKey, p BackfillProgress) error {
	_, err := db.Pool.Exec(ctx, `INSERT INTO backfill_progress (market, exchange, symbol, timeframe, start_at, done_until, finished)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (market, exchange, symbol, timeframe)
		DO UPDATE SET start_at = excluded.start_at, done_until = excluded.done_until, finished = excluded.finished, updated_at = now()`,
		string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe), p.StartAt.UTC(), p.DoneUntil.UTC(), p.Finished)
	return translate(err, "backfill progress")
}
