package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// AnalyticsRecord is the latest analytics of one asset in one style.
type AnalyticsRecord struct {
	Market   domain.Market
	Style    analytics.Style
	Symbol   string
	Exchange string
	// Result is nil in list reads (AnalyticsList, TopSetups).
	Result       *analytics.Result
	OverallScore int
	Verdict      analytics.Verdict
	Price        float64
	ChangePct    float64
	Sparkline    []float64
	CandleTime   time.Time
	CandleClose  float64
	UpdatedAt    time.Time
	// FundamentalsAt is the time of the fundamentals the report was scored
	// with (nil: without); written by SaveAnalytics, not read back.
	FundamentalsAt *time.Time
	// CandlesUsed is how many candles the score read, and Instrument the
	// instrument of the combination whose exchange candles they are (""
	// for a report stored before either was recorded).
	CandlesUsed int
	Instrument  string
}

// AnalyticsSnapshot is one point of an asset's score history.
type AnalyticsSnapshot struct {
	At               time.Time
	OverallScore     int
	TechnicalScore   int
	FundamentalScore *int
	Verdict          analytics.Verdict
	Price            float64
	// ModelVersion is the version of the method that made the score.
	ModelVersion string
}

// VerdictEvent is a verdict change waiting in the outbox.
type VerdictEvent struct {
	ID           int64
	Market       domain.Market
	Symbol       string
	OldVerdict   analytics.Verdict
	NewVerdict   analytics.Verdict
	OverallScore int
	At           time.Time
	// ModelVersion is the version of the method that made the new verdict.
	ModelVersion string
	// Sandbox: pushed with a sandbox key (POST /sandbox/verdict-change).
	Sandbox bool
}

const analyticsColumns = `market, style, symbol, exchange, overall_score, verdict, price, change_pct, sparkline, candle_time, candle_close, updated_at, candles_used, instrument`

func scanAnalytics(row pgx.CollectableRow, withResult bool) (AnalyticsRecord, error) {
	var r AnalyticsRecord
	var market, style, verdict string
	dest := []any{&market, &style, &r.Symbol, &r.Exchange, &r.OverallScore, &verdict, &r.Price, &r.ChangePct,
		&r.Sparkline, &r.CandleTime, &r.CandleClose, &r.UpdatedAt, &r.CandlesUsed, &r.Instrument}
	var raw []byte
	if withResult {
		dest = append(dest, &raw)
	}
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	r.Market, r.Style, r.Verdict = domain.Market(market), analytics.Style(style), analytics.Verdict(verdict)
	r.CandleTime, r.UpdatedAt = r.CandleTime.UTC(), r.UpdatedAt.UTC()
	if withResult {
		res, err := decodeResult(raw, market, r.Symbol)
		if err != nil {
			return r, err
		}
		r.Result = res
	}
	return r, nil
}

// decodeResult is a stored result (the column result) decoded.
func decodeResult(raw []byte, market, symbol string) (*analytics.Result, error) {
	var res analytics.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("store: analytics result of %s/%s: %w", market, symbol, err)
	}
	if res.ModelVersion == "" {
		res.ModelVersion = unversioned
	}
	return &res, nil
}

// AnalyticsList returns the latest analytics of every scored asset of a
// market in a style that is still listed (SyncListings), ordered by
// symbol, without the full results.
func (db *DB) AnalyticsList(ctx context.Context, m domain.Market, style analytics.Style) ([]AnalyticsRecord, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+analyticsColumns+` FROM analytics_reports t
		WHERE market = $1 AND style = $2 AND `+listedOnly+` ORDER BY symbol`, string(m), string(style))
	if err != nil {
		return nil, translate(err, "analytics")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, false) })
	return out, translate(err, "analytics")
}

// AnalyticsResults returns the latest analytics of every listed asset of
// a market in every style, with the full results, scored at since or
// later (every one for the zero time), ordered by symbol and style: the
// api's screen snapshot (POST /screener/query) loads a market with it and
// then follows what was scored since.
func (db *DB) AnalyticsResults(ctx context.Context, m domain.Market, since time.Time) ([]AnalyticsRecord, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+analyticsColumns+`, result FROM analytics_reports t
		WHERE market = $1 AND updated_at >= $2 AND `+listedOnly+` ORDER BY symbol, style`, string(m), since)
	if err != nil {
		return nil, translate(err, "analytics")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, true) })
	return out, translate(err, "analytics")
}

// AnalyticsStamp is when one listed asset's report of one style was last
// written.
type AnalyticsStamp struct {
	Symbol    string
	Style     analytics.Style
	UpdatedAt time.Time
}

