package store

import (
	"context"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// The rescoring rule, in full, is this file: scoring runs (the trigger's,
// the tick's) score an asset of a market's analytics source in a style
// when
//
//   - it has no report yet;
//   - its newest candle of the style's timeframe is not the one its report
//     scored (a new candle: at once);
//   - its fundamentals are newer than those its report was made with (at
//     once);
//   - its newest candle has ended (at its close, or at its market's
//     session close within it) and the report read it before it ended, or
//     its close moved since the report: at once when the candle's final
//     state is stored (candles.closed: a stream's closing push, a read
//     after the end; store.UpsertChangedCandles), otherwise once
//     RescoreQuery.Settle has passed since the end (a close no final
//     write marked, e.g. the write of a series' last open state that
//     lands just after the close: the close waits for its final state
//     rather than being scored twice within seconds);
//   - or its newest candle is still open and its close moved since the
//     report, or a new candle opened right after the closed one the
//     report scored in the current slot, and the report was made before
//     the current open-candle slot (RescoreSlot): the open-candle rule.
//
// Anything else is skipped, so a run repeated, or a trigger and a tick
// arriving together, changes nothing and sends no second verdict event.
// The open-candle rule bounds what a moving price costs: however many
// candle writes, triggers and ticks arrive, an asset whose open candle
// moves is scored once per slot.
//
// At a close the closed candle is stored first and its new candle seconds
// later (the stream writes them apart, REST may lag a minute): a report
// made on the closed candle after it closed is in the new candle's first
// slot, so the new candle waits for the next slot instead of scoring the
// whole universe a second time within seconds of the first.

// RescoreEvery is how often, at most, an asset is scored again while only
// its still-open candle moves: a sixteenth of the timeframe rounded up to
// a whole minute, at least two minutes (scalp 2 min, intraday 4 min, swing
// 15 min, position 1.5 h). Scoring every candle write instead would double
// scalp's cost for a price that moved by a tick.
func RescoreEvery(tf domain.Timeframe) time.Duration {
	return max((tf.Duration()/16+time.Minute-1)/time.Minute*time.Minute, 2*time.Minute)
}

// RescoreSlot is the open-candle slot holding now, [start, end): the
// candle's timeframe split from its open into as many equal slots as
// RescoreEvery fits whole, less as many as it takes for no slot to start
// on a close of a shorter scored timeframe (scalp: 7 of 2 min 8.6 s;
// intraday 15 of 4 min, swing 15 of 16 min, position 13 of 1 h 50 min
// 46 s). A report made in the current slot is not rescored for a
// still-open candle that moved.
//
// The slots start at the candle's open, so the prompt scoring of a new
// candle (the trigger's, seconds after the open) is in that candle's first
// slot and is not repeated a minute later. Slots aligned to the clock
// would cut scalp's 15 minutes at even minutes, and a candle opening on an
// odd minute would be scored at once and again when the clock's slot
// turned. A slot of swing or position starting on a 15-minute close
// (16 of each would) would rescore the whole universe in that style
// exactly when scalp's closed candles are due.
func RescoreSlot(now time.Time, tf domain.Timeframe) (start, end time.Time) {
	open := tf.Truncate(now)
	span := tf.Duration()
	n := rescoreSlots(tf)
	k := int64(now.Sub(open)) * n / int64(span)
	return open.Add(time.Duration(int64(span) * k / n)), open.Add(time.Duration(int64(span) * (k + 1) / n))
}

// rescoreSlots is how many open-candle slots a candle of tf has: as many
// RescoreEvery fits whole, less until the count is coprime with the
// number of shortest scored candles in one of tf (slot k starts at
// k·span/n, a close of the shortest timeframe when n/gcd divides k).
func rescoreSlots(tf domain.Timeframe) int64 {
	span := tf.Duration()
	shortest := span
	for _, st := range analytics.Styles {
		shortest = min(shortest, st.Timeframe().Duration())
	}
	per := int64(span / shortest)
	n := int64(span / RescoreEvery(tf))
	for n > 1 && gcd(n, per) != 1 {
		n--
	}
	return max(n, 1)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// RescoreQuery names the assets a scoring run decides on: the market's
// analytics source, the style and its timeframe, the symbols (nil: every
// asset of the source), at a time.
type RescoreQuery struct {
	Source    domain.Combination
	Style     analytics.Style
	Timeframe domain.Timeframe
	Symbols   []string
	// Now is the run's time: it picks the open-candle slot (RescoreSlot)
	// and bounds the fundamentals' age (as Fundamentals' now does).
	Now time.Time
	// SessionClose is the close of the market's current or last session
	// (its calendar's MarketState.Session at Now); zero for a market that
	// never closes. A candle holding it ends there (api.candleEnd's rule).
	SessionClose time.Time
	// Settle defers the end-of-candle rule for a candle whose final state
	// is not stored (candles.closed false): one that ended less than
	// Settle before Now is not rescored for having ended; after Settle it
	// is, whatever was stored (a feed that marked nothing final, a final
	// state equal to a write before the end, from a binary before the
	// column). A stored final state is rescored at once, whatever Settle.
	// A run right after a close (a tick's, or one a write of the last open
	// states triggered) would otherwise score the universe on the candles
	// as they stood before the final ones, and the final writes' run score
	// it all again.
	Settle time.Duration
}

// RescoreCandidate is an asset a scoring run must score: its stored report
// (Prev, when HadPrev), its fresh fundamentals (Fundamentals, undecoded:
// FundamentalRow.Decoded) and its screener price and change (when
// HasTicker).
type RescoreCandidate struct {
	Symbol       string
	Prev         AnalyticsRecord
	HadPrev      bool
	Fundamentals FundamentalRow
	Price        float64
	ChangePct    float64
	HasTicker    bool
	// Reason is the first clause of the rule that picked it.
	Reason RescoreReason
}

// RescoreReason names a clause of the rescoring rule (this file's
// comment), in the rule's order: a scoring run logs how many assets each
// picked, so a run that rescored a universe says why.
type RescoreReason string

const (
	// RescoreNew: no report yet.
	RescoreNew RescoreReason = "new"
	// RescoreNewCandle: a newer candle than the report's.
	RescoreNewCandle RescoreReason = "new_candle"
	// RescoreFundamentals: newer fundamentals than the report's.
	RescoreFundamentals RescoreReason = "fundamentals"
	// RescoreEnded: the report's candle has ended, and the report read it
	// before it ended.
	RescoreEnded RescoreReason = "ended"
	// RescoreEndedMoved: the report's candle has ended and was read after
	// its end, but its close moved since (the report scored a state that
	// was not the final one).
	RescoreEndedMoved RescoreReason = "ended_moved"
	// RescoreOpenMoved: the open-candle rule.
	RescoreOpenMoved RescoreReason = "open_moved"
)

// RescoreReasons are the rule's clauses in its order.
var RescoreReasons = []RescoreReason{RescoreNew, RescoreNewCandle, RescoreFundamentals, RescoreEnded, RescoreEndedMoved, RescoreOpenMoved}

// RescoreCandidates decides, in one statement, which assets of a source
// must be scored (again) under the rescoring rule (this file's comment),
// and returns only those, ordered by symbol, with what scoring them keeps;
// considered is how many assets were decided on. The assets are the
// source's screener rows (of q.Symbols when given) or, when the source has
// none yet, the symbols with candles of the timeframe; one without a
// candle is not a candidate. Only the candidates' rows are read: most runs
// rescore few assets or none (ingest triggers a run per candle write and
// style, the tick one per interval). Each asset's screener row (of a
// named symbol), newest candle, report and fundamentals are looked up by
// their keys, one index lookup each (lateral subqueries kept apart by
// OFFSET 0), whatever the tables' statistics say: joined by the planner's
// choice, tables without statistics (a new deployment before its first
// analyze, a server without autovacuum) were planned as one row each, and
// the join compared every asset with every report (5,234 stocks: 16.8 M
// comparisons, 2.8 s). The symbols-from-candles branch is reached only
// through an empty source: planned as a parallel scan of the candles, it
// would otherwise start its parallel workers at every run (≈ 0.2 s on a
// busy host) to find it had nothing to do.
func (db *DB) RescoreCandidates(ctx context.Context, q RescoreQuery) (cands []RescoreCandidate, considered int, err error) {
	m := q.Source.Market
	rows, err := db.Pool.Query(ctx, rescoreCandidatesSQL, rescoreArgs(q)...)
	if err != nil {
		return nil, 0, translate(err, "analytics")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n          int
			sym        *string
			hasTicker  *bool
			price, chg *float64
			had        *bool
			score      *int
			verdict    *string
			ctime, at  *time.Time
			cclose     *float64
			inputs     []byte
			fAt        *time.Time
			reason     *string
		)
		if err := rows.Scan(&n, &sym, &hasTicker, &price, &chg, &had, &score, &verdict, &ctime, &cclose, &at, &inputs, &fAt, &reason); err != nil {
			return nil, 0, translate(err, "analytics")
		}
		considered = n
		if sym == nil {
			continue // no candidate: the one row only counts
		}
		c := RescoreCandidate{Symbol: *sym, HasTicker: *hasTicker, Price: *price, ChangePct: *chg, HadPrev: *had,
			Reason: RescoreReason(*reason)}
		if c.HadPrev {
			c.Prev = AnalyticsRecord{Market: m, Style: q.Style, Symbol: c.Symbol, OverallScore: *score,
				Verdict: analytics.Verdict(*verdict), CandleTime: ctime.UTC(), CandleClose: *cclose, UpdatedAt: at.UTC()}
		}
		if fAt != nil {
			c.Fundamentals = FundamentalRow{UpdatedAt: fAt.UTC(), raw: inputs}
		}
		cands = append(cands, c)
	}
	return cands, considered, translate(rows.Err(), "analytics")
}

// rescoreArgs are rescoreCandidatesSQL's parameters for q.
func rescoreArgs(q RescoreQuery) []any {
	slotStart, slotEnd := RescoreSlot(q.Now, q.Timeframe)
	var only any // NULL: every asset
	if q.Symbols != nil {
		only = q.Symbols
	}
	var sessionClose any // NULL: no session ends a candle
	if !q.SessionClose.IsZero() {
		sessionClose = q.SessionClose.UTC()
	}
	return []any{string(q.Source.Market), q.Source.Exchange, q.Source.Instrument, string(q.Timeframe), only, string(q.Style),
		q.Now.Add(-fundamentalsMaxAge).UTC(), slotStart.UTC(), slotEnd.UTC(), q.Timeframe.Duration(), sessionClose, q.Now.UTC(), q.Settle}
}

// rescoreCandidatesSQL is RescoreCandidates' statement (rescoreArgs).
const rescoreCandidatesSQL = `WITH src AS (
			SELECT symbol, price, change_pct FROM tickers WHERE market = $1 AND exchange = $2 AND instrument = $3
		), syms AS (
			SELECT symbol, true AS has_ticker, price, change_pct FROM src WHERE $5::text[] IS NULL
			UNION ALL
			SELECT t.symbol, true, t.price, t.change_pct FROM (SELECT DISTINCT unnest($5::text[])) o(symbol)
			CROSS JOIN LATERAL (SELECT symbol, price, change_pct FROM tickers
				WHERE market = $1 AND exchange = $2 AND instrument = $3 AND symbol = o.symbol OFFSET 0) t
			UNION ALL
			SELECT c.symbol, false, 0::float8, 0::float8 FROM (SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM src)) none(one)
			CROSS JOIN LATERAL (SELECT DISTINCT symbol FROM candles
				WHERE market = $1 AND exchange = $2 AND timeframe = $4 AND none.one = 1
					AND ($5::text[] IS NULL OR symbol = ANY($5::text[]))) c
		), cand AS (
			SELECT s.symbol, s.has_ticker, s.price, s.change_pct, a.symbol IS NOT NULL AS had,
				a.overall_score, a.verdict, a.candle_time, a.candle_close, a.updated_at, f.inputs, f.updated_at AS f_at, r.reason
			FROM syms s
			CROSS JOIN LATERAL (SELECT open_time, close, closed FROM candles
				WHERE market = $1 AND exchange = $2 AND symbol = s.symbol AND timeframe = $4
				ORDER BY open_time DESC LIMIT 1) l
			CROSS JOIN LATERAL (SELECT CASE WHEN $11::timestamptz > l.open_time AND $11::timestamptz < l.open_time + $10::interval
				THEN $11::timestamptz ELSE l.open_time + $10::interval END AS end_at) e
			-- settled: the candle has ended, and its final state is stored or Settle has passed.
			CROSS JOIN LATERAL (SELECT e.end_at <= $12::timestamptz
				AND (l.closed OR e.end_at <= $12::timestamptz - $13::interval) AS settled) d
			LEFT JOIN LATERAL (SELECT symbol, overall_score, verdict, candle_time, candle_close, updated_at, fundamentals_at
				FROM analytics_reports WHERE market = $1 AND style = $6 AND symbol = s.symbol OFFSET 0) a ON true
			LEFT JOIN LATERAL (SELECT inputs, updated_at FROM fundamentals
				WHERE market = $1 AND symbol = s.symbol AND updated_at > $7 OFFSET 0) f ON true
			CROSS JOIN LATERAL (SELECT CASE
				WHEN a.symbol IS NULL THEN 'new'
				WHEN a.candle_time <> l.open_time AND NOT (a.candle_time + $10::interval = l.open_time AND a.updated_at >= l.open_time
					AND a.updated_at >= $8 AND a.updated_at < $9) THEN 'new_candle'
				WHEN coalesce(f.updated_at > coalesce(a.fundamentals_at, '-infinity'), false) THEN 'fundamentals'
				WHEN a.candle_time = l.open_time AND d.settled AND a.updated_at < e.end_at THEN 'ended'
				WHEN a.candle_time = l.open_time AND d.settled AND a.candle_close <> l.close THEN 'ended_moved'
				WHEN e.end_at > $12::timestamptz AND (a.candle_close <> l.close OR a.candle_time <> l.open_time)
					AND (a.updated_at < $8 OR a.updated_at >= $9)
					THEN 'open_moved'
				END AS reason) r
			WHERE r.reason IS NOT NULL
		)
		SELECT (SELECT count(*) FROM syms), c.symbol, c.has_ticker, c.price, c.change_pct, c.had,
			c.overall_score, c.verdict, c.candle_time, c.candle_close, c.updated_at, c.inputs, c.f_at, c.reason
		FROM (SELECT 1) one LEFT JOIN cand c ON true ORDER BY c.symbol`
