package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
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
