package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// fundamentalsMaxAge: older inputs are not used (a feed that stopped must
// not keep scoring an asset on last month's numbers).
const fundamentalsMaxAge = 7 * 24 * time.Hour

// UpsertFundamentals stores the fundamental inputs of a market's assets
// (symbol → input name → value) in one transaction. Non-finite values are
// refused: they are never stored.
func (db *DB) UpsertFundamentals(ctx context.Context, m domain.Market, rows map[string]map[string]float64, at time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	// One order for every writer (the primary key's), so two writers of
	// the same rows wait for each other instead of deadlocking.
	b := &pgx.Batch{}
	for _, sym := range slices.Sorted(maps.Keys(rows)) {
		inputs := rows[sym]
		for k, v := range inputs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("store: fundamentals %s %s: %s is not a finite number", m, sym, k)
			}
		}
		raw, err := json.Marshal(inputs)
		if err != nil {
			return fmt.Errorf("store: fundamentals %s: %w", sym, err)
		}
		b.Queue(`INSERT INTO fundamentals (market, symbol, inputs, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (market, symbol) DO UPDATE SET inputs = excluded.inputs, updated_at = excluded.updated_at`,
			string(m), sym, raw, at.UTC())
	}
	return translate(retryDeadlock(func() error {
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}), "fundamentals")
}

// FundamentalRow is an asset's fundamental inputs and when they were stored.
type FundamentalRow struct {
	Inputs    map[string]float64
	UpdatedAt time.Time
	// raw is the stored inputs (JSON) of a row read by RescoreCandidates,
	// whose Inputs are nil until Decoded.
	raw []byte
}

// Decoded returns the row's inputs, decoding them if the read left them
// raw (RescoreCandidates).
func (r FundamentalRow) Decoded() (map[string]float64, error) {
	if r.Inputs != nil || r.raw == nil {
		return r.Inputs, nil
	}
	var in map[string]float64
	if err := json.Unmarshal(r.raw, &in); err != nil {
		return nil, fmt.Errorf("store: fundamentals: %w", err)
	}
	return in, nil
}

// Fundamentals returns the fundamental inputs of a market's assets that are
// at most a week old, by symbol.
func (db *DB) Fundamentals(ctx context.Context, m domain.Market, now time.Time) (map[string]FundamentalRow, error) {
	rows, err := db.Pool.Query(ctx, `SELECT symbol, inputs, updated_at FROM fundamentals WHERE market = $1 AND updated_at > $2`,
		string(m), now.Add(-fundamentalsMaxAge).UTC())
	if err != nil {
		return nil, translate(err, "fundamentals")
	}
	defer rows.Close()
	out := map[string]FundamentalRow{}
	for rows.Next() {
		var sym string
		var b []byte
		var r FundamentalRow
		if err := rows.Scan(&sym, &b, &r.UpdatedAt); err != nil {
			return nil, translate(err, "fundamentals")
		}
		if err := json.Unmarshal(b, &r.Inputs); err != nil {
			return nil, fmt.Errorf("store: fundamentals of %s: %w", sym, err)
		}
		r.UpdatedAt = r.UpdatedAt.UTC()
		out[sym] = r
	}
	return out, translate(rows.Err(), "fundamentals")
}
