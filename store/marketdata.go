package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// ReplaceTickers swaps the screener rows of a combination for a new
// snapshot in one transaction: readers see the old or the new snapshot,
// never a mix. Rows are validated first; a bad row fails the whole call.
func (db *DB) ReplaceTickers(ctx context.Context, c domain.Combination, tickers []domain.Ticker) error {
	for _, t := range tickers {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err, "tickers")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	// Writers of one combination (the REST refresh, the stream's ticker
	// sink) take turns: two delete-then-copy transactions at once would
	// each delete only the rows they saw, and the second copy would then
	// collide with the first's rows.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/tickers/' || $1 || '/' || $2 || '/' || $3, 0))`,
		string(c.Market), c.Exchange, c.Instrument); err != nil {
		return translate(err, "tickers")
	}
	if _, err := tx.Exec(ctx, `DELETE FROM tickers WHERE market = $1 AND exchange = $2 AND instrument = $3`,
		string(c.Market), c.Exchange, c.Instrument); err != nil {
		return translate(err, "tickers")
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"tickers"},
		[]string{"market", "exchange", "instrument", "symbol", "price", "change_pct", "volume", "updated_at"},
		pgx.CopyFromSlice(len(tickers), func(i int) ([]any, error) {
			t := tickers[i]
			return []any{string(c.Market), c.Exchange, c.Instrument, t.Symbol, t.Price, t.ChangePct, t.Volume, t.UpdatedAt.UTC()}, nil
		}))
	if err != nil {
		return translate(err, "tickers")
	}
	return translate(tx.Commit(ctx), "tickers")
}

// TickerFilter bounds the screener rows; nil bounds are open. Bounds are inclusive.
type TickerFilter struct {
	VolumeMin, VolumeMax, ChangeMin, ChangeMax *float64
}

// Match reports whether t passes the filter.
func (f TickerFilter) Match(t domain.Ticker) bool {
	return (f.VolumeMin == nil || t.Volume >= *f.VolumeMin) && (f.VolumeMax == nil || t.Volume <= *f.VolumeMax) &&
		(f.ChangeMin == nil || t.ChangePct >= *f.ChangeMin) && (f.ChangeMax == nil || t.ChangePct <= *f.ChangeMax)
}

// Tickers returns the screener rows of a combination ordered by symbol.
func (db *DB) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	rows, err := db.Pool.Query(ctx, `SELECT symbol, price, change_pct, volume, updated_at FROM tickers
		WHERE market = $1 AND exchange = $2 AND instrument = $3 ORDER BY symbol`, string(c.Market), c.Exchange, c.Instrument)
	if err != nil {
		return nil, translate(err, "tickers")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Ticker, error) {
		var t domain.Ticker
		err := row.Scan(&t.Symbol, &t.Price, &t.ChangePct, &t.Volume, &t.UpdatedAt)
		t.UpdatedAt = t.UpdatedAt.UTC()
		return t, err
	})
	return out, translate(err, "tickers")
}

// CandleKey names one candle series.
type CandleKey struct {
	Market    domain.Market
	Exchange  string
	Symbol    string
	Timeframe domain.Timeframe
}

func (k CandleKey) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", k.Market, k.Exchange, k.Symbol, k.Timeframe)
}

// UpsertCandles stores candles of one series: new open times are inserted,
// existing ones updated (the still-open candle changes until it closes), so
// storing the same candles twice changes nothing. Candles are validated
// first; bad data is never stored.
func (db *DB) UpsertCandles(ctx context.Context, k CandleKey, candles []domain.Candle) error {
	return db.UpsertCandleSeries(ctx, map[CandleKey][]domain.Candle{k: candles})
}

// UpsertCandleSeries stores several series in one statement: the rows go
// as one array per column, unnested into one INSERT ... ON CONFLICT, a
// single round trip. The push ingest writes the minute's closed candles
// of every series this way right at the close, and readers wait for that
// commit: a transaction of a temporary table, a COPY and the insert cost
// five round trips more, each of them a wait on a loaded server.
func (db *DB) UpsertCandleSeries(ctx context.Context, series map[CandleKey][]domain.Candle) error {
	_, err := db.upsertCandles(ctx, series, nil, false)
	return err
}

