package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// The statistics job's state (migration 00027): what it has read of each
// asset's daily candles and the observations of every day, so that a run
// reads only the candles it has not seen.

// StatsAsset is how far the statistics job has read one asset's daily
// candles. Days are day numbers (stats.DayNumber).
type StatsAsset struct {
	Symbol, Exchange string
	// FirstDay is the day of Backtest[0] and Live[0].
	FirstDay int
	// ThroughDay is the day of the last candle read.
	ThroughDay int
	// SeriesVersion is the candle series' version (CandleSeriesVersion)
	// when it was read.
	SeriesVersion int64
	// Observed: the asset had enough candles to be scored.
	Observed bool
	// Backtest and Live hold a code per calendar day from FirstDay: the
	// day's bar and the verdict it carried (the worker defines them).
	Backtest, Live []byte
}

// StatsDay is the observations of one market, source and day, encoded
// by domain/stats.
type StatsDay struct {
	Source            string
	Day               int
	Verdicts, Factors []byte
}

// StatsState is the statistics job's state of one market.
type StatsState struct {
	// Method is what the state was computed with ("" when none).
	Method     string
	Generation int64
	// PendingDrop, when not nil, is the day from which the assets a run
	// did not save yet must be judged again.
	PendingDrop *int
	Assets      map[string]StatsAsset
}

// StatsUpdate is one run's change to a market's state.
type StatsUpdate struct {
	Method string
	// Generation is the state's generation the run started from: the
	// update fails with domain.ECONFLICT when another run saved since.
	Generation int64
	// Reset drops every asset and day first (another method).
	Reset bool
	// DropFrom, when not nil, drops the days from this day on first.
	DropFrom *int
	// PendingDrop is stored as the state's PendingDrop.
	PendingDrop *int
	Days        []StatsDay
	Assets      []StatsAsset
}

// dayDate turns a day number into the date Postgres stores.
func dayDate(day int) time.Time { return time.Unix(int64(day)*86400, 0).UTC() }

// dateDay is dayDate's inverse.
func dateDay(t time.Time) int { return int(t.Unix() / 86400) }

// StatsStateOf returns the statistics job's state of a market.
func (db *DB) StatsStateOf(ctx context.Context, m domain.Market) (StatsState, error) {
	st := StatsState{Assets: map[string]StatsAsset{}}
	var pending *time.Time
	err := db.Pool.QueryRow(ctx, `SELECT method, generation, pending_drop FROM stats_progress WHERE market = $1`, string(m)).Scan(&st.Method, &st.Generation, &pending)
	if err != nil && err != pgx.ErrNoRows {
		return st, translate(err, "statistics state")
	}
	if pending != nil {
		d := dateDay(*pending)
		st.PendingDrop = &d
	}
	rows, err := db.Pool.Query(ctx, `SELECT symbol, exchange, first_day, through_day, series_version, observed, backtest, live
		FROM stats_assets WHERE market = $1`, string(m))
	if err != nil {
		return st, translate(err, "statistics state")
	}
	defer rows.Close()
	for rows.Next() {
		var a StatsAsset
		var first, through time.Time
		if err := rows.Scan(&a.Symbol, &a.Exchange, &first, &through, &a.SeriesVersion, &a.Observed, &a.Backtest, &a.Live); err != nil {
			return st, translate(err, "statistics state")
		}
		a.FirstDay, a.ThroughDay = dateDay(first), dateDay(through)
		st.Assets[a.Symbol] = a
	}
	return st, translate(rows.Err(), "statistics state")
}

// StatsDaysOf returns the stored observations of the given days of a
// market and source (absent days are absent).
func (db *DB) StatsDaysOf(ctx context.Context, m domain.Market, source string, days []int) ([]StatsDay, error) {
	dates := make([]time.Time, len(days))
	for i, d := range days {
		dates[i] = dayDate(d)
	}
	rows, err := db.Pool.Query(ctx, `SELECT day, verdicts, factors FROM stats_days
		WHERE market = $1 AND source = $2 AND day = ANY($3) ORDER BY day`, string(m), source, dates)
	if err != nil {
		return nil, translate(err, "statistics days")
	}
	return collectStatsDays(rows, source)
}

// StatsTotal is the merge, in day order, of a market's and source's
// stored days through ThroughDay (migration 00032), encoded as the days
// are.
type StatsTotal struct {
	Source            string
	ThroughDay        int
	Verdicts, Factors []byte
}

