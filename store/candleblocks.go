package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// CompactableSeries lists at most about n series of a timeframe with a
// hot candle that opened before `before` and is not the series' newest
// (the mover keeps each series' newest candle a row: the rescoring and
// gap-repair reads of "the newest candle" stay one index probe of the
// candles table). It reads the oldest such candles first on the
// (timeframe, open_time) index, so a backlog is worked off oldest first.
func (db *DB) CompactableSeries(ctx context.Context, tf domain.Timeframe, before time.Time, n int) ([]CandleKey, error) {
	rows, err := db.Pool.Query(ctx, `SELECT DISTINCT market, exchange, symbol FROM (
			SELECT market, exchange, symbol FROM candles c
			WHERE timeframe = $1 AND open_time < $2
				AND EXISTS (SELECT 1 FROM candles k WHERE k.market = c.market AND k.exchange = c.exchange
					AND k.symbol = c.symbol AND k.timeframe = c.timeframe AND k.open_time > c.open_time)
			ORDER BY open_time LIMIT $3) s
		ORDER BY 1, 2, 3`, string(tf), before.UTC(), n)
	if err != nil {
		return nil, translate(err, "candle blocks")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (CandleKey, error) {
		var m string
		k := CandleKey{Timeframe: tf}
		err := row.Scan(&m, &k.Exchange, &k.Symbol)
		k.Market = domain.Market(m)
		return k, err
	})
	return out, translate(err, "candle blocks")
}

// CompactSeries moves at most maxRows of a series' hot candles that opened
// before `before`, oldest first and never the series' newest, into its
// candle blocks, in one transaction, and returns how many it moved.
//
// Readers read both tables in one statement, so they see each candle
// once, in its row before the commit and in its block after. The rows
// moved are locked first: a repair writing one of them meanwhile waits and
// then inserts it again as a row (which wins over the block until the
// next move); a repair of a candle already packed writes a row that wins
// the same way, and a move merges it into its block, its value over the
// block's. A move is no change of the series: it leaves the series'
// version (candle_series_versions) as it was, so the scorers' candle
// caches and the statistics keep what they read.
func (db *DB) CompactSeries(ctx context.Context, k CandleKey, before time.Time, maxRows int) (int, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return 0, translate(err, "candle blocks")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	// A move changes no candle a reader sees: it does not move the
	// series' version (migration 00028's trigger condition).
	if _, err := tx.Exec(ctx, `SET LOCAL marketd.moving_candles = 'on'`); err != nil {
		return 0, translate(err, "candle blocks")
	}
	args := []any{string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe)}
	// Two movers of one series take turns (each merges into the blocks
	// as the other left them).
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/candle_blocks/' || $1 || '/' || $2 || '/' || $3 || '/' || $4, 0))`,
		args...); err != nil {
		return 0, translate(err, "candle blocks")
	}
	rows, err := tx.Query(ctx, `SELECT open_time, open, high, low, close, volume FROM candles
		WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND open_time < $5
			AND open_time < (SELECT max(open_time) FROM candles
				WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4)
		ORDER BY open_time LIMIT $6 FOR UPDATE`, append(args, before.UTC(), maxRows)...)
	if err != nil {
		return 0, translate(err, "candle blocks")
	}
	moved, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Candle, error) {
		var c domain.Candle
		err := row.Scan(&c.Time, &c.Open, &c.High, &c.Low, &c.Close, &c.Volume)
		c.Time = c.Time.UTC()
		return c, err
	})
	if err != nil || len(moved) == 0 {
		return 0, translate(err, "candle blocks")
	}
	// The moved candles by block, and the blocks they join as stored.
	byBlock := map[time.Time][]domain.Candle{}
	var starts []time.Time
	times := make([]time.Time, len(moved))
	for i, c := range moved {
		s := CandleBlockStart(k.Timeframe, c.Time)
		if _, ok := byBlock[s]; !ok {
			starts = append(starts, s)
		}
		byBlock[s] = append(byBlock[s], c)
		times[i] = c.Time
	}
	rows, err = tx.Query(ctx, `SELECT block_start, packed FROM candle_blocks
		WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND block_start = ANY($5)
		ORDER BY block_start FOR UPDATE`, append(args, starts)...)
	if err != nil {
		return 0, translate(err, "candle blocks")
	}
	stored := map[time.Time][]byte{}
	for rows.Next() {
		var s time.Time
		var b []byte
		if err := rows.Scan(&s, &b); err != nil {
			rows.Close()
			return 0, translate(err, "candle blocks")
		}
		stored[s.UTC()] = b
	}
	if err := rows.Err(); err != nil {
		return 0, translate(err, "candle blocks")
	}
	var lasts []time.Time
	var ns []int32
	var packed [][]byte
	for _, s := range starts {
		cs := byBlock[s]
		if b, ok := stored[s]; ok {
			old, err := unpackCandles(b)
			if err != nil {
				return 0, fmt.Errorf("store: candle block %s at %s: %w", k, s.Format(time.RFC3339), err)
			}
			cs = mergeCandles(old, cs)
		}
		lasts = append(lasts, cs[len(cs)-1].Time)
		ns = append(ns, int32(len(cs)))
		packed = append(packed, packCandles(cs, k.Timeframe.Duration()))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO candle_blocks (market, exchange, symbol, timeframe, block_start, last_time, n, packed)
		SELECT $1, $2, $3, $4, s, l, n, p FROM unnest($5::timestamptz[], $6::timestamptz[], $7::int[], $8::bytea[]) AS i(s, l, n, p)
		ON CONFLICT (market, exchange, symbol, timeframe, block_start) DO UPDATE
		SET last_time = excluded.last_time, n = excluded.n, packed = excluded.packed`,
		append(args, starts, lasts, ns, packed)...); err != nil {
		return 0, translate(err, "candle blocks")
	}
	if _, err := tx.Exec(ctx, `DELETE FROM candles
		WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4 AND open_time = ANY($5)`,
		append(args, times)...); err != nil {
		return 0, translate(err, "candle blocks")
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, translate(err, "candle blocks")
	}
	return len(moved), nil
}

// DeleteCandleBlocksBefore deletes at most limit candle blocks of a
// timeframe whose newest candle opened before the given time, and returns
// how many candles went: retention's counterpart of DeleteCandlesBefore
// (a block straddling the cut-off is kept whole until its newest candle
// passes it).
func (db *DB) DeleteCandleBlocksBefore(ctx context.Context, tf domain.Timeframe, before time.Time, limit int) (blocks, candles int64, err error) {
	err = db.Pool.QueryRow(ctx, `WITH gone AS (DELETE FROM candle_blocks WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM candle_blocks WHERE timeframe = $1 AND last_time < $2 LIMIT $3))
			RETURNING n)
		SELECT count(*), coalesce(sum(n), 0) FROM gone`,
		string(tf), before.UTC(), limit).Scan(&blocks, &candles)
	return blocks, candles, translate(err, "candle blocks")
}