// UpsertChangedCandles is UpsertCandleSeries returning the series that changed: a
// candle was added, one of its values differs from the stored one, or it
// is now known final (what makes scoring worth running again), each key
// once, in no order.
//
// final holds, by series, the open time of its newest candle in the write
// that is final: its feed had closed it (a stream's closing push, a read
// after its end). Those candles and the series' older ones in the write
// are stored closed (candles.closed; once closed, a row stays closed): the
// rescoring rule rescores a candle that has ended at once only when its
// final state is stored, and a series absent from final has none.
func (db *DB) UpsertChangedCandles(ctx context.Context, series map[CandleKey][]domain.Candle, final map[CandleKey]time.Time) ([]CandleKey, error) {
	return db.upsertCandles(ctx, series, final, true)
}

// candleColumns are the columns of a batch of candles, one array each.
type candleColumns struct {
	market, exchange, symbol, timeframe []string
	openTime                            []time.Time
	open, high, low, close, volume      []float64
	closed                              []bool
}

func (cc *candleColumns) add(k CandleKey, c domain.Candle, closed bool) {
	cc.market = append(cc.market, string(k.Market))
	cc.exchange = append(cc.exchange, k.Exchange)
	cc.symbol = append(cc.symbol, k.Symbol)
	cc.timeframe = append(cc.timeframe, string(k.Timeframe))
	cc.openTime = append(cc.openTime, c.Time.UTC())
	cc.open = append(cc.open, c.Open)
	cc.high = append(cc.high, c.High)
	cc.low = append(cc.low, c.Low)
	cc.close = append(cc.close, c.Close)
	cc.volume = append(cc.volume, c.Volume)
	cc.closed = append(cc.closed, closed)
}

func (cc *candleColumns) args() []any {
	return []any{cc.market, cc.exchange, cc.symbol, cc.timeframe, cc.openTime, cc.open, cc.high, cc.low, cc.close, cc.volume, cc.closed}
}

// upsertCandlesSQL inserts the unnested columns. DISTINCT ON keeps one row
// per key (ON CONFLICT cannot update a row twice) and sorts the rows by
// key, so concurrent writers lock rows in one order. IS DISTINCT FROM
// keeps re-ingesting identical candles from writing (no dead tuples,
// updated_at unchanged), unless the write is the first to know the candle
// final (closed, UpsertChangedCandles).
const upsertCandlesSQL = `INSERT INTO candles AS c (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume, closed)
	SELECT DISTINCT ON (market, exchange, symbol, timeframe, open_time)
		market, exchange, symbol, timeframe, open_time, open, high, low, close, volume, closed
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[],
		$6::float8[], $7::float8[], $8::float8[], $9::float8[], $10::float8[], $11::bool[])
		AS i(market, exchange, symbol, timeframe, open_time, open, high, low, close, volume, closed)
	ON CONFLICT (market, exchange, symbol, timeframe, open_time) DO UPDATE
	SET open = excluded.open, high = excluded.high, low = excluded.low, close = excluded.close,
		volume = excluded.volume, closed = c.closed OR excluded.closed, updated_at = now()
	WHERE (c.open, c.high, c.low, c.close, c.volume) IS DISTINCT FROM
		(excluded.open, excluded.high, excluded.low, excluded.close, excluded.volume)
		OR excluded.closed AND NOT c.closed`

// upsertCandles is UpsertChangedCandles, or UpsertCandleSeries (nothing
// returned, nothing to read back) when returning is false.
func (db *DB) upsertCandles(ctx context.Context, series map[CandleKey][]domain.Candle, final map[CandleKey]time.Time, returning bool) ([]CandleKey, error) {
	var cols candleColumns
	for k, cs := range series {
		if err := domain.ValidateCandles(cs); err != nil {
			return nil, fmt.Errorf("store: candles %s: %w", k, err)
		}
		through, hasFinal := final[k]
		for _, c := range cs {
			cols.add(k, c, hasFinal && !c.Time.After(through))
		}
	}
	if len(cols.market) == 0 {
		return nil, nil
	}
	if !returning {
		_, err := db.Pool.Exec(ctx, upsertCandlesSQL, cols.args()...)
		return nil, translate(err, "candles")
	}
	rows, err := db.Pool.Query(ctx, upsertCandlesSQL+`
	RETURNING market, exchange, symbol, timeframe`, cols.args()...)
	if err != nil {
		return nil, translate(err, "candles")
	}
	defer rows.Close()
	seen := map[CandleKey]bool{}
	var changed []CandleKey
	for rows.Next() {
		var k CandleKey
		var market, tf string
		if err := rows.Scan(&market, &k.Exchange, &k.Symbol, &tf); err != nil {
			return nil, translate(err, "candles")
		}
		k.Market, k.Timeframe = domain.Market(market), domain.Timeframe(tf)
		if !seen[k] {
			seen[k] = true
			changed = append(changed, k)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "candles")
	}
	return changed, nil
}

