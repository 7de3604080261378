package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// SaveSchedule stores a feed's sessions of a market over the schedule's
// trading days, replacing what those days held (a session the feed no
// longer lists, such as a closure announced since, goes), and widens the
// market's covered range to take the schedule in (migration 00022). One
// transaction: a reader sees the old calendar or the new one. Two workers
// refreshing at once store the same rows.
func (db *DB) SaveSchedule(ctx context.Context, s domain.Schedule, source string, at time.Time) error {
	if err := s.Validate(); err != nil {
		return err
	}
	days := make([]time.Time, len(s.Sessions))
	opens := make([]time.Time, len(s.Sessions))
	closes := make([]time.Time, len(s.Sessions))
	for i, ss := range s.Sessions {
		days[i], opens[i], closes[i] = ss.Day, ss.Open.UTC(), ss.Close.UTC()
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM market_sessions WHERE market = $1 AND day BETWEEN $2 AND $3`, string(s.Market), s.First, s.Last)
	b.Queue(`INSERT INTO market_sessions (market, day, open_at, close_at)
		SELECT $1, d, o, c FROM unnest($2::date[], $3::timestamptz[], $4::timestamptz[]) AS u(d, o, c)
		ON CONFLICT (market, day) DO UPDATE SET open_at = excluded.open_at, close_at = excluded.close_at`,
		string(s.Market), days, opens, closes)
	// Ranges that overlap or touch merge; a range apart from the stored
	// one replaces it (the rows outside it are then not vouched for).
	b.Queue(`INSERT INTO market_calendars (market, first_day, last_day, source, refreshed_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (market) DO UPDATE SET
			first_day = CASE WHEN excluded.first_day <= market_calendars.last_day + 1 AND market_calendars.first_day <= excluded.last_day + 1
				THEN least(market_calendars.first_day, excluded.first_day) ELSE excluded.first_day END,
			last_day = CASE WHEN excluded.first_day <= market_calendars.last_day + 1 AND market_calendars.first_day <= excluded.last_day + 1
				THEN greatest(market_calendars.last_day, excluded.last_day) ELSE excluded.last_day END,
			source = excluded.source, refreshed_at = excluded.refreshed_at`,
		string(s.Market), s.First, s.Last, source, at.UTC())
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err, "market sessions")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return translate(err, "market sessions")
	}
	return translate(tx.Commit(ctx), "market sessions")
}

// Schedule reads a market's stored sessions of the trading days from
// first to last, its range clipped to what is covered; ok is false when
// none of those days is.
func (db *DB) Schedule(ctx context.Context, m domain.Market, first, last time.Time) (domain.Schedule, bool, error) {
	s := domain.Schedule{Market: m}
	err := db.Pool.QueryRow(ctx, `SELECT greatest(first_day, $2::date), least(last_day, $3::date)
		FROM market_calendars WHERE market = $1`, string(m), first, last).Scan(&s.First, &s.Last)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, translate(err, "market calendar")
	}
	if s.Last.Before(s.First) {
		return s, false, nil
	}
	rows, err := db.Pool.Query(ctx, `SELECT day, open_at, close_at FROM market_sessions
		WHERE market = $1 AND day BETWEEN $2 AND $3 ORDER BY day`, string(m), s.First, s.Last)
	if err != nil {
		return s, false, translate(err, "market sessions")
	}
	s.Sessions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Session, error) {
		var ss domain.Session
		err := row.Scan(&ss.Day, &ss.Open, &ss.Close)
		ss.Day, ss.Open, ss.Close = ss.Day.UTC(), ss.Open.UTC(), ss.Close.UTC()
		return ss, err
	})
	if err != nil {
		return s, false, translate(err, "market sessions")
	}
	s.First, s.Last = s.First.UTC(), s.Last.UTC()
	return s, true, nil
}