// EachStatsDaySinceTotal reads, in one snapshot, a market's and source's
// stored total (total is called with it, if there is one) and every stored
// day after it, in day order (fn is called with each). It returns the
// state's generation that snapshot saw (SaveStatsTotal's argument).
func (db *DB) EachStatsDaySinceTotal(ctx context.Context, m domain.Market, source string,
	total func(StatsTotal) error, fn func(StatsDay) error,
) (generation int64, err error) {
	tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, translate(err, "statistics days")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	err = tx.QueryRow(ctx, `SELECT generation FROM stats_progress WHERE market = $1`, string(m)).Scan(&generation)
	if err != nil && err != pgx.ErrNoRows {
		return 0, translate(err, "statistics days")
	}
	after := time.Time{}
	t := StatsTotal{Source: source}
	var through time.Time
	err = tx.QueryRow(ctx, `SELECT through_day, verdicts, factors FROM stats_totals WHERE market = $1 AND source = $2`,
		string(m), source).Scan(&through, &t.Verdicts, &t.Factors)
	switch {
	case err == nil:
		t.ThroughDay, after = dateDay(through), through
		if err := total(t); err != nil {
			return 0, err
		}
	case err != pgx.ErrNoRows:
		return 0, translate(err, "statistics days")
	}
	rows, err := tx.Query(ctx, `SELECT day, verdicts, factors FROM stats_days
		WHERE market = $1 AND source = $2 AND day > $3 ORDER BY day`, string(m), source, after)
	if err != nil {
		return 0, translate(err, "statistics days")
	}
	defer rows.Close()
	for rows.Next() {
		d := StatsDay{Source: source}
		var day time.Time
		if err := rows.Scan(&day, &d.Verdicts, &d.Factors); err != nil {
			return 0, translate(err, "statistics days")
		}
		d.Day = dateDay(day)
		if err := fn(d); err != nil {
			return 0, err
		}
	}
	return generation, translate(rows.Err(), "statistics days")
}

// SaveStatsTotal stores a market's total of a source if the state is
// still at generation (the one EachStatsDaySinceTotal returned): saved is
// false when a run saved since. A later change of a day the total covers
// deletes it (migration 00032's triggers).
func (db *DB) SaveStatsTotal(ctx context.Context, m domain.Market, t StatsTotal, generation int64) (saved bool, err error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return false, translate(err, "statistics total")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	// SaveStatsState moves the generation first, in the transaction that
	// writes the days: holding the row keeps such a save out until the
	// total is stored (its writes then delete it if they must).
	var now int64
	err = tx.QueryRow(ctx, `SELECT generation FROM stats_progress WHERE market = $1 FOR SHARE`, string(m)).Scan(&now)
	if err == pgx.ErrNoRows || err == nil && now != generation {
		return false, nil
	}
	if err != nil {
		return false, translate(err, "statistics total")
	}
	if _, err := tx.Exec(ctx, `INSERT INTO stats_totals (market, source, through_day, verdicts, factors) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (market, source) DO UPDATE SET through_day = excluded.through_day, verdicts = excluded.verdicts, factors = excluded.factors`,
		string(m), t.Source, dayDate(t.ThroughDay), t.Verdicts, t.Factors); err != nil {
		return false, translate(err, "statistics total")
	}
	return true, translate(tx.Commit(ctx), "statistics total")
}

func collectStatsDays(rows pgx.Rows, source string) ([]StatsDay, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatsDay, error) {
		d := StatsDay{Source: source}
		var day time.Time
		err := row.Scan(&day, &d.Verdicts, &d.Factors)
		d.Day = dateDay(day)
		return d, err
	})
	return out, translate(err, "statistics days")
}

// SaveStatsState applies one run's update to a market's state in one
// transaction, if no other run saved since the update's generation.
func (db *DB) SaveStatsState(ctx context.Context, m domain.Market, u StatsUpdate) error {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err, "statistics state")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	var pending *time.Time
	if u.PendingDrop != nil {
		d := dayDate(*u.PendingDrop)
		pending = &d
	}
	tag, err := tx.Exec(ctx, `INSERT INTO stats_progress AS p (market, method, generation, pending_drop) VALUES ($1, $2, 1, $4)
		ON CONFLICT (market) DO UPDATE SET method = excluded.method, generation = p.generation + 1, pending_drop = excluded.pending_drop
		WHERE p.generation = $3`, string(m), u.Method, u.Generation, pending)
	if err != nil {
		return translate(err, "statistics state")
	}
	if tag.RowsAffected() == 0 {
		return domain.Errorf(domain.ECONFLICT, "store: statistics of %s: another run saved first", m)
	}
	b := &pgx.Batch{}
	switch {
	case u.Reset:
		b.Queue(`DELETE FROM stats_days WHERE market = $1`, string(m))
		b.Queue(`DELETE FROM stats_assets WHERE market = $1`, string(m))
	case u.DropFrom != nil:
		b.Queue(`DELETE FROM stats_days WHERE market = $1 AND day >= $2`, string(m), dayDate(*u.DropFrom))
	}
	for _, d := range u.Days {
		b.Queue(`INSERT INTO stats_days (market, source, day, verdicts, factors) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (market, source, day) DO UPDATE SET verdicts = excluded.verdicts, factors = excluded.factors`,
			string(m), d.Source, dayDate(d.Day), d.Verdicts, d.Factors)
	}
	for _, a := range u.Assets {
		b.Queue(`INSERT INTO stats_assets (market, symbol, exchange, first_day, through_day, series_version, observed, backtest, live)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (market, symbol) DO UPDATE SET exchange = excluded.exchange, first_day = excluded.first_day,
				through_day = excluded.through_day, series_version = excluded.series_version, observed = excluded.observed,
				backtest = excluded.backtest, live = excluded.live`,
			string(m), a.Symbol, a.Exchange, dayDate(a.FirstDay), dayDate(a.ThroughDay), a.SeriesVersion, a.Observed, a.Backtest, a.Live)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return translate(err, "statistics state")
	}
	return translate(tx.Commit(ctx), "statistics state")
}