// Candles returns the newest limit candles of a series, oldest first, of
// the hot rows and the packed blocks together (candleBlocksLateral).
func (db *DB) Candles(ctx context.Context, k CandleKey, limit int) ([]domain.Candle, error) {
	// One row of six arrays, not a row per candle: scoring reads 500
	// candles per asset it scores, and pgx decodes a binary array in one
	// pass where each row costs a message and a scan of six values
	// (BenchmarkCandles500: a twentieth of the allocations). The arrays
	// are aggregated in the subquery's order, newest first (an ORDER BY
	// per aggregate would sort six times: +1 ms in Postgres); Postgres
	// feeds a plain aggregate in its input's order, and the order is
	// checked here anyway (sorted if it ever were not).
	var a candleArrays
	err := db.Pool.QueryRow(ctx, `SELECT c.*, blk.packed
		FROM (SELECT `+candleArraysSelect+`
			FROM (SELECT open_time, open, high, low, close, volume FROM candles
				WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4
				ORDER BY open_time DESC LIMIT $5) newest) c
		CROSS JOIN LATERAL `+candleBlocksLateral("$3", "NULL::timestamptz"),
		string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe), limit).Scan(a.dest()...)
	if err != nil {
		return nil, translate(err, "candles")
	}
	return a.candles(k.Symbol, limit)
}

// CandlesOf returns the newest limit candles of each of the symbols'
// series of a market, exchange and timeframe, oldest first, in one
// statement: a scoring run reads its assets a batch at a time, one round
// trip per batch instead of one per asset. A symbol without candles is
// absent from the map.
func (db *DB) CandlesOf(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string, limit int) (map[string][]domain.Candle, error) {
	out := make(map[string][]domain.Candle, len(symbols))
	if len(symbols) == 0 {
		return out, nil
	}
	rows, err := db.Pool.Query(ctx, `SELECT s.symbol, c.*, blk.packed
		FROM unnest($3::text[]) s(symbol)
		CROSS JOIN LATERAL (SELECT `+candleArraysSelect+`
			FROM (SELECT open_time, open, high, low, close, volume FROM candles
				WHERE market = $1 AND exchange = $2 AND symbol = s.symbol AND timeframe = $4
				ORDER BY open_time DESC LIMIT $5) newest) c
		CROSS JOIN LATERAL `+candleBlocksLateral("s.symbol", "NULL::timestamptz"),
		string(m), exchange, symbols, string(tf), limit)
	if err != nil {
		return nil, translate(err, "candles")
	}
	defer rows.Close()
	for rows.Next() {
		var sym string
		var a candleArrays
		if err := rows.Scan(append([]any{&sym}, a.dest()...)...); err != nil {
			return nil, translate(err, "candles")
		}
		cs, err := a.candles(sym, limit)
		if err != nil {
			return nil, err
		}
		if len(cs) > 0 {
			out[sym] = cs
		}
	}
	return out, translate(rows.Err(), "candles")
}

// candleArraysSelect aggregates a subquery "newest" of candles, newest
// first, into six arrays (candleArrays).
const candleArraysSelect = `coalesce(array_agg(open_time), '{}') AS times, coalesce(array_agg(open), '{}') AS opens,
			coalesce(array_agg(high), '{}') AS highs, coalesce(array_agg(low), '{}') AS lows,
			coalesce(array_agg(close), '{}') AS closes, coalesce(array_agg(volume), '{}') AS volumes`

