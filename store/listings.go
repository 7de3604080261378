package store

import (
	"context"
	"time"

	"github.com/marketscreener/market/domain"
)

// SyncListings records the symbols a combination's feed lists at a time:
// new and relisted ones listed, the combination's listed symbols missing
// from symbols delisted at that time. It returns how many were listed
// (new or again) and delisted. Running it twice with the same list
// changes nothing.
func (db *DB) SyncListings(ctx context.Context, c domain.Combination, symbols []string, at time.Time) (listed, delisted int, err error) {
	err = db.Pool.QueryRow(ctx, `WITH cur AS (
			SELECT DISTINCT unnest($4::text[]) AS symbol
		), listed AS (
			INSERT INTO listings AS l (market, exchange, instrument, symbol, listed_at)
			SELECT $1, $2, $3, symbol, $5 FROM cur
			ON CONFLICT (market, exchange, instrument, symbol)
				DO UPDATE SET listed_at = EXCLUDED.listed_at, delisted_at = NULL WHERE l.delisted_at IS NOT NULL
			RETURNING 1
		), delisted AS (
			UPDATE listings SET delisted_at = $5
			WHERE market = $1 AND exchange = $2 AND instrument = $3 AND delisted_at IS NULL
				AND symbol <> ALL($4::text[])
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM listed), (SELECT count(*) FROM delisted)`,
		string(c.Market), c.Exchange, c.Instrument, symbols, at.UTC()).Scan(&listed, &delisted)
	return listed, delisted, translate(err, "listings")
}

// listedOnly is the condition keeping the rows of listed assets of a
// query over a table with market and symbol columns (alias t): an asset
// is delisted when a combination delisted it and none lists it.
const listedOnly = `NOT EXISTS (SELECT 1 FROM listings d WHERE d.market = t.market AND d.symbol = t.symbol
	AND d.delisted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM listings l
		WHERE l.market = d.market AND l.symbol = d.symbol AND l.delisted_at IS NULL))`
