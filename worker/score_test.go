package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// dumpAnalytics reads every report, snapshot and verdict event, in a stable order.
func dumpAnalytics(t *testing.T, db *store.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT concat_ws('|', market, style, symbol, overall_score, verdict, price, candle_time, updated_at, md5(result::text)) FROM analytics_reports ORDER BY 1`,
		`SELECT concat_ws('|', market, style, symbol, at, overall_score, verdict) FROM analytics_snapshots ORDER BY 1`,
		`SELECT concat_ws('|', market, symbol, old_verdict, new_verdict, at) FROM verdict_events ORDER BY 1`,
	} {
		rows, err := db.Pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			out = append(out, s)
		}
		rows.Close()
	}
	return out
}

// Scoring reads the stored candles of the market's analytics source and
// stores a report per asset; running the same task again (asynq delivers
// at least once) changes nothing; new candles are scored again.
func TestScoreTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	ctx := context.Background()
	if err := in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, clk.t)); err != nil {
		t.Fatal(err)
	}
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)); err != nil {
		t.Fatal(err)
	}
	if err := in.HandleIngestFundamentals(ctx, worker.NewIngestFundamentalsTask(spot, clk.t)); err != nil {
		t.Fatal(err)
	}
	sc := &worker.Scorer{Store: db, Region: "global", Logger: discard(), Now: clk.now}
	task := worker.NewScoreTask(domain.Crypto, analytics.Swing, clk.t)
	if err := sc.HandleScore(ctx, task); err != nil {
		t.Fatal(err)
	}
	first := dumpAnalytics(t, db)
	list, err := db.AnalyticsList(ctx, domain.Crypto, analytics.Swing)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 200 {
		t.Fatalf("scored %d crypto assets, want every spot symbol (≥ 200)", len(list))
	}
	rep, err := db.AnalyticsReport(ctx, domain.Crypto, list[0].Symbol, analytics.Swing)
	if err != nil || rep.Result == nil || len(rep.Result.Factors) < 20 || rep.Exchange != "binance" || len(rep.Sparkline) != 30 {
		t.Fatalf("report of %s = %+v, %v; want a full result from binance with a 30-point sparkline", list[0].Symbol, rep, err)
	}
	// The synthetic feed's fundamentals (funding, open interest, liquidity)
	// are in the score: overall = 0.7 technical + 0.3 fundamental.
	fund := 0
	for _, f := range rep.Result.Factors {
		if f.Group == analytics.GroupFundamental {
			fund++
		}
	}
	if rep.Result.FundamentalScore == nil || fund != 3 {
		t.Fatalf("report of %s: fundamental score %v from %d fundamental factors; want a score from 3", list[0].Symbol, rep.Result.FundamentalScore, fund)
	}

	if err := sc.HandleScore(ctx, task); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, dumpAnalytics(t, db)); diff != "" {
		t.Fatalf("a repeated scoring task changed rows (-first +second):\n%.2000s", diff)
	}

	// Eight hours later there are new 4h candles: every asset is scored
	// again and gets a second snapshot if its score moved.
	clk.t = clk.t.Add(8 * time.Hour)
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)); err != nil {
		t.Fatal(err)
	}
	n, _, err := sc.Score(ctx, domain.Crypto, analytics.Swing)
	if err != nil || n < 200 {
		t.Fatalf("rescored %d, %v after new candles; want every asset", n, err)
	}
	hist, err := db.AnalyticsHistory(ctx, domain.Crypto, list[0].Symbol, analytics.Swing, 10)
	if err != nil || len(hist) == 0 || !hist[0].At.Equal(clk.t) {
		t.Fatalf("history of %s = %+v, %v; want the newest snapshot first", list[0].Symbol, hist, err)
	}
}

func TestScoreBadPayloadIsPermanent(t *testing.T) {
	t.Parallel()
	sc := &worker.Scorer{Region: "global", Now: time.Now}
	for _, task := range []*struct {
		m domain.Market
		s analytics.Style
	}{{"bonds", analytics.Swing}, {domain.Crypto, "weekly"}, {domain.Crypto, ""}} {
		err := sc.HandleScore(context.Background(), worker.NewScoreTask(task.m, task.s, time.Now()))
		if !isSkipRetry(err) {
			t.Errorf("score %s/%s: err = %v, want SkipRetry", task.m, task.s, err)
		}
	}
}

// A verdict that changes is written to the webhook outbox with the
// scoring, once: the standing verdict is taken from the stored report.
func TestScoreWritesVerdictChangeToOutbox(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.MaxCandleSymbols = 5
	ctx := context.Background()
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)); err != nil {
		t.Fatal(err)
	}
	var announced []readcache.Scope
	sc := &worker.Scorer{Store: db, Region: "global", Logger: discard(), Now: clk.now,
		Notify: func(_ context.Context, s readcache.Scope) { announced = append(announced, s) }}
	if _, events, err := sc.Score(ctx, domain.Crypto, analytics.Swing); err != nil || events != 0 {
		t.Fatalf("first scoring: %d events, %v; want none (no standing verdict)", events, err)
	}
	list, err := db.AnalyticsList(ctx, domain.Crypto, analytics.Swing)
	if err != nil || len(list) == 0 {
		t.Fatalf("list: %v, %v", list, err)
	}
	// Make one asset's standing verdict the opposite of its score, as if
	// the market had turned since the last run, made a candle ago on the
	// candle before.
	target := list[0]
	opposite := analytics.VerdictGrowth
	if target.OverallScore > 0 {
		opposite = analytics.VerdictDecline
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE analytics_reports SET verdict = $1, candle_time = candle_time - interval '4 hours',
		updated_at = updated_at - interval '4 hours' WHERE market = 'crypto' AND style = 'swing' AND symbol = $2`, string(opposite), target.Symbol); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(time.Minute)
	for range 2 { // the second run finds nothing new
		if _, _, err := sc.Score(ctx, domain.Crypto, analytics.Swing); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := db.VerdictEvents(ctx, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Symbol != target.Symbol || evs[0].OldVerdict != opposite || evs[0].NewVerdict == opposite {
		t.Fatalf("outbox = %+v, %v; want one change of %s away from %s", evs, err, target.Symbol, opposite)
	}
	if len(announced) == 0 || announced[len(announced)-1] != readcache.TopSetups() {
		t.Errorf("announcements %v: top setups must be dropped too", announced)
	}
}

// failingSaves fails the save of the batch that holds a given asset.
type failingSaves struct {
	worker.ScoreStore
	symbol string
}

var errSaveInjected = errors.New("injected save failure")

func (f failingSaves) SaveAnalytics(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord) (int, error) {
	for _, r := range recs {
		if r.Symbol == f.symbol {
			return 0, errSaveInjected
		}
	}
	return f.ScoreStore.SaveAnalytics(ctx, recs, prev)
}

// A run saves on several connections while it scores; a failed save ends
// the run with its error, and what the run counts as scored is what it
// stored. The next run, with the failure gone, scores the rest, and a run
// with the candle cache scores every asset as one without it does.
func TestScoreSaveFailureAndCache(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	ctx := context.Background()
	if err := in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, clk.t)); err != nil {
		t.Fatal(err)
	}
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)); err != nil {
		t.Fatal(err)
	}
	tickers, err := db.Tickers(ctx, spot)
	if err != nil || len(tickers) < 100 {
		t.Fatalf("%d tickers, %v; want a universe of 100 or more", len(tickers), err)
	}
	// The failing asset's batch is not the run's first
	// (a swing run starts half way through the list: staggered).
	failing := &worker.Scorer{Store: failingSaves{ScoreStore: db, symbol: tickers[len(tickers)/4].Symbol}, Region: "global",
		Logger: discard(), Now: clk.now, Candles: store.NewCandleCache(1000)}
	scored, _, err := failing.Score(ctx, domain.Crypto, analytics.Swing)
	if !errors.Is(err, errSaveInjected) {
		t.Fatalf("run with a failing save: %v; want the save's error", err)
	}
	list, err := db.AnalyticsList(ctx, domain.Crypto, analytics.Swing)
	if err != nil || len(list) != scored || scored == 0 || scored >= len(tickers) {
		t.Fatalf("run counted %d scored, %d reports stored (%v); want the same count, some but not all of %d", scored, len(list), err, len(tickers))
	}

	cached := &worker.Scorer{Store: db, Region: "global", Logger: discard(), Now: clk.now, Candles: failing.Candles}
	n, _, err := cached.Score(ctx, domain.Crypto, analytics.Swing)
	if err != nil || n == 0 {
		t.Fatalf("next run scored %d, %v; want the assets left", n, err)
	}
	withCache := dumpAnalytics(t, db)

	// The same from nothing, without the cache: the same reports.
	in2, db2 := newIngester(t, clk)
	if err := in2.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, clk.t)); err != nil {
		t.Fatal(err)
	}
	if err := in2.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)); err != nil {
		t.Fatal(err)
	}
	plain := &worker.Scorer{Store: db2, Region: "global", Logger: discard(), Now: clk.now}
	all, _, err := plain.Score(ctx, domain.Crypto, analytics.Swing)
	if err != nil || scored+n != all {
		t.Fatalf("without the cache, from nothing: %d scored, %v; want the two runs' %d + %d", all, err, scored, n)
	}
	reports := func(rows []string) []string { // reports only: snapshots and events depend on the runs' split
		var out []string
		for _, r := range rows {
			if strings.Count(r, "|") == 8 {
				out = append(out, r)
			}
		}
		return out
	}
	if diff := cmp.Diff(reports(dumpAnalytics(t, db2)), reports(withCache)); diff != "" {
		t.Fatalf("reports scored through the cache differ from reports scored without it (-without +with):\n%.2000s", diff)
	}
}

