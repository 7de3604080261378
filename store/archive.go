package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
)

const archiveColumns = `market, style, symbol, exchange, overall_score, verdict, price, change_pct, '{}'::float8[], candle_time,
	candle_close, published_at, candles_used, instrument, result`

// AnalyticsReportAsOf returns the report of one asset as it was published
// at instant at: the newest archived report published at or before it,
// with its full result (no sparkline: the archive does not keep it).
// domain.ENOTFOUND when none was (ArchiveStart names the earliest).
func (db *DB) AnalyticsReportAsOf(ctx context.Context, m domain.Market, symbol string, style analytics.Style, at time.Time) (AnalyticsRecord, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+archiveColumns+` FROM analytics_report_archive
		WHERE market = $1 AND style = $2 AND symbol = $3 AND published_at <= $4 ORDER BY published_at DESC LIMIT 1`,
		string(m), string(style), symbol, at.UTC())
	if err != nil {
		return AnalyticsRecord{}, translate(err, "analytics")
	}
	r, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, true) })
	if err != nil {
		return AnalyticsRecord{}, translate(err, "analytics of "+symbol+" as of "+at.UTC().Format(time.RFC3339))
	}
	return r, nil
}

// ArchiveStart returns when the oldest archived report of one asset was
// published; ok is false when it has none.
func (db *DB) ArchiveStart(ctx context.Context, m domain.Market, symbol string, style analytics.Style) (time.Time, bool, error) {
	var t *time.Time
	err := db.Pool.QueryRow(ctx, `SELECT min(published_at) FROM analytics_report_archive
		WHERE market = $1 AND style = $2 AND symbol = $3`, string(m), string(style), symbol).Scan(&t)
	if err != nil || t == nil {
		return time.Time{}, false, translate(err, "analytics archive")
	}
	return t.UTC(), true, nil
}

// StatsAsOf returns a market's statistics as they stood at instant at:
// per kind and source, the newest computation at or before it (zero
// MarketStats when none was).
func (db *DB) StatsAsOf(ctx context.Context, m domain.Market, at time.Time) (MarketStats, error) {
	rows, err := db.Pool.Query(ctx, `SELECT kind, records, computed_at FROM (
			SELECT DISTINCT ON (kind, source) kind, source, records, computed_at FROM analytics_stats_archive
			WHERE market = $1 AND computed_at <= $2 ORDER BY kind, source, computed_at DESC) s
		ORDER BY CASE source WHEN 'backtest' THEN 0 ELSE 1 END, kind`, string(m), at.UTC())
	if err != nil {
		return MarketStats{}, translate(err, "stats")
	}
	return scanStats(rows, m)
}

// scanStats reads rows of (kind, records, computed_at) into one MarketStats.
func scanStats(rows pgx.Rows, m domain.Market) (MarketStats, error) {
	defer rows.Close()
	var out MarketStats
	for rows.Next() {
		var kind string
		var raw []byte
		var at time.Time
		if err := rows.Scan(&kind, &raw, &at); err != nil {
			return MarketStats{}, translate(err, "stats")
		}
		if at.After(out.ComputedAt) {
			out.ComputedAt = at.UTC()
		}
		switch kind {
		case "verdict":
			var v []stats.VerdictStat
			if err := json.Unmarshal(raw, &v); err != nil {
				return MarketStats{}, fmt.Errorf("store: stats of %s: %w", m, err)
			}
			out.Verdicts = append(out.Verdicts, v...)
		case "factor":
			var f []stats.FactorStat
			if err := json.Unmarshal(raw, &f); err != nil {
				return MarketStats{}, fmt.Errorf("store: stats of %s: %w", m, err)
			}
			out.Factors = append(out.Factors, f...)
		}
	}
	return out, translate(rows.Err(), "stats")
}

// ThinResult counts what one ThinArchive batch did.
type ThinResult struct {
	Deleted, Kept int64
	// More: a table had at least limit rows to decide on; there may be more.
	More bool
}

// ThinArchive decides on at most limit archived reports and statistics
// (each) published before cut (a UTC midnight): the last one of its UTC
// day per asset and style (per market, kind and source for statistics) is
// kept for good (daily), the others are deleted. Only rows not yet decided
// on are read (the partial indexes), oldest first; a row is the last of
// its day when no later one of the same day exists, which the primary key
// answers. With cut at a midnight every row of a day is decided on in the
// same state of that day, so two runs at once, or a run repeated, decide
// the same way.
func (db *DB) ThinArchive(ctx context.Context, cut time.Time, limit int) (ThinResult, error) {
	var r ThinResult
	var dr, kr, ds, ks int64
	err := db.Pool.QueryRow(ctx, `WITH batch AS (
			SELECT a.market, a.style, a.symbol, a.published_at, EXISTS (
				SELECT 1 FROM analytics_report_archive b WHERE b.market = a.market AND b.style = a.style AND b.symbol = a.symbol
					AND b.published_at > a.published_at
					AND b.published_at < date_trunc('day', a.published_at, 'UTC') + interval '1 day') AS superseded
			FROM analytics_report_archive a WHERE NOT a.daily AND a.published_at < $1 ORDER BY a.published_at LIMIT $2
		), del AS (
			DELETE FROM analytics_report_archive a USING batch b WHERE b.superseded AND a.market = b.market
				AND a.style = b.style AND a.symbol = b.symbol AND a.published_at = b.published_at RETURNING 1
		), keep AS (
			UPDATE analytics_report_archive a SET daily = true FROM batch b WHERE NOT b.superseded AND a.market = b.market
				AND a.style = b.style AND a.symbol = b.symbol AND a.published_at = b.published_at RETURNING 1
		), sbatch AS (
			SELECT a.market, a.kind, a.source, a.computed_at, EXISTS (
				SELECT 1 FROM analytics_stats_archive b WHERE b.market = a.market AND b.kind = a.kind AND b.source = a.source
					AND b.computed_at > a.computed_at
					AND b.computed_at < date_trunc('day', a.computed_at, 'UTC') + interval '1 day') AS superseded
			FROM analytics_stats_archive a WHERE NOT a.daily AND a.computed_at < $1 ORDER BY a.computed_at LIMIT $2
		), sdel AS (
			DELETE FROM analytics_stats_archive a USING sbatch b WHERE b.superseded AND a.market = b.market
				AND a.kind = b.kind AND a.source = b.source AND a.computed_at = b.computed_at RETURNING 1
		), skeep AS (
			UPDATE analytics_stats_archive a SET daily = true FROM sbatch b WHERE NOT b.superseded AND a.market = b.market
				AND a.kind = b.kind AND a.source = b.source AND a.computed_at = b.computed_at RETURNING 1
		)
		SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM keep), (SELECT count(*) FROM sdel), (SELECT count(*) FROM skeep)`,
		cut.UTC(), limit).Scan(&dr, &kr, &ds, &ks)
	if err != nil {
		return r, translate(err, "analytics archive")
	}
	return ThinResult{Deleted: dr + ds, Kept: kr + ks, More: dr+kr >= int64(limit) || ds+ks >= int64(limit)}, nil
}