// candleBlocksLateral is the lateral subquery "blk" of the packed blocks
// (candle_blocks) a read of the newest $5 candles of a series (market $1,
// exchange $2, timeframe $4, the symbol expression sym) needs beside its
// newest $5 hot rows "c" (candleArraysSelect's arrays), from since on (a
// timestamptz expression; NULL: all). The newest $5 candles of both
// together are among the newest $5 of each, so it takes the blocks, newest
// first, until they hold $5 candles; and none at all when the hot rows are
// $5 already and the blocks all older than the oldest of them (a read
// within the hot window: one index probe). Blocks cover disjoint periods,
// so their counts add up.
func candleBlocksLateral(sym, since string) string {
	return `(SELECT coalesce(array_agg(packed), '{}') AS packed FROM (
			SELECT packed, sum(n) OVER (ORDER BY block_start DESC) - n AS newer
			FROM candle_blocks b
			WHERE b.market = $1 AND b.exchange = $2 AND b.symbol = ` + sym + ` AND b.timeframe = $4
				AND b.last_time >= coalesce(` + since + `, '-infinity')
				AND (cardinality(c.times) < $5 OR b.last_time >= c.times[cardinality(c.times)])
			ORDER BY block_start DESC) nb WHERE newer < $5) blk`
}

// candleArrays is a series read as candleArraysSelect's six arrays, and
// the packed blocks candleBlocksLateral read beside them.
type candleArrays struct {
	times                          []time.Time
	opens, highs, lows, closes, vs []float64
	blocks                         [][]byte
}

func (a *candleArrays) dest() []any {
	return []any{&a.times, &a.opens, &a.highs, &a.lows, &a.closes, &a.vs, &a.blocks}
}

