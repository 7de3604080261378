package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

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

// lockReports locks the reports of the assets in every style (primary key
// order, as every saver) and reads what an alert evaluation needs of them
// (not the screener's fields), without their results, which withResults
// adds where needed.
//
// The order is bytes' (COLLATE "C"), as newSaveColumns sorts a save's
// records in Go, whatever the database's collation: every saver locks
// reports in one order.
//
// The styles are named (analytics.Styles): with a condition on every
// column of the primary key (market, style, symbol) the index finds each
// report; without one on style it read every report of the market (and
// its dead versions), or the planner chose to read the whole table, at
// each of a close's saves.
func lockReports(ctx context.Context, tx pgx.Tx, markets, symbols []string) (map[assetKey]map[analytics.Style]*AnalyticsRecord, map[reportKey]uint32, error) {
	rows, err := tx.Query(ctx, `SELECT market, style, symbol, exchange, instrument, overall_score, verdict, candle_time, updated_at, xmin::text::bigint
		FROM analytics_reports
		WHERE market = ANY ($1) AND style = ANY ($3) AND symbol = ANY ($2)
		ORDER BY market COLLATE "C", style COLLATE "C", symbol COLLATE "C" FOR UPDATE`,
		markets, symbols, styleNames)
	if err != nil {
		return nil, nil, translate(err, "analytics")
	}
	defer rows.Close()
	out := map[assetKey]map[analytics.Style]*AnalyticsRecord{}
	versions := map[reportKey]uint32{}
	for rows.Next() {
		var r AnalyticsRecord
		var market, style, verdict string
		var xmin int64
		if err := rows.Scan(&market, &style, &r.Symbol, &r.Exchange, &r.Instrument, &r.OverallScore, &verdict,
			&r.CandleTime, &r.UpdatedAt, &xmin); err != nil {
			return nil, nil, translate(err, "analytics")
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
	if err := rows.Err(); err != nil {
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
