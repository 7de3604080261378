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

// MarketStats is the statistics of one market: backtest records first,
// then live ones.
type MarketStats struct {
	Verdicts   []stats.VerdictStat
	Factors    []stats.FactorStat
	ComputedAt time.Time // zero when never computed
}

// SaveStats replaces a market's statistics of one source and archives
// them (analytics_stats_archive, for reports as of an instant).
func (db *DB) SaveStats(ctx context.Context, m domain.Market, source string, verdicts []stats.VerdictStat, factors []stats.FactorStat, assets int, at time.Time) error {
	v, err := json.Marshal(verdicts)
	if err != nil {
		return fmt.Errorf("store: stats: %w", err)
	}
	f, err := json.Marshal(factors)
	if err != nil {
		return fmt.Errorf("store: stats: %w", err)
	}
	b := &pgx.Batch{}
	for kind, raw := range map[string][]byte{"verdict": v, "factor": f} {
		b.Queue(`INSERT INTO analytics_stats (market, kind, source, records, assets, computed_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (market, kind, source) DO UPDATE SET records = excluded.records, assets = excluded.assets,
				computed_at = excluded.computed_at`, string(m), kind, source, raw, assets, at.UTC())
		b.Queue(`INSERT INTO analytics_stats_archive (market, kind, source, records, assets, computed_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`, string(m), kind, source, raw, assets, at.UTC())
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err, "stats")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return translate(err, "stats")
	}
	return translate(tx.Commit(ctx), "stats")
}

// Stats returns a market's statistics, backtest before live.
func (db *DB) Stats(ctx context.Context, m domain.Market) (MarketStats, error) {
	rows, err := db.Pool.Query(ctx, `SELECT kind, records, computed_at FROM analytics_stats WHERE market = $1
		ORDER BY CASE source WHEN 'backtest' THEN 0 ELSE 1 END, kind`, string(m))
	if err != nil {
		return MarketStats{}, translate(err, "stats")
	}
	return scanStats(rows, m)
}

// collectSnapshotVerdicts reads rows of symbol, at and verdict, ordered by
// symbol and time.
func collectSnapshotVerdicts(rows pgx.Rows) (map[string][]AnalyticsSnapshot, error) {
	defer rows.Close()
	out := map[string][]AnalyticsSnapshot{}
	for rows.Next() {
		var sym, verdict string
		var s AnalyticsSnapshot
		if err := rows.Scan(&sym, &s.At, &verdict); err != nil {
			return nil, translate(err, "analytics history")
		}
		s.At, s.Verdict = s.At.UTC(), analytics.Verdict(verdict)
		out[sym] = append(out[sym], s)
	}
	return out, translate(rows.Err(), "analytics history")
}
