package worker_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// scoresStocks4h is a change sink that wants the stocks' scored series
// (4h, the swing style's) and records nothing.
type scoresStocks4h struct{}

func (scoresStocks4h) WantsCandles(m domain.Market, _ string, tf domain.Timeframe) bool {
	return m == domain.Stocks && tf == domain.TF4h
}
func (scoresStocks4h) CandlesChanged(context.Context, []store.CandleKey)            {}
func (scoresStocks4h) FundamentalsChanged(context.Context, domain.Market, []string) {}

// TestAlpacaBulkIngest: against the Alpaca simulator, one candle task reads
// every stock of an exchange in a few multi-symbol requests and stores
// what the simulator serves; on a cold start the display-only timeframes
// wait for the scored one's first complete pass; and once a poll has
// completed, the next starts every series at that poll (less two bars and
// a minute), so stocks that stopped trading hours ago cost no request of
// their own.
func TestAlpacaBulkIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Wednesday 25 November 2026, 14:30 New York: in the session.
	now := time.Date(2026, 11, 25, 19, 30, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	sim, reg := alpacaSim(t, 11, clock, exchangesim.AlpacaConfig{Assets: 120, Inactive: 5, Plan: exchangesim.AlpacaPaid}, feeds.AlpacaSIP)
	db := storetest.New(t)
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	syms, err := reg.Providers()[0].Symbols(ctx, nasdaq)
	if err != nil || len(syms) < 30 {
		t.Fatalf("nasdaq: %d symbols, %v", len(syms), err)
	}
	requests := func() int64 { return sim.Stats().Alpaca.Data.Requests }
	stored := func(tf domain.Timeframe) int {
		t.Helper()
		latest, err := db.LatestCandleTimes(ctx, domain.Stocks, "nasdaq", tf, syms)
		if err != nil {
			t.Fatal(err)
		}
		return len(latest)
	}

	// A display-only timeframe first: nothing is loaded yet.
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if n := stored(domain.TF1m); n != 0 {
		t.Fatalf("1m before the scored 4h: %d series loaded, want none", n)
	}

	before := requests()
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF4h, now)); err != nil {
		t.Fatal(err)
	}
	if n, sent := stored(domain.TF4h), requests()-before; n < len(syms)*9/10 || sent > 12 {
		t.Fatalf("4h: %d of %d series in %d requests; want (nearly) every one in a few multi-symbol requests", n, len(syms), sent)
	}
	got, err := db.Candles(ctx, store.CandleKey{Market: domain.Stocks, Exchange: "nasdaq", Symbol: syms[0], Timeframe: domain.TF4h}, 3)
	if err != nil || len(got) == 0 {
		t.Fatalf("%s 4h: %v, %v", syms[0], got, err)
	}

	// history(n) is how many series have at least n 1m candles.
	history := func(n int) int {
		t.Helper()
		var got int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT symbol FROM candles WHERE market = 'stocks'
			AND exchange = 'nasdaq' AND timeframe = '1m' GROUP BY symbol HAVING count(*) >= $1) s`, n).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// While every history slot is taken (other display-only loads under
	// way), the 1m tick still polls the new series' newest bars, and does
	// not fail: their history waits for a later tick.
	release := in.TakeHistorySlots()
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if n, deep := stored(domain.TF1m), history(10); n < len(syms)/2 || deep != 0 {
		t.Fatalf("1m with every history slot taken: %d series polled (want most of %d), %d with a history (want none)", n, len(syms), deep)
	}
	release()

	// The history of the series polled so follows in a 1m task's turn
	// (two minutes by default; here at once), after at least one chunk: the
	// lane's slot is not held for minutes, and the rest follows at the
	// next tick.
	in.BoundMinuteHistory(time.Nanosecond, 10)
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if deep := history(100); deep == 0 || deep > 10 {
		t.Fatalf("1m with a turn that ends at once: %d series with a history, want the first chunk's (at most 10)", deep)
	}
	// A process started since (it does not know which series it polled
	// without their history) finds them in the store and loads them.
	in = &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}}
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	// (A stock that trades rarely has fewer than 100 bars in its history.)
	if deep, n := history(100), stored(domain.TF1m); deep < n*9/10 || n < len(syms)/2 {
		t.Fatalf("1m in a new process: %d of %d series with a history, want (nearly) every one (of %d symbols)", deep, n, len(syms))
	}

	// Two hours on: the first poll of this timeframe by a fresh process
	// starts each series where it stands; the next one starts them all at
	// that poll, one request for the exchange.
	now = now.Add(2 * time.Hour)
	fresh := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}}
	for range 2 {
		now = now.Add(time.Minute)
		if err := fresh.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Minute)
	before = requests()
	if err := fresh.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)); err != nil {
		t.Fatal(err)
	}
	if sent := requests() - before; sent != 1 {
		t.Errorf("a poll after a complete one: %d requests, want 1 (every series from that poll)", sent)
	}
	latest, err := db.LatestCandleTimes(ctx, domain.Stocks, "nasdaq", domain.TF1m, syms[:1])
	if err != nil || !latest[syms[0]].After(now.Add(-5*time.Minute)) {
		t.Errorf("%s: newest 1m candle %v at %v", syms[0], latest[syms[0]], now)
	}
}

// TestBellReadsAWholeExchangeInFewRequests: at the bell the closing read
// of Nasdaq's 5,234 simulated stocks (the scale benchmark's universe) asks
// for every series' last bars in the provider's own batches of ≈ 1,500
// symbols (a URL of 8 kB): four requests a timeframe. Cut into calls of
// 1,000 symbols first, it took six, and the bell's 4h and 1m reads of
// every exchange (28 requests) overflowed the free plan's window of 22,
// so Nasdaq's bars waited for the next one (+8.6 s).
func TestBellReadsAWholeExchangeInFewRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim, in, nasdaq, syms, now := nasdaqAtTheBell(t)
	for _, tc := range []struct {
		tf   domain.Timeframe
		last time.Time // every series' newest stored candle
	}{
		{domain.TF1m, now.Truncate(time.Minute).Add(-2 * time.Minute)},
		{domain.TF4h, now.Truncate(time.Hour).Add(-5 * time.Hour)}, // 16:00 UTC: the 4h bar that ends at the bell
	} {
		latest := map[string]time.Time{}
		for _, s := range syms {
			latest[s] = tc.last
		}
		before := sim.Stats().Alpaca.Data.Requests
		rctx := ctx
		if tc.tf == domain.TF4h {
			rctx = hostbudget.WithClass(ctx, hostbudget.Live) // the close's read: its requests side by side
		}
		n, err := in.IngestCandlesFrom(rctx, nasdaq, tc.tf, syms, latest)
		if err != nil || n < len(syms)/2 {
			t.Fatalf("%s: %d candles stored, %v", tc.tf, n, err)
		}
		if sent := sim.Stats().Alpaca.Data.Requests - before; sent > 4 {
			t.Errorf("%s at the bell: %d requests for %d symbols, want 4 (batches of ≈ 1,500)", tc.tf, sent, len(syms))
		}
	}
}

// BenchmarkBellRead reads the 4h bars that end at the bell of Nasdaq's
// 5,234 simulated stocks (four requests of ≈ 1,500 symbols) and stores
// them, as the closing read does: its requests one at a time (Urgent) or
// side by side (Live, liveChunkReads at once). The simulator runs in the
// benchmark's process.
//
//	go test ./worker -run '^$' -bench BellRead -benchtime 20x
func BenchmarkBellRead(b *testing.B) {
	ctx := context.Background()
	_, in, nasdaq, syms, now := nasdaqAtTheBell(b)
	latest := map[string]time.Time{}
	for _, s := range syms {
		latest[s] = now.Truncate(time.Hour).Add(-5 * time.Hour)
	}
	for _, class := range []hostbudget.Class{hostbudget.Urgent, hostbudget.Live} {
		b.Run(class.String(), func(b *testing.B) {
			cctx := hostbudget.WithClass(ctx, class)
			for b.Loop() {
				if n, err := in.IngestCandlesFrom(cctx, nasdaq, domain.TF4h, syms, latest); err != nil || n < len(syms)/2 {
					b.Fatalf("%d candles, %v", n, err)
				}
			}
		})
	}
}

// nasdaqAtTheBell is an ingester of the Alpaca simulator's 11,500 stocks
// (the scale benchmark's universe) at the bell, Wednesday 25 November 2026
// 16:00:01 New York, and Nasdaq's symbols.
func nasdaqAtTheBell(tb testing.TB) (*exchangesim.Sim, *worker.Ingester, domain.Combination, []string, time.Time) {
	tb.Helper()
	now := time.Date(2026, 11, 25, 21, 0, 1, 0, time.UTC)
	clock := func() time.Time { return now }
	sim, reg := alpacaSim(tb, 1, clock, exchangesim.AlpacaConfig{Assets: 11500, Plan: exchangesim.AlpacaPaid}, feeds.AlpacaIEX)
	in := &worker.Ingester{Store: storetest.New(tb), Feeds: reg, Logger: discard(), Now: clock}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	syms, err := reg.Providers()[0].Symbols(context.Background(), nasdaq)
	if err != nil || len(syms) < 5000 {
		tb.Fatalf("nasdaq: %d symbols, %v", len(syms), err)
	}
	return sim, in, nasdaq, syms, now
}

// alpacaSim serves the simulator's Alpaca part (seed, ac) on clock for the
// test, and returns it with a feed registry of Alpaca on the given feed.
func alpacaSim(t testing.TB, seed int64, clock func() time.Time, ac exchangesim.AlpacaConfig, feed string) (*exchangesim.Sim, *feeds.Registry) {
	t.Helper()
	sim := exchangesim.New(exchangesim.Config{Seed: seed, Spot: 2, Perpetual: 1, Now: clock, Alpaca: ac})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{"alpaca"}, AlpacaKeyID: "k", AlpacaSecret: "s", AlpacaFeed: feed,
		BaseURLs: map[string]string{"alpaca": srv.URL, "alpaca-data": srv.URL}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return sim, reg
}

// TestBulkChunksBoundAHistoryLoad: a bulk read is one call while its
// series bring a few candles each (a poll), and is cut into calls of a
// thousand series where each brings its history.
func TestBulkChunksBoundAHistoryLoad(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 21, 0, 1, 0, time.UTC)
	syms := make([]string, 5000)
	polled, fresh := map[string]time.Time{}, map[string]time.Time{}
	for i := range syms {
		syms[i] = fmt.Sprintf("S%04d", i)
		polled[syms[i]] = now.Add(-3 * time.Minute)
	}
	if got := worker.BulkChunks(syms, polled, domain.TF1m, now); len(got) != 1 || len(got[0]) != len(syms) {
		t.Errorf("a poll of %d series: %d calls, want one", len(syms), len(got))
	}
	got := worker.BulkChunks(syms, fresh, domain.TF1m, now)
	if len(got) != 5 || len(got[0]) != 1000 {
		t.Errorf("the history of %d series: %d calls (the first of %d), want 5 of 1,000", len(syms), len(got), len(got[0]))
	}
	// A series stalled for a year brings a year of bars: it weighs as much.
	polled[syms[0]] = now.AddDate(-1, 0, 0)
	if got := worker.BulkChunks(syms, polled, domain.TF1m, now); len(got) != 2 || len(got[0]) != 1 {
		t.Errorf("a poll with one series stalled for a year: calls of %v series, want it alone, then the rest", lens(got))
	}
}

func lens(chunks [][]string) []int {
	out := make([]int, len(chunks))
	for i, c := range chunks {
		out[i] = len(c)
	}
	return out
}

// TestDisplayOnlyPollsFollowTheirCadence: against the Alpaca simulator, the
// scheduled poll of a display-only timeframe (1h here) reads the provider
// when one of its candles has closed since the last poll, or when the
// forming candle is worker's refresh old (15 minutes for 1h); at the ticks
// between it sends nothing. The scored timeframe (4h), 1m and a task that
// is not a periodic tick (a catch-up) poll whenever they run.
func TestDisplayOnlyPollsFollowTheirCadence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Wednesday 25 November 2026, 14:50 New York: in the session.
	now := time.Date(2026, 11, 25, 19, 50, 20, 0, time.UTC) // 20 s into the minute: the window that opens a minute is not bulk work's
	clock := func() time.Time { return now }
	sim, reg := alpacaSim(t, 12, clock, exchangesim.AlpacaConfig{Assets: 60, Plan: exchangesim.AlpacaPaid}, feeds.AlpacaSIP)
	db := storetest.New(t)
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	// sent runs a task and returns how many data requests it sent.
	sent := func(tf domain.Timeframe, periodic bool) int64 {
		t.Helper()
		task := worker.NewIngestCandlesTask(nasdaq, tf, now)
		if periodic {
			task = asynq.NewTaskWithHeaders(task.Type(), task.Payload(), map[string]string{worker.HeaderSeries: "ingest:candles:" + string(tf)})
		}
		before := sim.Stats().Alpaca.Data.Requests
		if err := in.HandleIngestCandles(ctx, task); err != nil {
			t.Fatalf("%s at %s: %v", tf, now.Format("15:04:05"), err)
		}
		return sim.Stats().Alpaca.Data.Requests - before
	}
	if n := sent(domain.TF4h, true); n == 0 {
		t.Fatal("the scored 4h: no request")
	}
	steps := []struct {
		at   string // UTC
		tf   domain.Timeframe
		poll bool
		why  string
	}{
		{"19:50:20", domain.TF1h, true, "first poll of this process"},
		{"19:51:20", domain.TF1h, false, "a minute after a poll, no close"},
		{"19:51:20", domain.TF1m, true, "1m polls every tick"},
		{"19:51:20", domain.TF4h, true, "the scored timeframe polls every tick"},
		{"19:55:20", domain.TF1h, false, "five minutes after a poll, no close"},
		{"20:00:30", domain.TF1h, true, "the 19:00 1h candle closed at 20:00"},
		{"20:01:20", domain.TF1h, false, "a minute after the close's poll"},
		{"20:14:20", domain.TF1h, false, "under 15 minutes after a poll"},
		{"20:16:20", domain.TF1h, true, "the forming candle's refresh (15 minutes)"},
	}
	for _, s := range steps {
		at, err := time.Parse("15:04:05", s.at)
		if err != nil {
			t.Fatal(err)
		}
		now = time.Date(2026, 11, 25, at.Hour(), at.Minute(), at.Second(), 0, time.UTC)
		if n := sent(s.tf, true); (n > 0) != s.poll {
			t.Errorf("%s %s (%s): %d requests, want a poll %v", s.at, s.tf, s.why, n, s.poll)
		}
	}
	now = now.Add(time.Minute)
	if n := sent(domain.TF1h, false); n == 0 {
		t.Error("a 1h task that is not a periodic tick (a closed market's catch-up) sent no request")
	}

	// Which polls read candles that have just closed (hostbudget.Live):
	// the 1m bars at every tick, the scored 4h once the candle forming at
	// its last poll (12:00-16:00 New York) has closed.
	periodic := func(tf domain.Timeframe) *asynq.Task {
		task := worker.NewIngestCandlesTask(nasdaq, tf, now)
		return asynq.NewTaskWithHeaders(task.Type(), task.Payload(), map[string]string{worker.HeaderSeries: "ingest:candles:" + string(tf)})
	}
	now = time.Date(2026, 11, 25, 20, 30, 0, 0, time.UTC)
	sent(domain.TF4h, true)
	for _, c := range []struct {
		at   time.Time
		task *asynq.Task
		tf   domain.Timeframe
		live bool
	}{
		{now, periodic(domain.TF1m), domain.TF1m, true},
		{now, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now), domain.TF1m, false},
		{now.Add(time.Minute), periodic(domain.TF4h), domain.TF4h, false},
		{time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC), periodic(domain.TF4h), domain.TF4h, true},
		{time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC), periodic(domain.TF1d), domain.TF1d, false},
	} {
		now = c.at
		if got := in.LiveRead(c.task, nasdaq, c.tf); got != c.live {
			t.Errorf("%s at %s (series %q): a read of closed candles %v, want %v", c.tf, now.Format("15:04"), c.task.Headers()[worker.HeaderSeries], got, c.live)
		}
	}
}

// TestBulkHistoryWaitsForACloseRescoring: a 1m task of a whole exchange
// read in multi-symbol requests polls the new series' newest bars while a
// close is rescored in the process (worker.Rescoring), and loads their
// history once the close has ended.
func TestBulkHistoryWaitsForACloseRescoring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 19, 30, 0, 0, time.UTC) // 14:30 New York, in the session
	clock := func() time.Time { return now }
	_, reg := alpacaSim(t, 12, clock, exchangesim.AlpacaConfig{Assets: 60, Plan: exchangesim.AlpacaPaid}, feeds.AlpacaSIP)
	db := storetest.New(t)
	r := &worker.Rescoring{Quiet: time.Millisecond, MaxWait: time.Hour}
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: clock, Changes: scoresStocks4h{}, Rescoring: r}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF4h, now)); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	polled := func() int {
		return count(`SELECT count(DISTINCT symbol) FROM candles WHERE exchange = 'nasdaq' AND timeframe = '1m'`)
	}
	deep := func() int {
		return count(`SELECT count(*) FROM (SELECT symbol FROM candles WHERE exchange = 'nasdaq' AND timeframe = '1m'
			GROUP BY symbol HAVING count(*) >= 100) s`)
	}

	end := r.Begin()
	done := make(chan error, 1)
	go func() { done <- in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(nasdaq, domain.TF1m, now)) }()
	for r.Waiting() == 0 { // poll: the history waits before its first request
		select {
		case err := <-done:
			t.Fatalf("the history loaded without waiting for the close (%v): %d series with one", err, deep())
		default:
			time.Sleep(time.Millisecond)
		}
	}
	if n, d := polled(), deep(); n < 10 || d != 0 {
		t.Fatalf("while a close is rescored: %d series polled (want their newest bars), %d with a history (want none)", n, d)
	}
	end()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d, n := deep(), polled(); d < n*9/10 {
		t.Fatalf("after the close: %d of %d series with a history, want (nearly) every one", d, n)
	}
}