// AnalyticsStamps lists the listed assets' reports of a market written at
// since or later (every one for the zero time), without their contents:
// the api's screen snapshot compares them with the reports it holds, and
// reads only those that differ (AnalyticsResultsOf) and drops those no
// longer listed.
func (db *DB) AnalyticsStamps(ctx context.Context, m domain.Market, since time.Time) ([]AnalyticsStamp, error) {
	rows, err := db.Pool.Query(ctx, `SELECT symbol, style, updated_at FROM analytics_reports t
		WHERE market = $1 AND updated_at >= $2 AND `+listedOnly, string(m), since)
	if err != nil {
		return nil, translate(err, "analytics")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsStamp, error) {
		var s AnalyticsStamp
		var style string
		err := row.Scan(&s.Symbol, &style, &s.UpdatedAt)
		s.Style = analytics.Style(style)
		return s, err
	})
	return out, translate(err, "analytics")
}

// AnalyticsResultsOf is AnalyticsResults of the listed assets among
// symbols, whenever scored. The styles are named so that the primary
// key's index finds each report (lockReports).
func (db *DB) AnalyticsResultsOf(ctx context.Context, m domain.Market, symbols []string) ([]AnalyticsRecord, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+analyticsColumns+`, result FROM analytics_reports t
		WHERE market = $1 AND style = ANY($3) AND symbol = ANY($2) AND `+listedOnly+` ORDER BY symbol, style`,
		string(m), symbols, styleNames)
	if err != nil {
		return nil, translate(err, "analytics")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, true) })
	return out, translate(err, "analytics")
}

// AnalyticsReport returns the latest analytics of one asset with its full
// result; domain.ENOTFOUND when it was never scored.
func (db *DB) AnalyticsReport(ctx context.Context, m domain.Market, symbol string, style analytics.Style) (AnalyticsRecord, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+analyticsColumns+`, result FROM analytics_reports
		WHERE market = $1 AND style = $2 AND symbol = $3`, string(m), string(style), symbol)
	if err != nil {
		return AnalyticsRecord{}, translate(err, "analytics")
	}
	r, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, true) })
	if err != nil {
		return AnalyticsRecord{}, translate(err, "analytics of "+symbol)
	}
	return r, nil
}

// TopSetups returns the listed assets of the given markets with the
// strongest scores (largest |overall_score| first, then symbol),
// optionally only one verdict.
func (db *DB) TopSetups(ctx context.Context, markets []domain.Market, verdict analytics.Verdict, style analytics.Style, limit int) ([]AnalyticsRecord, error) {
	ms := make([]string, len(markets))
	for i, m := range markets {
		ms[i] = string(m)
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+analyticsColumns+` FROM analytics_reports t
		WHERE style = $1 AND market = ANY($2) AND ($3 = '' OR verdict = $3) AND `+listedOnly+`
		ORDER BY abs(overall_score) DESC, market, symbol LIMIT $4`, string(style), ms, string(verdict), limit)
	if err != nil {
		return nil, translate(err, "analytics")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, false) })
	return out, translate(err, "analytics")
}

// AnalyticsHistory returns an asset's snapshots, newest first.
func (db *DB) AnalyticsHistory(ctx context.Context, m domain.Market, symbol string, style analytics.Style, limit int) ([]AnalyticsSnapshot, error) {
	return db.AnalyticsHistoryRange(ctx, HistoryRange{Market: m, Symbol: symbol, Style: style, Limit: limit})
}

// HistoryRange selects snapshots of one asset: at most Limit, taken at
// From or later and at To or earlier (zero: unbounded), and before Before
// (zero: unbounded; the cursor of a next page).
type HistoryRange struct {
	Market           domain.Market
	Symbol           string
	Style            analytics.Style
	From, To, Before time.Time
	Limit            int
}

// AnalyticsHistoryRange returns the snapshots of q, newest first (the
// primary key's order: a page is one index range scan).
func (db *DB) AnalyticsHistoryRange(ctx context.Context, q HistoryRange) ([]AnalyticsSnapshot, error) {
	bound := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	rows, err := db.Pool.Query(ctx, `SELECT at, overall_score, technical_score, fundamental_score, verdict, price, model_version
		FROM analytics_snapshots WHERE market = $1 AND style = $2 AND symbol = $3
			AND ($5::timestamptz IS NULL OR at >= $5) AND ($6::timestamptz IS NULL OR at <= $6) AND ($7::timestamptz IS NULL OR at < $7)
		ORDER BY at DESC LIMIT $4`,
		string(q.Market), string(q.Style), q.Symbol, q.Limit, bound(q.From), bound(q.To), bound(q.Before))
	if err != nil {
		return nil, translate(err, "analytics history")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsSnapshot, error) {
		var s AnalyticsSnapshot
		var verdict string
		err := row.Scan(&s.At, &s.OverallScore, &s.TechnicalScore, &s.FundamentalScore, &verdict, &s.Price, &s.ModelVersion)
		s.At, s.Verdict = s.At.UTC(), analytics.Verdict(verdict)
		return s, err
	})
	return out, translate(err, "analytics history")
}