// ResetStatsState forgets a market's statistics state: the next run
// recomputes everything from the stored candles.
func (db *DB) ResetStatsState(ctx context.Context, m domain.Market) error {
	_, err := db.Pool.Exec(ctx, `UPDATE stats_progress SET method = '', generation = generation + 1 WHERE market = $1`, string(m))
	return translate(err, "statistics state")
}

// SeriesVersion is a candle series' version (migration 00023): how many
// deep changes (a change of a candle older than the series' newest) it
// has had, with the last ones and the open times they touched.
type SeriesVersion struct {
	Version int64
	// Newest is the newest open time the series has had.
	Newest time.Time
	// Deep lists the last deep changes, oldest first.
	Deep []DeepChange
	// Dropped is the version of the newest deep change no longer listed
	// (0: none).
	Dropped int64
}

// DeepChange is one deep change of a series: the version it made and the
// oldest open time it touched.
type DeepChange struct {
	Version int64
	From    time.Time
}

// ChangedSince returns the oldest open time touched by the deep changes
// after version v; all is true when some of them are no longer listed
// (the whole series must then be taken as changed), ok false when none.
func (s SeriesVersion) ChangedSince(v int64) (from time.Time, all, ok bool) {
	if s.Version <= v {
		return time.Time{}, false, false
	}
	if s.Dropped > v {
		return time.Time{}, true, true
	}
	for _, d := range s.Deep {
		if d.Version > v && (!ok || d.From.Before(from)) {
			from, ok = d.From, true
		}
	}
	if !ok {
		return time.Time{}, true, true
	}
	return from, false, true
}

// CandleSeriesVersions returns the version of each of the symbols' daily
// series of an exchange (symbols without one are absent). A version moves
// whenever a candle older than the series' newest is written or deleted,
// by any writer (migration 00023's triggers).
func (db *DB) CandleSeriesVersions(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string) (map[string]SeriesVersion, error) {
	rows, err := db.Pool.Query(ctx, `SELECT symbol, version, newest, deep_versions, deep_from, deep_dropped FROM candle_series_versions
		WHERE market = $1 AND exchange = $2 AND timeframe = $3 AND symbol = ANY($4)`, string(m), exchange, string(tf), symbols)
	if err != nil {
		return nil, translate(err, "candle series versions")
	}
	defer rows.Close()
	out := make(map[string]SeriesVersion, len(symbols))
	for rows.Next() {
		var sym string
		var s SeriesVersion
		var versions []int64
		var from []time.Time
		if err := rows.Scan(&sym, &s.Version, &s.Newest, &versions, &from, &s.Dropped); err != nil {
			return nil, translate(err, "candle series versions")
		}
		if len(versions) != len(from) {
			return nil, fmt.Errorf("store: candle series version of %s: %d versions, %d times", sym, len(versions), len(from))
		}
		for i, v := range versions {
			s.Deep = append(s.Deep, DeepChange{Version: v, From: from[i].UTC()})
		}
		s.Newest = s.Newest.UTC()
		out[sym] = s
	}
	return out, translate(rows.Err(), "candle series versions")
}

// SnapshotVerdictsSince returns, per symbol, the verdict snapshots of a
// market and style at or after since, oldest first: what the service
// published, for live statistics.
func (db *DB) SnapshotVerdictsSince(ctx context.Context, m domain.Market, style analytics.Style, since time.Time) (map[string][]AnalyticsSnapshot, error) {
	rows, err := db.Pool.Query(ctx, `SELECT symbol, at, verdict FROM analytics_snapshots
		WHERE market = $1 AND style = $2 AND at >= $3 ORDER BY symbol, at`, string(m), string(style), since.UTC())
	if err != nil {
		return nil, translate(err, "analytics history")
	}
	return collectSnapshotVerdicts(rows)
}
