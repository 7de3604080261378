package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// CandlesByRows is Candles read a row per candle rather than as one row of
// arrays: the baseline of BenchmarkCandles500.
func CandlesByRows(db *DB, ctx context.Context, k CandleKey, limit int) ([]domain.Candle, error) {
	return db.candlesByRows(ctx, k, limit)
}

func (db *DB) candlesByRows(ctx context.Context, k CandleKey, limit int) ([]domain.Candle, error) {
	rows, err := db.Pool.Query(ctx, `SELECT open_time, open, high, low, close, volume FROM (
		SELECT * FROM candles WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4
		ORDER BY open_time DESC LIMIT $5) newest ORDER BY open_time`,
		string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe), limit)
	if err != nil {
		return nil, translate(err, "candles")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Candle, error) {
		var c domain.Candle
		err := row.Scan(&c.Time, &c.Open, &c.High, &c.Low, &c.Close, &c.Volume)
		c.Time = c.Time.UTC()
		return c, err
	})
	return out, translate(err, "candles")
}

// MigrateTo applies the migrations up to and including version.
func MigrateTo(db *DB, ctx context.Context, version int64) error {
	p, err := db.migrator(ctx)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// MigrateDownTo undoes the migrations newer than version, as goose's down
// steps do: a database as an earlier release left it.
func (db *DB) MigrateDownTo(ctx context.Context, version int64) error {
	p, err := db.migrator(ctx)
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, version)
	return err
}

// CandleVersioned reports whether series of tf have versions (CandleCache).
func CandleVersioned(tf domain.Timeframe) bool { return candleVersioned(tf) }

// SaveAnalyticsPerRecord is SaveAnalytics as it was before one statement
// saved a batch: a statement per record, in one transaction. The reference
// of TestSaveAnalyticsSetMatchesPerRecord and the baseline of
// BenchmarkSaveRescoring.
func SaveAnalyticsPerRecord(db *DB, ctx context.Context, recs []AnalyticsRecord, prev map[string]AnalyticsRecord) (int, error) {
	return db.saveAnalyticsPerRecord(ctx, recs, prev)
}

func (db *DB) saveAnalyticsPerRecord(ctx context.Context, recs []AnalyticsRecord, prev map[string]AnalyticsRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	for _, r := range recs {
		raw, err := json.Marshal(r.Result)
		if err != nil {
			return 0, fmt.Errorf("store: analytics %s: %w", r.Symbol, err)
		}
		p, had := prev[r.Symbol]
		var prevUpdated *time.Time
		if had {
			t := p.UpdatedAt.UTC()
			prevUpdated = &t
		}
		snapshot := !had || p.OverallScore != r.OverallScore || p.Verdict != r.Verdict || !sameDay(p.UpdatedAt, r.UpdatedAt)
		event := had && r.Style == analytics.DefaultStyle && p.Verdict != r.Verdict
		b.Queue(`WITH up AS (
				INSERT INTO analytics_reports AS a (`+analyticsColumns+`, result, fundamentals_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $22::int, $23::text, $13, $20::timestamptz)
				ON CONFLICT (market, style, symbol) DO UPDATE SET exchange = excluded.exchange,
					overall_score = excluded.overall_score, verdict = excluded.verdict, price = excluded.price,
					change_pct = excluded.change_pct, sparkline = excluded.sparkline, candle_time = excluded.candle_time,
					candle_close = excluded.candle_close, updated_at = excluded.updated_at, result = excluded.result,
					fundamentals_at = excluded.fundamentals_at, candles_used = excluded.candles_used, instrument = excluded.instrument
				WHERE a.candle_time <= excluded.candle_time AND a.updated_at IS NOT DISTINCT FROM $14::timestamptz
				RETURNING 1
			), snap AS (
				INSERT INTO analytics_snapshots (market, style, symbol, at, overall_score, technical_score, fundamental_score, verdict, price, model_version)
				SELECT $1, $2, $3, $12, $5, $15::int, $16::int, $6, $7, $21::text WHERE $17::bool AND EXISTS (SELECT 1 FROM up)
				ON CONFLICT DO NOTHING
			), arch AS (
				INSERT INTO analytics_report_archive (market, style, symbol, published_at, exchange, instrument, overall_score,
					verdict, price, change_pct, candle_time, candle_close, candles_used, result)
				SELECT $1, $2, $3, $12, $4, $23::text, $5, $6, $7, $8, $10, $11, $22::int, $13 WHERE EXISTS (SELECT 1 FROM up)
				ON CONFLICT DO NOTHING
			)
			INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, model_version)
			SELECT $1, $3, $18::text, $6, $5, $12, $21::text WHERE $19::bool AND EXISTS (SELECT 1 FROM up)
			ON CONFLICT (market, symbol, at) DO NOTHING`,
			string(r.Market), string(r.Style), r.Symbol, r.Exchange, r.OverallScore, string(r.Verdict), r.Price, r.ChangePct,
			r.Sparkline, r.CandleTime.UTC(), r.CandleClose, r.UpdatedAt.UTC(), raw, prevUpdated,
			r.Result.TechnicalScore, r.Result.FundamentalScore, snapshot, string(p.Verdict), event, r.FundamentalsAt,
			modelVersion(r.Result), r.CandlesUsed, r.Instrument)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return 0, translate(err, "analytics")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	br := tx.SendBatch(ctx, b)
	events := 0
	for range recs {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return 0, translate(err, "analytics")
		}
		events += int(tag.RowsAffected())
	}
	if err := br.Close(); err != nil {
		return 0, translate(err, "analytics")
	}
	return events, translate(tx.Commit(ctx), "analytics")
}

// SetListenCheckEvery sets how long db's notification listeners wait
// before they check that their server is still the primary.
func SetListenCheckEvery(db *DB, d time.Duration) { db.listenCheck.Store(int64(d)) }

// AllowAlertReload lets the next save reload the process's copy of the
// alerts at once (it reloads at most once a second).
func AllowAlertReload(db *DB) {
	db.alerts.mu.Lock()
	db.alerts.loadedAt = time.Time{}
	db.alerts.mu.Unlock()
}

// AlertIndexGeneration is the alert_generation the process's copy of the
// alerts was loaded at, false before the first load.
func AlertIndexGeneration(db *DB) (int64, bool) {
	db.alerts.mu.Lock()
	defer db.alerts.mu.Unlock()
	return db.alerts.gen, db.alerts.loaded
}

// AlertStatesKept is how many alert states the process keeps for the
// asset (false: none kept).
func AlertStatesKept(db *DB, m domain.Market, symbol string) (int, bool) {
	db.states.mu.Lock()
	defer db.states.mu.Unlock()
	e := db.states.m[assetKey{m, symbol}]
	if e == nil {
		return 0, false
	}
	return len(e.states), true
}

// ForgetAlertStates empties the process's copy of alert states: its next
// saves read every state.
func ForgetAlertStates(db *DB) {
	db.states.mu.Lock()
	db.states.m = nil
	db.states.mu.Unlock()
}

// ExplainRescore is the plan of RescoreCandidates' statement for q, as
// EXPLAIN (FORMAT JSON) prints it.
func ExplainRescore(db *DB, ctx context.Context, q RescoreQuery) ([]byte, error) {
	var plan []byte
	err := db.Pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+rescoreCandidatesSQL, rescoreArgs(q)...).Scan(&plan)
	return plan, err
}