// At a close, a run leaves the candles that have just ended to the run
// their closing read triggers (store.RescoreQuery.Settle): a run for named
// symbols (the trigger's) rescores none of them before their closing read
// is stored (a write of their last open state triggered it), and rescores
// them at once after it (the read marks them final); the tick's rescores
// none until the settle time has passed, then every one the closing read
// did not reach.
func TestTickLeavesTheCloseToTheClosingRead(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	ctx := context.Background()
	if err := in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, clk.t)); err != nil {
		t.Fatal(err)
	}
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)); err != nil {
		t.Fatal(err)
	}
	sc := &worker.Scorer{Store: db, Region: "global", Logger: discard(), Now: clk.now}
	all, _, err := sc.Score(ctx, domain.Crypto, analytics.Swing)
	if err != nil || all < 200 {
		t.Fatalf("first scoring: %d assets (%v), want every spot symbol", all, err)
	}
	clk.t = time.Date(2026, 11, 22, 12, 0, 5, 0, time.UTC) // the 08:00 candle ended at 12:00
	if n, _, err := sc.Score(ctx, domain.Crypto, analytics.Swing); err != nil || n != 0 {
		t.Fatalf("the tick's run 5 s after the close rescored %d (%v), want none", n, err)
	}
	if n, _, err := sc.ScoreSymbols(ctx, domain.Crypto, analytics.Swing, []string{"BTC_USDT"}); err != nil || n != 0 {
		t.Fatalf("a triggered run before the closing read rescored %d (%v), want none", n, err)
	}
	if _, err := in.IngestCandles(ctx, spot, domain.TF4h, []string{"BTC_USDT"}); err != nil { // the closing read
		t.Fatal(err)
	}
	if n, _, err := sc.ScoreSymbols(ctx, domain.Crypto, analytics.Swing, []string{"BTC_USDT"}); err != nil || n != 1 {
		t.Fatalf("the closing read's run rescored %d (%v), want BTC_USDT", n, err)
	}
	clk.t = clk.t.Add(45 * time.Second)
	if n, _, err := sc.Score(ctx, domain.Crypto, analytics.Swing); err != nil || n != all-1 {
		t.Fatalf("the tick's run 50 s after the close rescored %d (%v), want the %d the closing read did not", n, err, all-1)
	}
}
