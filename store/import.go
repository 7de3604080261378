package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// ImportedFile is one archive file of a candle series loaded by an
// import: its period (2021-01, 2025-02-03), SHA-256, candle count and
// first and last open time (zero when it held none).
type ImportedFile struct {
	Period              string
	SHA256              string
	Candles             int
	FirstOpen, LastOpen time.Time
}

// ImportedFiles returns the files of a series an import from source has
// loaded, by period.
func (db *DB) ImportedFiles(ctx context.Context, source string, k CandleKey) (map[string]ImportedFile, error) {
	rows, err := db.Pool.Query(ctx, `SELECT period, sha256, candles, first_open, last_open FROM candle_import_files
		WHERE source = $1 AND market = $2 AND exchange = $3 AND symbol = $4 AND timeframe = $5`,
		source, string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe))
	if err != nil {
		return nil, translate(err, "imported files")
	}
	out := map[string]ImportedFile{}
	for rows.Next() {
		var f ImportedFile
		var first, last *time.Time
		if err := rows.Scan(&f.Period, &f.SHA256, &f.Candles, &first, &last); err != nil {
			return nil, translate(err, "imported files")
		}
		if first != nil && last != nil {
			f.FirstOpen, f.LastOpen = first.UTC(), last.UTC()
		}
		out[f.Period] = f
	}
	return out, translate(rows.Err(), "imported files")
}

// importUpsertSQL moves the staged candles of one series into candles:
// the same upsert as UpsertCandleSeries (one row per key, keys in order,
// identical rows not rewritten).
const importUpsertSQL = `INSERT INTO candles AS c (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
	SELECT DISTINCT ON (open_time) $1, $2, $3, $4, open_time, open, high, low, close, volume
	FROM pg_temp.candle_import_staging ORDER BY open_time
	ON CONFLICT (market, exchange, symbol, timeframe, open_time) DO UPDATE
	SET open = excluded.open, high = excluded.high, low = excluded.low, close = excluded.close,
		volume = excluded.volume, updated_at = now()
	WHERE (c.open, c.high, c.low, c.close, c.volume) IS DISTINCT FROM
		(excluded.open, excluded.high, excluded.low, excluded.close, excluded.volume)`

// ImportCandles stores a batch of one series' candles read from archive
// files, and records the files, in one transaction: the candles are
// COPied into a temporary staging table of the session (emptied at
// commit), then moved by one INSERT ... ON CONFLICT. A batch stored twice
// changes nothing. The transaction does not wait for its WAL flush
// (synchronous_commit off): a crash loses the candles and the file rows
// together, and the next run loads them again. It returns the rows
// inserted or changed.
func (db *DB) ImportCandles(ctx context.Context, source string, k CandleKey, candles []domain.Candle, files []ImportedFile) (int64, error) {
	if err := domain.ValidateCandles(candles); err != nil {
		return 0, fmt.Errorf("store: import %s: %w", k, err)
	}
	var written int64
	err := retryDeadlock(func() error {
		return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS candle_import_staging (
					open_time timestamptz NOT NULL, open float8 NOT NULL, high float8 NOT NULL,
					low float8 NOT NULL, close float8 NOT NULL, volume float8 NOT NULL) ON COMMIT DELETE ROWS`); err != nil {
				return err
			}
			if len(candles) > 0 {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", "candle_import_staging"},
					[]string{"open_time", "open", "high", "low", "close", "volume"},
					pgx.CopyFromSlice(len(candles), func(i int) ([]any, error) {
						c := candles[i]
						return []any{c.Time.UTC(), c.Open, c.High, c.Low, c.Close, c.Volume}, nil
					}))
				if err != nil {
					return err
				}
				tag, err := tx.Exec(ctx, importUpsertSQL, string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe))
				if err != nil {
					return err
				}
				written = tag.RowsAffected()
			}
			return recordImportedFiles(ctx, tx, source, k, files)
		})
	})
	return written, translate(err, "candle import")
}

func recordImportedFiles(ctx context.Context, tx pgx.Tx, source string, k CandleKey, files []ImportedFile) error {
	if len(files) == 0 {
		return nil
	}
	periods, sums, counts := make([]string, len(files)), make([]string, len(files)), make([]int32, len(files))
	firsts, lasts := make([]*time.Time, len(files)), make([]*time.Time, len(files))
	for i, f := range files {
		periods[i], sums[i], counts[i] = f.Period, f.SHA256, int32(f.Candles)
		if f.Candles > 0 {
			first, last := f.FirstOpen.UTC(), f.LastOpen.UTC()
			firsts[i], lasts[i] = &first, &last
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO candle_import_files AS f
			(source, market, exchange, symbol, timeframe, period, sha256, candles, first_open, last_open)
		SELECT $1, $2, $3, $4, $5, p, s, n, a, b
		FROM unnest($6::text[], $7::text[], $8::int[], $9::timestamptz[], $10::timestamptz[]) AS i(p, s, n, a, b)
		ON CONFLICT (source, market, exchange, symbol, timeframe, period) DO UPDATE
		SET sha256 = excluded.sha256, candles = excluded.candles, first_open = excluded.first_open,
			last_open = excluded.last_open, imported_at = now()`,
		source, string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe), periods, sums, counts, firsts, lasts)
	return err
}

// RecordDelisted records an asset of a combination that stopped trading
// at delistedAt (an archive's symbol whose files end before today), when
// no listing of it exists: the combination's feed owns the rows it lists,
// and a symbol it lists again is relisted by SyncListings. The asset
// leaves the screener and analytics list and keeps its candles. It
// reports whether a row was added.
func (db *DB) RecordDelisted(ctx context.Context, c domain.Combination, symbol string, listedAt, delistedAt time.Time) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `INSERT INTO listings (market, exchange, instrument, symbol, listed_at, delisted_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (market, exchange, instrument, symbol) DO NOTHING`,
		string(c.Market), c.Exchange, c.Instrument, symbol, listedAt.UTC(), delistedAt.UTC())
	return tag.RowsAffected() == 1, translate(err, "listings")
}
