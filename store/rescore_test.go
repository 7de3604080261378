package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// RescoreCandidates returns exactly the assets scoring must score (again),
// with what scoring keeps of them: no report yet; a new candle; fresher
// fundamentals; a still-open candle that moved since a report made before
// the current slot. It skips a report of the same candle, one of the
// same still-open candle made in the slot, and one made in the slot on the
// candle that closed right before the open one (until the next slot); it decides on the given
// symbols only when given them (none when given none).
func TestRescoreCandidates(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)
	slotStart, slotEnd := store.RescoreSlot(now, domain.TF4h) // 10:08–10:24
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	open := now.Truncate(4 * time.Hour)
	syms := []string{"FRESH", "MOVED_IN_SLOT", "MOVED_BEFORE", "NEW_CANDLE", "FUNDAMENTALS", "RACED", "NEXT_OPENED", "UNSCORED", "NO_CANDLE"}
	var tickers []domain.Ticker
	for i, sym := range syms {
		tickers = append(tickers, domain.Ticker{Symbol: sym, Price: float64(i + 1), ChangePct: 2, Volume: 1, UpdatedAt: now})
		if sym == "NO_CANDLE" {
			continue
		}
		close := 100.0
		if sym == "MOVED_IN_SLOT" || sym == "MOVED_BEFORE" {
			close = 101
		}
		cs := []domain.Candle{{Time: open, Open: 100, High: 102, Low: 99, Close: close, Volume: 5}}
		if sym == "NEXT_OPENED" { // the closed candle its report scored, and the open one after it
			cs = append([]domain.Candle{{Time: open.Add(-4 * time.Hour), Open: 100, High: 102, Low: 99, Close: 100, Volume: 5}}, cs...)
		}
		if sym == "NEW_CANDLE" {
			cs = append(cs, domain.Candle{Time: open.Add(4 * time.Hour), Open: 100, High: 102, Low: 99, Close: 100, Volume: 5})
		}
		if err := db.UpsertCandles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF4h}, cs); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.ReplaceTickers(ctx, spot, tickers); err != nil {
		t.Fatal(err)
	}
	var recs []store.AnalyticsRecord
	fundamentalsAt := now.Add(-2 * time.Minute)
	for _, sym := range syms[:7] {
		at := now.Add(-10 * time.Second) // in the slot
		if sym == "MOVED_BEFORE" {
			at = slotStart.Add(-time.Second)
		}
		rec := analyticsRecord(sym, 15, analytics.VerdictNeutral, at) // candle open, close 100
		if sym == "NEXT_OPENED" {
			rec.CandleTime = open.Add(-4 * time.Hour)
		}
		if sym == "FRESH" {
			rec.FundamentalsAt = &fundamentalsAt // scored with its current fundamentals
		}
		// RACED was scored after its fundamentals' stamp but without them
		// (their transaction had not committed yet): due.
		recs = append(recs, rec)
	}
	if _, err := db.SaveAnalytics(ctx, recs, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.UpsertFundamentals(ctx, domain.Crypto, map[string]map[string]float64{"FUNDAMENTALS": {"x": 3}, "FRESH": {"x": 1},
		"RACED": {"x": 2}}, fundamentalsAt); err != nil { // older than the reports
		t.Fatal(err)
	}
	if err := db.UpsertFundamentals(ctx, domain.Crypto, map[string]map[string]float64{"FUNDAMENTALS": {"x": 3}}, now); err != nil {
		t.Fatal(err)
	}
	q := store.RescoreQuery{Source: spot, Style: analytics.Swing, Timeframe: domain.TF4h, Now: now}
	cands, considered, err := db.RescoreCandidates(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cands {
		got = append(got, c.Symbol+":"+string(c.Reason))
	}
	if want := []string{"FUNDAMENTALS:fundamentals", "MOVED_BEFORE:open_moved", "NEW_CANDLE:new_candle", "RACED:fundamentals",
		"UNSCORED:new"}; !cmp.Equal(got, want) || considered != len(syms) {
		t.Fatalf("candidates %v of %d assets, want %v of %d", got, considered, want, len(syms))
	}
	byName := map[string]store.RescoreCandidate{}
	for _, c := range cands {
		byName[c.Symbol] = c
	}
	f := byName["FUNDAMENTALS"]
	if in, err := f.Fundamentals.Decoded(); err != nil || in["x"] != 3 || !f.Fundamentals.UpdatedAt.Equal(now) {
		t.Errorf("FUNDAMENTALS' fundamentals: %+v → %v (%v), want x = 3 of %s", f.Fundamentals, in, err, now)
	}
	if p := f.Prev; !f.HadPrev || p.OverallScore != 15 || p.Verdict != analytics.VerdictNeutral || !p.CandleTime.Equal(open) ||
		p.CandleClose != 100 || !p.UpdatedAt.Equal(now.Add(-10*time.Second)) || !f.HasTicker || f.Price != 5 || f.ChangePct != 2 {
		t.Errorf("FUNDAMENTALS: %+v, want its stored report, and its screener price 5 and change 2", f)
	}
	if u := byName["UNSCORED"]; u.HadPrev || u.Fundamentals.UpdatedAt != (time.Time{}) {
		t.Errorf("UNSCORED: %+v, want no report and no fundamentals", u)
	}

	// Given symbols: only those (and none when given none).
	q.Symbols = []string{"FRESH", "NEW_CANDLE", "ELSEWHERE"}
	if cands, considered, err := db.RescoreCandidates(ctx, q); err != nil || len(cands) != 1 || cands[0].Symbol != "NEW_CANDLE" || considered != 2 {
		t.Fatalf("candidates of %v: %+v of %d (%v), want NEW_CANDLE of 2", q.Symbols, cands, considered, err)
	}
	q.Symbols = []string{}
	if cands, considered, err := db.RescoreCandidates(ctx, q); err != nil || len(cands) != 0 || considered != 0 {
		t.Fatalf("candidates of no symbols: %+v of %d (%v)", cands, considered, err)
	}

	// Next slot: the moved still-open candle is due too.
	q.Symbols, q.Now = nil, slotEnd
	cands, _, err = db.RescoreCandidates(ctx, q)
	has := func(sym string) bool {
		return slices.ContainsFunc(cands, func(c store.RescoreCandidate) bool { return c.Symbol == sym })
	}
	if err != nil || !has("MOVED_IN_SLOT") || !has("NEXT_OPENED") || has("FRESH") {
		t.Fatalf("candidates in the next slot: %+v (%v), want MOVED_IN_SLOT and NEXT_OPENED, not FRESH", cands, err)
	}
}

// A source without screener rows yet decides on the symbols with candles
// of the timeframe (of the given ones, when given).
func TestRescoreCandidatesWithoutScreenerRows(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)
	for _, sym := range []string{"A_USDT", "B_USDT"} {
		if err := db.UpsertCandles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF4h},
			[]domain.Candle{{Time: now.Truncate(4 * time.Hour), Open: 1, High: 1, Low: 1, Close: 1, Volume: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	q := store.RescoreQuery{Source: domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"},
		Style: analytics.Swing, Timeframe: domain.TF4h, Now: now}
	cands, considered, err := db.RescoreCandidates(ctx, q)
	if err != nil || len(cands) != 2 || cands[0].Symbol != "A_USDT" || cands[0].HasTicker || considered != 2 {
		t.Fatalf("candidates: %+v of %d (%v), want A_USDT and B_USDT, without screener rows", cands, considered, err)
	}
	q.Symbols = []string{"B_USDT"}
	if cands, _, err := db.RescoreCandidates(ctx, q); err != nil || len(cands) != 1 || cands[0].Symbol != "B_USDT" {
		t.Fatalf("candidates of B_USDT: %+v (%v)", cands, err)
	}
}

// A candle that ends with its market's session (a 4h candle holding the
// 16:00 New York close) has closed at the bell: a report that read it
// before the bell is rescored at once, as is one whose candle's close
// moved after it (the catch-up's settled bar), though no new candle
// follows and the report is in the current open-candle slot. A report made
// after the bell on the same close is not; before the bell, nothing is.
// Without the session close the candle runs to its own end (22:00). A
// tick's run (Settle) leaves the ended candle to its closing read's
// trigger until Settle has passed since the bell.
func TestRescoreCandidatesAtTheBell(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	open := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC) // 18:00-22:00 UTC holds the 21:00 UTC (16:00 New York) close
	bell := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	nyse := domain.Combination{Market: domain.Stocks, Exchange: "nyse", Instrument: "stock"}
	stored := map[string]float64{"BELL": 100, "AFTER": 100, "SETTLED": 101}
	reported := map[string]time.Time{"BELL": bell.Add(-30 * time.Second), "AFTER": bell.Add(2 * time.Second), "SETTLED": bell.Add(2 * time.Second)}
	var tickers []domain.Ticker
	var recs []store.AnalyticsRecord
	for _, sym := range []string{"AFTER", "BELL", "SETTLED"} {
		tickers = append(tickers, domain.Ticker{Symbol: sym, Price: 100, ChangePct: 1, Volume: 1, UpdatedAt: bell})
		if err := db.UpsertCandles(ctx, store.CandleKey{Market: domain.Stocks, Exchange: "nyse", Symbol: sym, Timeframe: domain.TF4h},
			[]domain.Candle{{Time: open, Open: 100, High: 102, Low: 99, Close: stored[sym], Volume: 5}}); err != nil {
			t.Fatal(err)
		}
		rec := analyticsRecord(sym, 15, analytics.VerdictNeutral, reported[sym]) // close 100
		rec.Market, rec.Exchange, rec.CandleTime = domain.Stocks, "nyse", open
		recs = append(recs, rec)
	}
	if err := db.ReplaceTickers(ctx, nyse, tickers); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveAnalytics(ctx, recs, nil); err != nil {
		t.Fatal(err)
	}
	settle := time.Duration(0)
	reasons := map[string]store.RescoreReason{}
	candidates := func(now, sessionClose time.Time) []string {
		t.Helper()
		cands, _, err := db.RescoreCandidates(ctx, store.RescoreQuery{Source: nyse, Style: analytics.Swing, Timeframe: domain.TF4h,
			Now: now, SessionClose: sessionClose, Settle: settle})
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, c := range cands {
			got = append(got, c.Symbol)
			reasons[c.Symbol] = c.Reason
		}
		return got
	}
	// Every report is in the slot [20:48, 21:04) of the run's time.
	if got := candidates(bell.Add(5*time.Second), bell); !cmp.Equal(got, []string{"BELL", "SETTLED"}) ||
		reasons["BELL"] != store.RescoreEnded || reasons["SETTLED"] != store.RescoreEndedMoved {
		t.Errorf("after the bell: %v %v, want BELL (read before the bell: ended) and SETTLED (its close moved after: ended_moved)", got, reasons)
	}
	if got := candidates(bell.Add(5*time.Second), time.Time{}); len(got) != 0 {
		t.Errorf("after the bell, no session close known: %v, want none (the candle runs to 22:00)", got)
	}
	if got := candidates(bell.Add(-10*time.Second), bell); len(got) != 0 {
		t.Errorf("before the bell: %v, want none (in the slot, still open)", got)
	}
	if got := candidates(open.Add(4*time.Hour+time.Second), time.Time{}); !cmp.Equal(got, []string{"AFTER", "BELL", "SETTLED"}) {
		t.Errorf("past the candle's own end, no session close known: %v, want all three (read before 22:00)", got)
	}
	settle = 45 * time.Second
	if got := candidates(bell.Add(5*time.Second), bell); len(got) != 0 {
		t.Errorf("a tick's run after the bell, within Settle: %v, want none (the closing read's trigger rescores them)", got)
	}
	if got := candidates(bell.Add(45*time.Second), bell); !cmp.Equal(got, []string{"BELL", "SETTLED"}) {
		t.Errorf("a tick's run Settle after the bell: %v, want BELL and SETTLED", got)
	}
	// The closing read's write marks the bars final: rescored at once,
	// within Settle.
	final := map[store.CandleKey]time.Time{}
	series := map[store.CandleKey][]domain.Candle{}
	for _, sym := range []string{"AFTER", "BELL", "SETTLED"} {
		k := store.CandleKey{Market: domain.Stocks, Exchange: "nyse", Symbol: sym, Timeframe: domain.TF4h}
		series[k], final[k] = []domain.Candle{{Time: open, Open: 100, High: 102, Low: 99, Close: stored[sym], Volume: 5}}, open
	}
	if _, err := db.UpsertChangedCandles(ctx, series, final); err != nil {
		t.Fatal(err)
	}
	if got := candidates(bell.Add(5*time.Second), bell); !cmp.Equal(got, []string{"BELL", "SETTLED"}) {
		t.Errorf("after the bell, the bars final, within Settle: %v, want BELL and SETTLED at once", got)
	}
}

// A stream writes a series' open candle every few seconds; the last write
// before the close can land just after it, with the candle as it stood
// before its closing push. Until the final state is stored (closed) or
// Settle has passed, a run decides nothing on it: not the end-of-candle
// rule, and not the open-candle rule either (the candle is no longer
// open), though its close moved since a report made before the slot.
// Then the final write rescores it once.
func TestRescoreCandidatesWaitForTheFinalState(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	closeAt := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	open := closeAt.Add(-15 * time.Minute)
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF15m}
	if err := db.ReplaceTickers(ctx, spot, []domain.Ticker{{Symbol: "BTC_USDT", Price: 100, Volume: 1, UpdatedAt: closeAt}}); err != nil {
		t.Fatal(err)
	}
	candle := func(c float64) []domain.Candle {
		return []domain.Candle{{Time: open, Open: 100, High: 102, Low: 99, Close: c, Volume: 5}}
	}
	if err := db.UpsertCandles(ctx, k, candle(100)); err != nil {
		t.Fatal(err)
	}
	rec := analyticsRecord("BTC_USDT", 15, analytics.VerdictNeutral, closeAt.Add(-3*time.Minute)) // before the last slot
	rec.Style, rec.CandleTime = analytics.Scalp, open
	if _, err := db.SaveAnalytics(ctx, []store.AnalyticsRecord{rec}, nil); err != nil {
		t.Fatal(err)
	}
	decide := func(now time.Time) []store.RescoreCandidate {
		t.Helper()
		cands, _, err := db.RescoreCandidates(ctx, store.RescoreQuery{Source: spot, Style: analytics.Scalp, Timeframe: domain.TF15m,
			Now: now, Settle: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return cands
	}
	// The last open write, its close moved, lands after the close.
	if _, err := db.UpsertChangedCandles(ctx, map[store.CandleKey][]domain.Candle{k: candle(101)}, nil); err != nil {
		t.Fatal(err)
	}
	if got := decide(closeAt.Add(time.Second)); len(got) != 0 {
		t.Fatalf("after the close, the last open state stored: %+v, want none (the final state is on its way)", got)
	}
	if got := decide(closeAt.Add(-time.Second)); len(got) != 1 || got[0].Reason != store.RescoreOpenMoved {
		t.Fatalf("before the close: %+v, want BTC_USDT for the open-candle rule", got)
	}
	// The closing push: final.
	if _, err := db.UpsertChangedCandles(ctx, map[store.CandleKey][]domain.Candle{k: candle(102)}, map[store.CandleKey]time.Time{k: open}); err != nil {
		t.Fatal(err)
	}
	if got := decide(closeAt.Add(2 * time.Second)); len(got) != 1 || got[0].Reason != store.RescoreEnded {
		t.Fatalf("the final state stored: %+v, want BTC_USDT, ended", got)
	}
	// No final write at all: Settle after the close, on what is stored.
	if _, err := db.Pool.Exec(ctx, `UPDATE candles SET closed = false`); err != nil {
		t.Fatal(err)
	}
	if got := decide(closeAt.Add(45 * time.Second)); len(got) != 1 || got[0].Reason != store.RescoreEnded {
		t.Fatalf("Settle after the close, nothing final: %+v, want BTC_USDT, ended", got)
	}
}

// RescoreCandidates looks each asset's screener row (of named symbols),
// report and fundamentals up by its key, whatever the tables' statistics:
// in a schema never analyzed (a new deployment, a server without
// autovacuum) every table is planned as one row, and a join left to the
// planner compared every asset with every report. The plan of the
// statement, on a universe of a few thousand assets without statistics,
// reads those tables only by index conditions naming the symbol.
func TestRescoreCandidatesLooksUpByKey(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)
	src := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	const n = 3000
	for _, q := range []string{
		`INSERT INTO tickers (market, exchange, instrument, symbol, price, change_pct, volume, updated_at)
			SELECT 'stocks', 'nasdaq', 'stock', 'S' || k, 10, 1, 1, $1 FROM generate_series(1, 3000) k`,
		`INSERT INTO candles (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
			SELECT 'stocks', 'nasdaq', 'S' || k, '4h', date_trunc('hour', $1::timestamptz) - interval '2 hours', 10, 11, 9, 10, 1
			FROM generate_series(1, 3000) k`,
		`INSERT INTO analytics_reports (market, style, symbol, exchange, overall_score, verdict, price, change_pct, sparkline,
				result, candle_time, candle_close, updated_at, fundamentals_at)
			SELECT 'stocks', 'swing', 'S' || k, 'nasdaq', 0, 'neutral', 10, 1, '{}', '{}', date_trunc('hour', $1::timestamptz) - interval '2 hours', 10, $1, $1
			FROM generate_series(1, 3000) k`,
		`INSERT INTO fundamentals (market, symbol, inputs, updated_at) SELECT 'stocks', 'S' || k, '{}', $1 FROM generate_series(1, 3000, 7) k`,
	} {
		if _, err := db.Pool.Exec(ctx, q, now); err != nil {
			t.Fatal(err)
		}
	}
	named := make([]string, 0, n/2)
	for k := 1; k <= n; k += 2 {
		named = append(named, "S"+strconv.Itoa(k))
	}
	for _, symbols := range [][]string{nil, named} {
		q := store.RescoreQuery{Source: src, Style: analytics.Swing, Timeframe: domain.TF4h, Symbols: symbols, Now: now}
		raw, err := store.ExplainRescore(db, ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var plan []struct{ Plan map[string]any }
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		keyed := map[string]bool{"analytics_reports": true, "fundamentals": true}
		if symbols != nil {
			keyed["tickers"] = true
		}
		seen := map[string]bool{}
		var walk func(node map[string]any)
		walk = func(node map[string]any) {
			if sub, _ := node["Subplan Name"].(string); sub == "CTE src" {
				return // the source's screener rows: read whole (every asset), or their first only (whether there are any)
			}
			if rel, _ := node["Relation Name"].(string); keyed[rel] {
				seen[rel] = true
				cond, _ := node["Index Cond"].(string)
				if !strings.Contains(cond, "symbol") {
					t.Errorf("symbols %v: %s is read by %s with index condition %q, not by the asset's key", symbols != nil, rel, node["Node Type"], cond)
				}
			}
			kids, _ := node["Plans"].([]any)
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok {
					walk(m)
				}
			}
		}
		walk(plan[0].Plan)
		for rel := range keyed {
			if !seen[rel] {
				t.Errorf("symbols %v: the plan never reads %s", symbols != nil, rel)
			}
		}
		cands, considered, err := db.RescoreCandidates(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want := n
		if symbols != nil {
			want = len(named)
		}
		if considered != want || len(cands) != 0 {
			t.Errorf("symbols %v: considered %d, %d candidates; want %d and none (every report is of the newest candle, in the slot)",
				symbols != nil, considered, len(cands), want)
		}
	}
}
