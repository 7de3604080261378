package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

var spot = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newIngester(t *testing.T, clk *clock) (*worker.Ingester, *store.DB) {
	t.Helper()
	db := storetest.New(t)
	reg, err := feeds.New(feeds.Config{Names: []string{"synthetic"}, Now: clk.now, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return &worker.Ingester{Store: db, Feeds: reg, Logger: nil, Now: clk.now}, db
}

// dump reads every candle and ticker row of the schema, in a stable order.
func dump(t *testing.T, db *store.DB) (candles, tickers []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT concat_ws('|', market, exchange, symbol, timeframe, open_time, open, high, low, close, volume, updated_at) FROM candles ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		candles = append(candles, s)
	}
	rows.Close()
	rows, err = db.Pool.Query(ctx, `SELECT concat_ws('|', market, exchange, instrument, symbol, price, change_pct, volume, updated_at) FROM tickers ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		tickers = append(tickers, s)
	}
	rows.Close()
	return candles, tickers
}

func TestIngestTwiceLeavesIdenticalRows(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	ctx := context.Background()
	tick := clk.t.Truncate(time.Minute)
	run := func() {
		if err := in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, tick)); err != nil {
			t.Fatal(err)
		}
		if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF1h, tick)); err != nil {
			t.Fatal(err)
		}
	}
	run()
	c1, t1 := dump(t, db)
	if len(c1) < 200*worker.InitialCandles || len(t1) < 200 {
		t.Fatalf("first ingest stored %d candles and %d tickers, want ≥ %d and ≥ 200", len(c1), len(t1), 200*worker.InitialCandles)
	}
	run()
	c2, t2 := dump(t, db)
	if diff := cmp.Diff(c1, c2); diff != "" {
		t.Fatalf("candles changed on re-run (-first +second):\n%.2000s", diff)
	}
	// Tickers are replaced (same values, same clock): identical apart from nothing.
	if diff := cmp.Diff(t1, t2); diff != "" {
		t.Fatalf("tickers changed on re-run (-first +second):\n%.2000s", diff)
	}

	// Later, prices move and new candles appear; the series resumes.
	clk.t = clk.t.Add(2*time.Hour + 17*time.Second)
	run()
	c3, t3 := dump(t, db)
	if len(c3) <= len(c2) {
		t.Fatalf("no new candles after 2 h: %d → %d", len(c2), len(c3))
	}
	if cmp.Equal(t1, t3) {
		t.Fatal("tickers did not move between ingests")
	}
	h, err := db.FeedHealthOf(ctx, spot, "tickers")
	if err != nil || h.LastSuccessAt == nil || h.Failing() {
		t.Fatalf("tickers health = %+v, %v", h, err)
	}
}

func TestIngestBadPayloadIsPermanent(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	in, _ := newIngester(t, clk)
	in.Logger = discard()
	err := in.HandleIngestCandles(context.Background(), asynq.NewTask(worker.TypeIngestCandles, []byte("{")))
	if err == nil || !isSkipRetry(err) {
		t.Fatalf("bad payload: err = %v, want SkipRetry", err)
	}
	b, _ := json.Marshal(worker.IngestPayload{Market: domain.Crypto, Exchange: "binance", Instrument: "spot", Timeframe: "2h"})
	if err := in.HandleIngestCandles(context.Background(), asynq.NewTask(worker.TypeIngestCandles, b)); !isSkipRetry(err) {
		t.Fatalf("bad timeframe: err = %v, want SkipRetry", err)
	}
}

func TestBackfillResumes(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	ctx := context.Background()
	syms := []string{"BTC_USDT", "ETH_USDT"}
	start := clk.t.AddDate(0, 0, -60) // 1440 hourly candles: two pages each
	var events []worker.BackfillEvent
	n, err := in.Backfill(ctx, db, spot, domain.TF1h, syms, start, func(ev worker.BackfillEvent) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	want := 2 * (int(clk.t.Sub(domain.TF1h.Truncate(start))/time.Hour) + 1)
	if n != want {
		t.Fatalf("backfilled %d candles, want %d", n, want)
	}
	cs, _ := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}, 5000)
	if len(cs) != want/2 || !cs[0].Time.Equal(domain.TF1h.Truncate(start)) {
		t.Fatalf("stored %d candles from %v", len(cs), cs[0].Time)
	}
	if len(events) == 0 || !events[len(events)-1].SymbolDone {
		t.Fatalf("progress events: %+v", events)
	}
	// A second run resumes from the saved progress: it re-reads only the newest candle.
	clk.t = clk.t.Add(time.Hour)
	n, err = in.Backfill(ctx, db, spot, domain.TF1h, syms, start, nil)
	if err != nil || n != 4 {
		t.Fatalf("resumed backfill read %d candles (%v), want 4 (last stored + 1 new, per symbol)", n, err)
	}
}

// failingWrites is the store with Postgres refusing the ticker write.
type failingWrites struct{ *store.DB }

func (failingWrites) ReplaceTickers(context.Context, domain.Combination, []domain.Ticker) error {
	return domain.Errorf(domain.EUNAVAILABLE, "the database is unavailable; retry later")
}

// A failure on this side (Postgres, the task's own time-out) fails the
// task but is not the feed's error: feed health, and so the api's 502
// "upstream failing", only reflect the feed.
func TestIngestStoreFailureIsNotAFeedError(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	in.Store = failingWrites{db}
	if err := in.HandleIngestTickers(context.Background(), worker.NewIngestTickersTask(spot, clk.t)); err == nil {
		t.Fatal("the task succeeded although its write failed")
	}
	h, err := db.FeedHealthOf(context.Background(), spot, "tickers")
	if err != nil {
		t.Fatal(err)
	}
	if h.LastErrorAt != nil || h.Failing() {
		t.Fatalf("feed health %+v: a database failure was recorded as the feed's", h)
	}
}

// recordingSink is a ChangeSink wanting the series of one timeframe.
type recordingSink struct {
	tf      domain.Timeframe
	changed []store.CandleKey
}

func (s *recordingSink) WantsCandles(_ domain.Market, _ string, tf domain.Timeframe) bool {
	return tf == s.tf
}
func (s *recordingSink) CandlesChanged(_ context.Context, changed []store.CandleKey) {
	s.changed = append(s.changed, changed...)
}
func (s *recordingSink) FundamentalsChanged(context.Context, domain.Market, []string) {}

// Ingest announces the changed series of the timeframes its sink wants,
// and stores the others without looking for what changed.
func TestIngestAnnouncesOnlyWantedSeries(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	sink := &recordingSink{tf: domain.TF4h}
	in.Changes = sink
	ctx := context.Background()
	syms := []string{"BTC_USDT", "ETH_USDT"}
	if _, err := in.IngestCandles(ctx, spot, domain.TF1h, syms); err != nil {
		t.Fatal(err)
	}
	if len(sink.changed) != 0 {
		t.Fatalf("1h series announced %v; the sink wants 4h only", sink.changed)
	}
	if c, _ := dump(t, db); len(c) < 2*worker.InitialCandles {
		t.Fatalf("stored %d candles of the unwanted timeframe, want ≥ %d", len(c), 2*worker.InitialCandles)
	}
	if _, err := in.IngestCandles(ctx, spot, domain.TF4h, syms); err != nil {
		t.Fatal(err)
	}
	if len(sink.changed) != 2 {
		t.Fatalf("4h series announced %v, want both", sink.changed)
	}
}

// The trigger wants the series scoring reads: the analytics source's, in
// a timeframe of a style the market is scored in.
func TestScoreTriggerWantsScoredSeries(t *testing.T) {
	tr := &worker.ScoreTrigger{Region: "global"}
	fxs := domain.AnalyticsSources("global", domain.Forex, nil)
	if len(fxs) == 0 {
		t.Fatal("no forex source")
	}
	fx := fxs[0]
	for _, c := range []struct {
		m    domain.Market
		ex   string
		tf   domain.Timeframe
		want bool
	}{
		{domain.Crypto, "binance", domain.TF15m, true},
		{domain.Crypto, "binance", domain.TF4h, true},
		{domain.Crypto, "binance", domain.TF5m, false},
		{domain.Crypto, "some-other-exchange", domain.TF4h, false},
		{domain.Forex, fx.Exchange, domain.TF4h, true},
		{domain.Forex, fx.Exchange, domain.TF15m, false}, // forex is scored in swing only
	} {
		if got := tr.WantsCandles(c.m, c.ex, c.tf); got != c.want {
			t.Errorf("WantsCandles(%s, %s, %s) = %v, want %v", c.m, c.ex, c.tf, got, c.want)
		}
	}
}

// TestRESTLeavesThePushedEdgeAlone: a REST read never stores the candle
// that was still forming when it was asked for, of a series a push feed
// delivers: of every series once the combination is live, and of the
// series a partial plan carries (Alpaca's free plan) while REST keeps
// polling them all. A read made before a minute close and written after it
// would otherwise replace the closed candle the push feed stored in between
// with its last open state; nothing would repair it while the push feed is
// live, and a REST poll of a pushed series resumes past it, from the
// newest candle the push feed stored. The same read stores it when the series
// is not pushed.
func TestRESTLeavesThePushedEdgeAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		pushed worker.PushedSeries
		kept   bool
	}{
		{"combination live", worker.PushedSeries{All: true}, true},
		{"the series pushed, not every one", worker.PushedSeries{Symbols: map[string]bool{"BTC_USDT": true}}, true},
		{"another series pushed", worker.PushedSeries{Symbols: map[string]bool{"ETH_USDT": true}}, false},
		{"not pushed", worker.PushedSeries{}, false},
	} {
		clk := &clock{t: time.Date(2026, 11, 26, 15, 4, 30, 0, time.UTC)}
		in, db := newIngester(t, clk)
		in.Pushed = func(_ context.Context, c domain.Combination, tf domain.Timeframe) worker.PushedSeries {
			if c != spot || tf != domain.TF1m {
				t.Errorf("Pushed(%s, %s), want binance spot 1m", c, tf)
			}
			return tc.pushed
		}
		key := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1m}
		forming := clk.t.Truncate(time.Minute)
		pushed := domain.Candle{Time: forming, Open: 1, High: 2, Low: 0.5, Close: 1.5, Volume: 99999} // the push feed's closed state
		if err := db.UpsertCandles(ctx, key, []domain.Candle{pushed}); err != nil {
			t.Fatal(err)
		}
		n, err := in.IngestCandles(ctx, spot, domain.TF1m, []string{"BTC_USDT"})
		if err != nil {
			t.Fatal(err)
		}
		// REST resumes at the newest stored candle, the one forming (a
		// few before it for a series pushed while REST polls it).
		cs, err := db.Candles(ctx, key, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 || !cs[len(cs)-1].Time.Equal(forming) {
			t.Fatalf("%s: stored %+v, want the candle of %s last", tc.name, cs, forming)
		}
		if kept := cs[len(cs)-1] == pushed; kept != tc.kept {
			t.Errorf("%s: the forming candle is %+v after a REST read (%d stored), pushed %+v; want it kept: %v", tc.name, cs[len(cs)-1], n, pushed, tc.kept)
		}
	}
}

// TestRESTRereadsSeriesPushedWhileItPolls: of a series a partial plan
// pushes while REST keeps polling it, REST reads the last few closed
// candles again, not only from the newest stored one: the push feed moved
// that series' newest candle, so an older candle REST wrote after the
// push feed's (a read made before a correction, Alpaca's updated bar,
// written after it) is read and stored again by the next poll. A series
// not pushed resumes at its newest candle, as always.
func TestRESTRereadsSeriesPushedWhileItPolls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 26, 15, 4, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Pushed = func(context.Context, domain.Combination, domain.Timeframe) worker.PushedSeries {
		return worker.PushedSeries{Symbols: map[string]bool{"BTC_USDT": true}}
	}
	minute := clk.t.Truncate(time.Minute)
	stale := domain.Candle{Time: minute.Add(-2 * time.Minute), Open: 1, High: 2, Low: 0.5, Close: 1.5, Volume: 1} // a late REST write
	for _, sym := range []string{"BTC_USDT", "ETH_USDT"} {
		key := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF1m}
		pushed := domain.Candle{Time: minute.Add(-time.Minute), Open: 1, High: 2, Low: 0.5, Close: 1.5, Volume: 2} // the push feed's newest
		if err := db.UpsertCandles(ctx, key, []domain.Candle{stale, pushed}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.IngestCandles(ctx, spot, domain.TF1m, []string{"BTC_USDT", "ETH_USDT"}); err != nil {
		t.Fatal(err)
	}
	p, _ := in.Feeds.For(spot)
	for sym, reread := range map[string]bool{"BTC_USDT": true, "ETH_USDT": false} {
		cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: domain.TF1m}, 10)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(cs, func(c domain.Candle) bool { return c.Time.Equal(stale.Time) })
		final, err := p.Candles(ctx, spot, sym, domain.TF1m, stale.Time, 1)
		if err != nil || i < 0 {
			t.Fatalf("%s: stored %+v, feed %v", sym, cs, err)
		}
		if got := cs[i] == final[0]; got != reread {
			t.Errorf("%s: the stale candle is %+v after a poll, the feed's %+v; want it read again: %v", sym, cs[i], final[0], reread)
		}
	}
}

// TestClosingReadLoadsNoHistory: a 1m task of a market's closing read
// (worker.HeaderClosing) loads no new series' history, whatever turn is
// free; the next task does.
func TestClosingReadLoadsNoHistory(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	ctx := context.Background()
	series := func() int { return minuteSeries(t, db) }
	task := worker.NewIngestCandlesTask(spot, domain.TF1m, clk.t.Truncate(time.Minute))
	closing := asynq.NewTaskWithHeaders(task.Type(), task.Payload(), map[string]string{worker.HeaderClosing: "1"})
	if err := in.HandleIngestCandles(ctx, closing); err != nil {
		t.Fatal(err)
	}
	if n := series(); n != 0 {
		t.Fatalf("the closing read loaded the history of %d new series, want none", n)
	}
	if err := in.HandleIngestCandles(ctx, task); err != nil {
		t.Fatal(err)
	}
	if n := series(); n < 200 {
		t.Fatalf("the next task loaded %d series, want every one (≥ 200)", n)
	}
}

// TestMinuteHistoryTakesItsTurn: a scheduled 1m task of a feed read one
// symbol a request loads new series' history within the minute lane's
// one history turn: none while another task holds it, and, when the turn
// ends, no more than it has read (here one series), the rest at the next
// tick.
func TestMinuteHistoryTakesItsTurn(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	ctx := context.Background()
	series := func() int { return minuteSeries(t, db) }
	tick := func() {
		t.Helper()
		if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF1m, clk.t.Truncate(time.Minute))); err != nil {
			t.Fatal(err)
		}
	}

	release := in.TakeHistorySlots()
	tick()
	if n := series(); n != 0 {
		t.Fatalf("with the history turn taken: %d series loaded, want none", n)
	}
	release()

	in.BoundMinuteHistory(time.Nanosecond, 0)
	tick()
	if n := series(); n != 1 {
		t.Fatalf("with a turn that ends at once: %d series loaded, want 1", n)
	}
	in.BoundMinuteHistory(0, 0)
	clk.t = clk.t.Add(time.Minute)
	tick()
	if n := series(); n < 200 {
		t.Fatalf("at the next tick: %d series loaded, want every one (≥ 200)", n)
	}
}

// minuteSeries is how many binance series have 1m candles stored.
func minuteSeries(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT symbol) FROM candles WHERE exchange = 'binance' AND timeframe = '1m'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHistoryWaitsForACloseRescoring: while a close is rescored in the
// process (worker.Rescoring), a display-only timeframe's history load
// waits, and loads once the close has ended; the polls of series with
// their history do not wait.
func TestHistoryWaitsForACloseRescoring(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	in.Logger = discard()
	r := &worker.Rescoring{Quiet: time.Millisecond, MaxWait: time.Hour}
	in.Rescoring = r
	ctx := context.Background()
	tick := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF1m, clk.t.Truncate(time.Minute)))
		}()
		return done
	}

	end := r.Begin()
	done := tick()
	for r.Waiting() == 0 { // poll: the load waits before its first history request
		select {
		case err := <-done:
			t.Fatalf("the history loaded without waiting for the close (%v): %d series", err, minuteSeries(t, db))
		default:
			time.Sleep(time.Millisecond)
		}
	}
	if n := minuteSeries(t, db); n != 0 {
		t.Fatalf("%d series' history loaded while a close is rescored, want none", n)
	}
	end()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := minuteSeries(t, db); n < 200 {
		t.Fatalf("after the close: %d series loaded, want every one (≥ 200)", n)
	}

	end = r.Begin()
	defer end()
	clk.t = clk.t.Add(time.Minute)
	done = tick()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		if r.Waiting() > 0 {
			end()
			t.Fatal("a poll of series with their history waited for the close")
		}
		time.Sleep(time.Millisecond)
	}
}
