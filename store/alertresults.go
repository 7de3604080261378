package store

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// reportResults keeps the decoded results of the reports that alert
// evaluations read, so that the other styles' reports an evaluation needs
// are not read and decoded again at every save. At a close every style of
// an asset is saved in turn, and each save evaluates the asset on all its
// styles: without the cache, each report would be read and decoded by the
// saves of the other styles, a few times a close.
//
// An entry is valid for one version of its row: the row's xmin (the
// transaction that wrote it) and its updated_at. A save puts the records
// it stored under its own transaction id, which is the xmin of the rows
// it wrote; an entry of a save that rolled back matches no row.
type reportResults struct {
	mu sync.Mutex
	m  map[reportKey]cachedResult
}

type reportKey struct {
	market domain.Market
	style  analytics.Style
	symbol string
}

type cachedResult struct {
	xmin      uint32
	updatedAt time.Time
	res       *analytics.Result
}

// maxCachedResults bounds the cache (a result is a few kilobytes); beyond
// it, the cache starts again empty.
const maxCachedResults = 20_000

func (c *reportResults) get(k reportKey, xmin uint32, updatedAt time.Time) *analytics.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || e.xmin != xmin || !e.updatedAt.Equal(updatedAt) {
		return nil
	}
	return e.res
}

func (c *reportResults) put(k reportKey, xmin uint32, updatedAt time.Time, res *analytics.Result) {
	if res == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedResults {
		c.m = make(map[reportKey]cachedResult, 1024)
	}
	c.m[k] = cachedResult{xmin: xmin, updatedAt: updatedAt, res: res}
}

// assetLockClass is the first key of the assets' advisory locks
// (lockReports): "ASST". The stream's lock is "STRE" (1398035013).
const assetLockClass = 1095979860

// lockReports locks the assets against the other alert-evaluating saves
// and reads what an alert evaluation needs of their reports in every
// style (not the screener's fields), without their results, which
// withResults adds where needed.
//
// Two locks: an advisory lock per asset (its schema, market and symbol
// hashed; taken in the hashes' order, so two saves never wait for each
// other's), which every save that evaluates alerts takes, so two runs of
// different styles on one asset evaluate one after the other, each on
// the other's committed report; and the saved styles' report rows, FOR
// UPDATE, so the rows the save replaces are the ones read (a save without
// alerts writes them without the advisory lock). The reports of the other
// styles are read without a row lock: a row lock writes the row's header
// and a WAL record, three of every four reports a save read at a close's
// runs (≈ 30 kB of WAL a save of 128 assets), for an exclusion the
// advisory lock gives. The locks and the reads go in one round trip; each
// read is a statement of its own, so its snapshot is taken once the
// advisory locks are held and holds every save that released them.
//
// A save takes one advisory lock an asset from the shared lock table
// (max_locks_per_transaction × max_connections slots, 6,400 by default):
// the worker saves 128 assets at a time, at most four saves at once.
// A hash shared by two assets only makes their saves wait for each other.
//
// The rows are locked in primary key order (bytes', COLLATE "C", as
// newSaveColumns sorts a save's records in Go, whatever the database's
// collation), as every saver locks them.
//
// The styles are named (analytics.Styles): with a condition on every
// column of the primary key (market, style, symbol) the index finds each
// report; without one on style it read every report of the market (and
// its dead versions), or the planner chose to read the whole table, at
// each of a close's saves.
func lockReports(ctx context.Context, tx pgx.Tx, markets, symbols, styles []string) (map[assetKey]map[analytics.Style]*AnalyticsRecord, map[reportKey]uint32, error) {
	var others []string
	for _, st := range styleNames {
		if !slices.Contains(styles, st) {
			others = append(others, st)
		}
	}
	out := map[assetKey]map[analytics.Style]*AnalyticsRecord{}
	versions := map[reportKey]uint32{}
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			var r AnalyticsRecord
			var market, style, verdict string
			var xmin int64
			if err := rows.Scan(&market, &style, &r.Symbol, &r.Exchange, &r.Instrument, &r.OverallScore, &verdict,
				&r.CandleTime, &r.UpdatedAt, &xmin); err != nil {
				return err
			}
			r.Market, r.Style, r.Verdict = domain.Market(market), analytics.Style(style), analytics.Verdict(verdict)
			r.CandleTime, r.UpdatedAt = r.CandleTime.UTC(), r.UpdatedAt.UTC()
			k := assetKey{r.Market, r.Symbol}
			if out[k] == nil {
				out[k] = map[analytics.Style]*AnalyticsRecord{}
			}
			out[k][r.Style] = &r
			versions[reportKey{r.Market, r.Style, r.Symbol}] = uint32(xmin)
		}
		return rows.Err()
	}
	const read = `SELECT market, style, symbol, exchange, instrument, overall_score, verdict, candle_time, updated_at, xmin::text::bigint
		FROM analytics_reports
		WHERE market = ANY ($1) AND style = ANY ($3) AND symbol = ANY ($2)`
	b := &pgx.Batch{}
	b.Queue(`SELECT count(pg_advisory_xact_lock(`+strconv.Itoa(assetLockClass)+`, h)) FROM (
			SELECT DISTINCT hashtext(current_schema() || E'\x1f' || m || E'\x1f' || s) AS h
			FROM unnest($1::text[]) m CROSS JOIN unnest($2::text[]) s ORDER BY h OFFSET 0) k`,
		markets, symbols).Exec(func(pgconn.CommandTag) error { return nil })
	b.Queue(read+` ORDER BY market COLLATE "C", style COLLATE "C", symbol COLLATE "C" FOR UPDATE`, markets, symbols, styles).Query(scan)
	if len(others) > 0 {
		b.Queue(read, markets, symbols, others).Query(scan)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, translate(err, "analytics")
	}
	return out, versions, nil
}

// withResults sets the results of the locked reports of assets, from the
// cache where it holds their row's version, else from the table (and
// keeps them in the cache).
func (db *DB) withResults(ctx context.Context, tx pgx.Tx, reports map[assetKey]map[analytics.Style]*AnalyticsRecord,
	versions map[reportKey]uint32, assets []assetKey) error {
	var mk, st, sy []string
	missing := map[reportKey]*AnalyticsRecord{}
	for _, a := range assets {
		for style, r := range reports[a] {
			k := reportKey{r.Market, style, r.Symbol}
			if res := db.results.get(k, versions[k], r.UpdatedAt); res != nil {
				r.Result = res
				continue
			}
			missing[k] = r
			mk, st, sy = append(mk, string(r.Market)), append(st, string(style)), append(sy, r.Symbol)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT a.market, a.style, a.symbol, a.result
		FROM unnest($1::text[], $2::text[], $3::text[]) AS k(market, style, symbol)
		JOIN analytics_reports a ON a.market = k.market AND a.style = k.style AND a.symbol = k.symbol`, mk, st, sy)
	if err != nil {
		return translate(err, "analytics")
	}
	defer rows.Close()
	for rows.Next() {
		var market, style, symbol string
		var raw []byte
		if err := rows.Scan(&market, &style, &symbol, &raw); err != nil {
			return translate(err, "analytics")
		}
		k := reportKey{domain.Market(market), analytics.Style(style), symbol}
		r := missing[k]
		if r == nil {
			continue
		}
		res, err := decodeResult(raw, market, symbol)
		if err != nil {
			return err
		}
		r.Result = res
		db.results.put(k, versions[k], r.UpdatedAt, res)
	}
	return translate(rows.Err(), "analytics")
}