// SaveAnalytics stores one scoring run of a market and style in one
// transaction: each record replaces the asset's report and is archived
// as published (analytics_report_archive, for reads as of an instant), a snapshot is
// added when the score or the verdict changed or the day did, and, for the
// default style, a verdict change goes into the verdict_events outbox.
// prev holds the reports before the run (from AnalyticsList). It returns
// the events written.
//
// A record is stored only if the asset's report is still the one in prev
// (same updated_at; no report when prev has none) and its candle is not
// older: two runs that read the same report (a triggered scoring and a
// tick, or two workers) store one result, one snapshot and at most one
// event; the other run's record is dropped with its snapshot and event,
// and the next scoring compares against what was stored.
//
// The records go as one statement, a column array each (sorted by the
// primary key and unnested in that order, so concurrent savers lock reports in one order), rather
// than a statement per record: a run over a universe at a close saves
// thousands.
func (db *DB) SaveAnalytics(ctx context.Context, recs []AnalyticsRecord, prev map[string]AnalyticsRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	_, c, err := newSaveColumns(recs, prev)
	if err != nil {
		return 0, err
	}
	var n int64
	err = retryDeadlock(func() error {
		tag, err := db.Pool.Exec(ctx, saveAnalyticsSQL, c.args()...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, translate(err, "analytics")
	}
	return int(n), nil
}

// saveAnalyticsSQL stores the records of saveColumns (SaveAnalytics): the
// reports replaced only over the report the run read and never by an
// older candle; then, for the reports replaced, the archive copy, the
// snapshot and the verdict event. The command tag counts the events.
//
// The report a record's run read (prev_updated) is looked up for the
// arbiter's conflict row in prev, one object built once a statement: a
// subquery over i for each conflict row scanned the records' wide rows
// every time, up to half of the upsert's time in a 64-record save.
const saveAnalyticsSQL = `WITH i AS MATERIALIZED (
		SELECT market, style, symbol, exchange, overall_score, verdict, price, change_pct, spark_from, spark_len, candle_time,
			candle_close, updated_at, prev_updated, technical_score, fundamental_score, snapshot, old_verdict, event,
			fundamentals_at, model_version, candles_used, instrument, ord, result_text::json AS result
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::float8[], $8::float8[],
			$9::int[], $10::int[], $11::timestamptz[], $12::float8[], $13::timestamptz[], string_to_array($25::text, E'\x1e'), $15::timestamptz[],
			$16::int[], $17::int[], $18::bool[], $19::text[], $20::bool[], $21::timestamptz[], $22::text[], $23::int[], $24::text[])
			WITH ORDINALITY AS u(market, style, symbol, exchange, overall_score, verdict, price, change_pct,
				spark_from, spark_len, candle_time, candle_close, updated_at, result_text, prev_updated,
				technical_score, fundamental_score, snapshot, old_verdict, event, fundamentals_at, model_version, candles_used,
				instrument, ord)
	), prev AS MATERIALIZED (
		SELECT jsonb_object_agg(market || E'\x1f' || style || E'\x1f' || symbol, prev_updated) AS updated FROM i
	), up AS (
		INSERT INTO analytics_reports AS a (` + analyticsColumns + `, result, fundamentals_at)
		SELECT market, style, symbol, exchange, overall_score, verdict, price, change_pct,
			coalesce(($14::float8[])[spark_from + 1:spark_from + spark_len], '{}'), candle_time, candle_close, updated_at,
			candles_used, instrument, result, fundamentals_at
		FROM i ORDER BY ord
		ON CONFLICT (market, style, symbol) DO UPDATE SET exchange = excluded.exchange,
			overall_score = excluded.overall_score, verdict = excluded.verdict, price = excluded.price,
			change_pct = excluded.change_pct, sparkline = excluded.sparkline, candle_time = excluded.candle_time,
			candle_close = excluded.candle_close, updated_at = excluded.updated_at, result = excluded.result,
			fundamentals_at = excluded.fundamentals_at, candles_used = excluded.candles_used, instrument = excluded.instrument
		WHERE a.candle_time <= excluded.candle_time AND a.updated_at IS NOT DISTINCT FROM
			((SELECT updated FROM prev) ->> (excluded.market || E'\x1f' || excluded.style || E'\x1f' || excluded.symbol))::timestamptz
		RETURNING a.market, a.style, a.symbol
	), saved AS MATERIALIZED (
		SELECT i.* FROM i JOIN up USING (market, style, symbol)
	), snap AS (
		INSERT INTO analytics_snapshots (market, style, symbol, at, overall_score, technical_score, fundamental_score, verdict, price, model_version)
		SELECT market, style, symbol, updated_at, overall_score, technical_score, fundamental_score, verdict, price, model_version
		FROM saved WHERE snapshot ORDER BY ord
		ON CONFLICT DO NOTHING
	), arch AS (
		INSERT INTO analytics_report_archive (market, style, symbol, published_at, exchange, instrument, overall_score,
			verdict, price, change_pct, candle_time, candle_close, candles_used, result)
		SELECT market, style, symbol, updated_at, exchange, instrument, overall_score, verdict, price, change_pct,
			candle_time, candle_close, candles_used, result
		FROM saved ORDER BY ord
		ON CONFLICT DO NOTHING
	)
	INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, model_version)
	SELECT market, symbol, old_verdict, verdict, overall_score, updated_at, model_version FROM saved WHERE event ORDER BY ord
	ON CONFLICT (market, symbol, at) DO NOTHING`

// saveColumns are SaveAnalytics' records as one array per column of
// saveAnalyticsSQL; the sparklines are one array, sliced per record, and
// the results' JSON one text, each result after a record separator
// (U+001E, which JSON escapes inside strings and has nowhere else): pgx
// would grow its parameter buffer from 256 bytes a result at a time (each
// save's results are hundreds of kB), where one text is one copy.
type saveColumns struct {
	market, style, symbol, exchange, verdict, oldVerdict, modelVersion, instrument []string
	results                                                                        []byte
	overall, sparkFrom, sparkLen, technical, candlesUsed                           []int
	fundamental                                                                    []*int
	price, changePct, candleClose, sparks                                          []float64
	candleTime, updatedAt                                                          []time.Time
	prevUpdated, fundamentalsAt                                                    []*time.Time
	snapshot, event                                                                []bool
}

// resultSeparator separates the results' JSON in saveColumns.results.
const resultSeparator = 0x1e

// newSaveColumns sorts recs in the primary key's order, whatever the
// caller's (every saver locks reports, and their snapshots, archive rows
// and events, in one order), and lays them out as saveColumns.
func newSaveColumns(recs []AnalyticsRecord, prev map[string]AnalyticsRecord) ([]AnalyticsRecord, *saveColumns, error) {
	recs = slices.SortedStableFunc(slices.Values(recs), func(a, b AnalyticsRecord) int {
		return cmp.Or(cmp.Compare(a.Market, b.Market), cmp.Compare(a.Style, b.Style), cmp.Compare(a.Symbol, b.Symbol))
	})
	c := &saveColumns{}
	for i, r := range recs {
		if err := c.add(r, prev); err != nil {
			return nil, nil, err
		}
		if i == 0 { // room for every result at a quarter more than the first's size, in one allocation
			c.results = slices.Grow(c.results, (len(c.results)+1)*(len(recs)-1)*5/4)
		}
	}
	return recs, c, nil
}

func (c *saveColumns) add(r AnalyticsRecord, prev map[string]AnalyticsRecord) error {
	if len(c.market) > 0 {
		c.results = append(c.results, resultSeparator)
	}
	start := len(c.results)
	var err error
	if c.results, err = appendResult(c.results, r.Result); err != nil {
		return fmt.Errorf("store: analytics %s: %w", r.Symbol, err)
	}
	if bytes.IndexByte(c.results[start:], resultSeparator) >= 0 {
		return fmt.Errorf("store: analytics %s: the result's JSON holds a raw U+001E", r.Symbol)
	}
	p, had := prev[r.Symbol]
	var prevUpdated *time.Time
	if had {
		t := p.UpdatedAt.UTC()
		prevUpdated = &t
	}
	var fundamentalsAt *time.Time
	if r.FundamentalsAt != nil {
		t := r.FundamentalsAt.UTC()
		fundamentalsAt = &t
	}
	c.market, c.style, c.symbol = append(c.market, string(r.Market)), append(c.style, string(r.Style)), append(c.symbol, r.Symbol)
	c.exchange, c.verdict = append(c.exchange, r.Exchange), append(c.verdict, string(r.Verdict))
	c.overall, c.price, c.changePct = append(c.overall, r.OverallScore), append(c.price, r.Price), append(c.changePct, r.ChangePct)
	c.sparkFrom, c.sparkLen = append(c.sparkFrom, len(c.sparks)), append(c.sparkLen, len(r.Sparkline))
	c.sparks = append(c.sparks, r.Sparkline...)
	c.candleTime, c.candleClose, c.updatedAt = append(c.candleTime, r.CandleTime.UTC()), append(c.candleClose, r.CandleClose),
		append(c.updatedAt, r.UpdatedAt.UTC())
	c.prevUpdated = append(c.prevUpdated, prevUpdated)
	c.technical, c.fundamental = append(c.technical, r.Result.TechnicalScore), append(c.fundamental, r.Result.FundamentalScore)
	c.snapshot = append(c.snapshot, !had || p.OverallScore != r.OverallScore || p.Verdict != r.Verdict || !sameDay(p.UpdatedAt, r.UpdatedAt))
	c.oldVerdict = append(c.oldVerdict, string(p.Verdict))
	c.event = append(c.event, had && r.Style == analytics.DefaultStyle && p.Verdict != r.Verdict)
	c.fundamentalsAt, c.modelVersion = append(c.fundamentalsAt, fundamentalsAt), append(c.modelVersion, modelVersion(r.Result))
	c.candlesUsed, c.instrument = append(c.candlesUsed, r.CandlesUsed), append(c.instrument, r.Instrument)
	return nil
}

func (c *saveColumns) args() []any {
	return []any{c.market, c.style, c.symbol, c.exchange, c.overall, c.verdict, c.price, c.changePct, c.sparkFrom, c.sparkLen,
		c.candleTime, c.candleClose, c.updatedAt, c.sparks, c.prevUpdated, c.technical, c.fundamental, c.snapshot, c.oldVerdict,
		c.event, c.fundamentalsAt, c.modelVersion, c.candlesUsed, c.instrument,
		// the results last (pgx then grows its buffer once), as a string:
		// with default_query_exec_mode=exec (pgbouncer before 1.21) pgx
		// types a []byte as bytea. The string shares the bytes rather than
		// copying hundreds of kilobytes a save: nothing writes into
		// c.results once newSaveColumns has built it.
		unsafe.String(unsafe.SliceData(c.results), len(c.results))}
}

// styleNames are analytics.Styles as the style column holds them.
var styleNames = func() []string {
	out := make([]string, len(analytics.Styles))
	for i, st := range analytics.Styles {
		out[i] = string(st)
	}
	return out
}()

// unversioned is the model version of a result stored without one: the
// first version, the only one a binary that did not record versions ran.
var unversioned = analytics.Versions[0].Name

// modelVersion is the version a result was made with (CurrentVersion for
// a result built without Score, as tests do).
func modelVersion(r *analytics.Result) string {
	if r.ModelVersion == "" {
		return analytics.CurrentVersion().Name
	}
	return r.ModelVersion
}

func sameDay(a, b time.Time) bool {
	ay, am, ad := a.UTC().Date()
	by, bm, bd := b.UTC().Date()
	return ay == by && am == bm && ad == bd
}

// VerdictEvents returns outbox events after id, oldest first.
func (db *DB) VerdictEvents(ctx context.Context, afterID int64, limit int) ([]VerdictEvent, error) {
	rows, err := db.Pool.Query(ctx, `SELECT id, market, symbol, old_verdict, new_verdict, overall_score, at, model_version
		FROM verdict_events WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, translate(err, "verdict events")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (VerdictEvent, error) {
		var e VerdictEvent
		var market, oldV, newV string
		err := row.Scan(&e.ID, &market, &e.Symbol, &oldV, &newV, &e.OverallScore, &e.At, &e.ModelVersion)
		e.Market, e.OldVerdict, e.NewVerdict, e.At = domain.Market(market), analytics.Verdict(oldV), analytics.Verdict(newV), e.At.UTC()
		return e, err
	})
	return out, translate(err, "verdict events")
}

// ScoredStyles returns, per market, the styles in which at least one asset
// has a report (what /readyz calls warm).
func (db *DB) ScoredStyles(ctx context.Context) (map[domain.Market][]analytics.Style, error) {
	rows, err := db.Pool.Query(ctx, `SELECT DISTINCT market, style FROM analytics_reports`)
	if err != nil {
		return nil, translate(err, "analytics")
	}
	out := map[domain.Market][]analytics.Style{}
	for rows.Next() {
		var m, st string
		if err := rows.Scan(&m, &st); err != nil {
			rows.Close()
			return nil, translate(err, "analytics")
		}
		out[domain.Market(m)] = append(out[domain.Market(m)], analytics.Style(st))
	}
	return out, translate(rows.Err(), "analytics")
}