// candles turns the arrays (newest first) and the blocks into the newest
// limit candles, oldest first; a hot row wins over a block's candle of
// the same open time (a repair not yet packed in).
func (a *candleArrays) candles(symbol string, limit int) ([]domain.Candle, error) {
	n := len(a.times)
	if len(a.opens) != n || len(a.highs) != n || len(a.lows) != n || len(a.closes) != n || len(a.vs) != n {
		return nil, fmt.Errorf("store: candles of %s: arrays of different lengths", symbol)
	}
	out := make([]domain.Candle, n)
	for i, t := range a.times {
		out[n-1-i] = domain.Candle{Time: t.UTC(), Open: a.opens[i], High: a.highs[i], Low: a.lows[i], Close: a.closes[i], Volume: a.vs[i]}
	}
	if !slices.IsSortedFunc(out, func(a, b domain.Candle) int { return a.Time.Compare(b.Time) }) {
		slices.SortFunc(out, func(a, b domain.Candle) int { return a.Time.Compare(b.Time) })
	}
	if len(a.blocks) > 0 {
		packed, err := unpackBlocks(a.blocks)
		if err != nil {
			return nil, fmt.Errorf("store: candles of %s: %w", symbol, err)
		}
		out = mergeCandles(packed, out)
		out = out[max(len(out)-limit, 0):]
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// unpackBlocks decodes blocks of one series, given newest first (as
// candleBlocksLateral aggregates them), into one series, oldest first.
func unpackBlocks(blocks [][]byte) ([]domain.Candle, error) {
	var out []domain.Candle
	for i := len(blocks) - 1; i >= 0; i-- {
		cs, err := unpackCandles(blocks[i])
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && len(cs) > 0 && !cs[0].Time.After(out[len(out)-1].Time) {
			return nil, fmt.Errorf("store: candle blocks overlap at %s", cs[0].Time.Format(time.RFC3339))
		}
		out = append(out, cs...)
	}
	return out, nil
}

// LatestCandleTimes returns the newest stored open time of each of the
// given symbols of an exchange and timeframe (ingest resumes from there),
// hot or packed; symbols without candles are absent. Two index lookups
// per symbol, so the cost does not grow with the stored history.
func (db *DB) LatestCandleTimes(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string) (map[string]time.Time, error) {
	rows, err := db.Pool.Query(ctx, `SELECT sym, greatest((SELECT max(open_time) FROM candles c
			WHERE c.market = $1 AND c.exchange = $2 AND c.symbol = sym AND c.timeframe = $3),
			(SELECT last_time FROM candle_blocks b
			WHERE b.market = $1 AND b.exchange = $2 AND b.symbol = sym AND b.timeframe = $3
			ORDER BY block_start DESC LIMIT 1))
		FROM unnest($4::text[]) AS sym`, string(m), exchange, string(tf), symbols)
	if err != nil {
		return nil, translate(err, "candles")
	}
	defer rows.Close()
	out := make(map[string]time.Time, len(symbols))
	for rows.Next() {
		var (
			s string
			t *time.Time
		)
		if err := rows.Scan(&s, &t); err != nil {
			return nil, translate(err, "candles")
		}
		if t != nil {
			out[s] = t.UTC()
		}
	}
	return out, translate(rows.Err(), "candles")
}

// CandleCounts returns how many candles of a timeframe each of symbols has
// stored, hot or packed, counting up to atMost (the push feeds' catch-up
// looks for series whose history never finished loading); symbols with
// none are absent.
func (db *DB) CandleCounts(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string, atMost int) (map[string]int, error) {
	rows, err := db.Pool.Query(ctx, `SELECT sym, least($5, (SELECT count(*) FROM (SELECT FROM candles c
			WHERE c.market = $1 AND c.exchange = $2 AND c.symbol = sym AND c.timeframe = $3 LIMIT $5) n)
			+ coalesce((SELECT sum(n) FROM candle_blocks b
			WHERE b.market = $1 AND b.exchange = $2 AND b.symbol = sym AND b.timeframe = $3), 0))
		FROM unnest($4::text[]) AS sym`, string(m), exchange, string(tf), symbols, atMost)
	if err != nil {
		return nil, translate(err, "candles")
	}
	defer rows.Close()
	out := make(map[string]int, len(symbols))
	for rows.Next() {
		var (
			s string
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			return nil, translate(err, "candles")
		}
		if n > 0 {
			out[s] = n
		}
	}
	return out, translate(rows.Err(), "candles")
}

// CandleSymbols lists the symbols with stored candles of a timeframe, hot
// or packed, of an exchange (the statistics' assets, 404 details).
func (db *DB) CandleSymbols(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe) ([]string, error) {
	// The keys lead with (market, exchange, symbol, timeframe): a plain
	// scan for one timeframe reads every candle of the exchange (years of
	// 1h and a week of 1m: tens of millions of index entries). Each table
	// is walked from one symbol to the next instead (a few index probes a
	// symbol), keeping those with a row of the timeframe.
	rows, err := db.Pool.Query(ctx, symbolsWalk("candles")+` UNION `+symbolsWalk("candle_blocks")+` ORDER BY 1`,
		string(m), exchange, string(tf))
	if err != nil {
		return nil, translate(err, "candles")
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, translate(err, "candles")
}

// symbolsWalk is a statement listing the symbols of table (keyed by
// market, exchange, symbol, timeframe, ...) of $1, $2 with rows of
// timeframe $3, one index probe from each symbol to the next and one for
// the timeframe. The timeframe's check is a scalar subquery: as EXISTS,
// the planner may make it a hash semi-join over every candle of the
// exchange (it did on a freshly filled table without statistics).
func symbolsWalk(table string) string {
	return `(WITH RECURSIVE walk(symbol) AS (
			(SELECT symbol FROM ` + table + ` WHERE market = $1 AND exchange = $2 ORDER BY symbol LIMIT 1)
			UNION ALL
			SELECT (SELECT t.symbol FROM ` + table + ` t WHERE t.market = $1 AND t.exchange = $2 AND t.symbol > w.symbol
				ORDER BY t.symbol LIMIT 1) FROM walk w WHERE w.symbol IS NOT NULL)
		SELECT w.symbol FROM walk w WHERE w.symbol IS NOT NULL AND (
			SELECT true FROM ` + table + ` t WHERE t.market = $1 AND t.exchange = $2 AND t.symbol = w.symbol AND t.timeframe = $3 LIMIT 1))`
}

// Feed-health kinds (FeedHealth.Kind) of a combination's own data; a
// timeframe's candles have CandleFeed's. A calendar refresh is not a
// market-data series: no stale-feed alert or 502 reads FeedKindCalendar.
const (
	FeedKindTickers      = "tickers"
	FeedKindFundamentals = "fundamentals"
	FeedKindCalendar     = "calendar"
)

// candleKindHead starts the feed-health kind of a timeframe's candles.
const candleKindHead = "candles:"

// FeedKey names one feed-health row: a combination and a kind.
type FeedKey struct {
	Combination domain.Combination
	Kind        string
}

// CandleFeed is the feed-health key of the candles of a market's exchange
// and timeframe: the exchange's candle combination (instrument
// domain.CandleInstrument: candles are stored per exchange, whichever
// instrument they were read for) and the kind "candles:<tf>". Every writer
// and reader of candle health (REST ingest, the push feeds, the api, the
// metrics) takes it from here.
func CandleFeed(m domain.Market, exchange string, tf domain.Timeframe) FeedKey {
	return FeedKey{Combination: domain.Combination{Market: m, Exchange: exchange, Instrument: domain.CandleInstrument}, Kind: candleKindHead + string(tf)}
}

// IsCandleKind reports whether a feed-health kind is a timeframe's candles.
func IsCandleKind(kind string) bool { return strings.HasPrefix(kind, candleKindHead) }

// FeedHealth is the last outcome of ingesting one kind of data of a combination.
type FeedHealth struct {
	Combination   domain.Combination
	Kind          string // FeedKindTickers, FeedKindFundamentals, FeedKindCalendar or CandleFeed's "candles:<tf>"
	LastSuccessAt *time.Time
	LastErrorAt   *time.Time
	LastError     string
}

// Failing reports whether the last attempt failed.
func (h FeedHealth) Failing() bool {
	return h.LastErrorAt != nil && (h.LastSuccessAt == nil || h.LastErrorAt.After(*h.LastSuccessAt))
}

// RecordFeedSuccess and RecordFeedError keep the health of a feed.
func (db *DB) RecordFeedSuccess(ctx context.Context, c domain.Combination, kind string, at time.Time) error {
	_, err := db.Pool.Exec(ctx, `INSERT INTO feed_health (market, exchange, instrument, kind, last_success_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (market, exchange, instrument, kind)
		DO UPDATE SET last_success_at = excluded.last_success_at`, string(c.Market), c.Exchange, c.Instrument, kind, at.UTC())
	return translate(err, "feed health")
}

// RecordFeedError records a failed ingest with its (client-safe) message.
func (db *DB) RecordFeedError(ctx context.Context, c domain.Combination, kind string, at time.Time, msg string) error {
	if len(msg) > 500 {
		msg = msg[:500]
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO feed_health (market, exchange, instrument, kind, last_error_at, last_error)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (market, exchange, instrument, kind)
		DO UPDATE SET last_error_at = excluded.last_error_at, last_error = excluded.last_error`,
		string(c.Market), c.Exchange, c.Instrument, kind, at.UTC(), msg)
	return translate(err, "feed health")
}

// FeedHealthOf returns the health of one kind of data of a combination
// (zero FeedHealth when never ingested).
func (db *DB) FeedHealthOf(ctx context.Context, c domain.Combination, kind string) (FeedHealth, error) {
	h := FeedHealth{Combination: c, Kind: kind}
	var msg *string
	err := db.Pool.QueryRow(ctx, `SELECT last_success_at, last_error_at, last_error FROM feed_health
		WHERE market = $1 AND exchange = $2 AND instrument = $3 AND kind = $4`,
		string(c.Market), c.Exchange, c.Instrument, kind).Scan(&h.LastSuccessAt, &h.LastErrorAt, &msg)
	if err == pgx.ErrNoRows {
		return h, nil
	}
	if msg != nil {
		h.LastError = *msg
	}
	return h, translate(err, "feed health")
}

// DeleteCandlesBefore deletes at most limit candles of a timeframe, of
// every series, that opened before the given time, and returns how many
// went. Each call is one short statement on the (timeframe, open_time)
// index (migration 00016): a caller deletes a backlog in batches, never
// in one long transaction, and ingest keeps writing meanwhile.
func (db *DB) DeleteCandlesBefore(ctx context.Context, tf domain.Timeframe, before time.Time, limit int) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `DELETE FROM candles WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM candles WHERE timeframe = $1 AND open_time < $2 LIMIT $3))`,
		string(tf), before.UTC(), limit)
	if err != nil {
		return 0, translate(err, "candles")
	}
	return tag.RowsAffected(), nil
}

// FeedHealthAll returns the health of every ingested combination and kind,
// ordered for display.
func (db *DB) FeedHealthAll(ctx context.Context) ([]FeedHealth, error) {
	rows, err := db.Pool.Query(ctx, `SELECT market, exchange, instrument, kind, last_success_at, last_error_at, coalesce(last_error, '')
		FROM feed_health ORDER BY market, exchange, instrument, kind`)
	if err != nil {
		return nil, translate(err, "feed health")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FeedHealth, error) {
		var (
			h FeedHealth
			m string
		)
		err := row.Scan(&m, &h.Combination.Exchange, &h.Combination.Instrument, &h.Kind, &h.LastSuccessAt, &h.LastErrorAt, &h.LastError)
		h.Combination.Market = domain.Market(m)
		return h, err
	})
	return out, translate(err, "feed health")
}
