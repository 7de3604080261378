package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// The catch-up queue hands out every scored timeframe's job, of every
// combination added, before any display-only one, each group in the order
// added; a display-only job waits while a scored one runs; and a waiting
// worker is handed a job added later, or stops when its context ends.
func TestCatchUpQueueScoredFirst(t *testing.T) {
	t.Parallel()
	q := newCatchUpQueue()
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	okx := domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"}
	q.add([]catchUpJob{{c: spot, tf: "1m"}, {c: spot, tf: "15m", scored: true}, {c: spot, tf: "1h", scored: true}})
	q.add([]catchUpJob{{c: okx, tf: "1m"}})
	q.add([]catchUpJob{{c: okx, tf: "15m", scored: true}})
	var got []string
	for range 5 {
		j, ok := q.next(t.Context())
		if !ok {
			t.Fatal("next gave up with jobs queued")
		}
		got = append(got, j.c.Exchange+"/"+string(j.tf))
		q.done(j)
	}
	want := []string{"binance/15m", "binance/1h", "okx/15m", "binance/1m", "okx/1m"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("jobs taken in order %v, want %v", got, want)
		}
	}

	// While a scored job runs, a display-only one waits for it.
	q.add([]catchUpJob{{c: okx, tf: "4h", scored: true}, {c: okx, tf: "5m"}})
	scored, _ := q.next(t.Context())
	taken := make(chan catchUpJob, 1)
	go func() {
		j, _ := q.next(t.Context())
		taken <- j
	}()
	select {
	case j := <-taken:
		t.Fatalf("%s taken while the scored %s runs", j.tf, scored.tf)
	case <-time.After(200 * time.Millisecond): // a guard: nothing may arrive
	}
	q.done(scored)
	select {
	case j := <-taken:
		if j.tf != "5m" {
			t.Fatalf("waiting worker took %s, want 5m", j.tf)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting worker was not handed the display-only job once the scored one was done")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := q.next(ctx); ok {
		t.Fatal("next returned a job from an empty queue after its context ended")
	}
}

// A catch-up (catchUpJobs, after every start of the push feeds) reads again
// only the series behind: one whose forming candle is stored has nothing
// to catch up on an exchange's push feed, whose kline carries the whole
// candle; one whose newest candle is older has, and so has one with nothing
// stored. A timeframe with no series behind has no job.
func TestCatchUpReadsOnlyTheSeriesBehind(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := storetest.New(t)
	now := time.Date(2026, 12, 1, 20, 29, 32, 0, time.UTC)
	reg, err := feeds.New(feeds.Config{Names: []string{"binance"}})
	if err != nil {
		t.Fatal(err)
	}
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	s := &PushIngest{In: &Ingester{Store: db, Feeds: reg, Now: func() time.Time { return now }}}
	// CUR_USDT: history up to the forming candle of each timeframe;
	// OLD_USDT: up to the one before it (1h, 1d) or the forming one (4h);
	// NEW_USDT: nothing stored.
	seed := func(sym string, tf domain.Timeframe, newest time.Time) {
		cs := make([]domain.Candle, InitialCandles) // loaded (forgetUnloaded keeps it)
		for i := range cs {
			cs[i] = domain.Candle{Time: newest.Add(-time.Duration(len(cs)-1-i) * tf.Duration()), Open: 1, High: 1, Low: 1, Close: 1}
		}
		if err := db.UpsertCandles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: tf}, cs); err != nil {
			t.Fatal(err)
		}
	}
	var plan push.Plan
	plan.Combination = spot
	for _, tf := range []domain.Timeframe{domain.TF1h, domain.TF4h, domain.TF1d} {
		seed("CUR_USDT", tf, tf.Truncate(now))
		if tf == domain.TF4h {
			seed("OLD_USDT", tf, tf.Truncate(now))
		} else {
			seed("OLD_USDT", tf, tf.Truncate(now).Add(-tf.Duration()))
		}
		for _, sym := range []string{"CUR_USDT", "OLD_USDT", "NEW_USDT"} {
			if tf == domain.TF4h && sym == "NEW_USDT" {
				continue
			}
			plan.Series = append(plan.Series, push.Series{Symbol: sym, Timeframe: tf})
		}
	}
	got := map[domain.Timeframe][]string{}
	for _, j := range s.catchUpJobs(ctx, plan, newCandleSink(s)) {
		got[j.tf] = j.symbols
	}
	want := map[domain.Timeframe][]string{domain.TF1h: {"OLD_USDT", "NEW_USDT"}, domain.TF1d: {"OLD_USDT", "NEW_USDT"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("catch-up jobs %v, want %v", got, want)
	}
}

// A catch-up cut short after it let the pushes through (the push feeds
// restarted for a new plan, the worker died) leaves a series with its old
// history, a hole, and the pushed candles after it. The next catch-up
// starts that series where the first one would have (its starting points
// are kept in Redis until each series is stored), not from the newest
// pushed candle, and fills the hole; a series once caught up is forgotten.
func TestCatchUpCutShortRepairsItsHole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, db, _ := simCatchUp(t, nil)
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	const sym, tf = "BTC_USDT", domain.TF1h
	key := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: tf}
	p, _ := s.In.Feeds.For(spot)
	cs, err := p.Candles(ctx, spot, sym, tf, time.Time{}, InitialCandles)
	if err != nil || len(cs) < InitialCandles-1 {
		t.Fatalf("simulator candles: %d, %v", len(cs), err)
	}
	n := len(cs)
	// Stored before the restart: the history up to six hours ago.
	if err := db.UpsertCandles(ctx, key, cs[:n-6]); err != nil {
		t.Fatal(err)
	}
	plan := push.Plan{Combination: spot, Series: []push.Series{{Symbol: sym, Timeframe: tf}}}
	sink := newCandleSink(s)
	first := s.catchUpJobs(ctx, plan, sink)
	if len(first) != 1 || !first[0].latest[sym].Equal(cs[n-7].Time) {
		t.Fatalf("first catch-up: jobs %+v, want one from %s", first, cs[n-7].Time)
	}
	// Cut short before it read the series; the pushes stored the last two
	// candles (the one that closed, the one forming).
	if err := db.UpsertCandles(ctx, key, cs[n-2:]); err != nil {
		t.Fatal(err)
	}
	second := s.catchUpJobs(ctx, plan, sink)
	if len(second) != 1 || !second[0].latest[sym].Equal(cs[n-7].Time) {
		t.Fatalf("catch-up after the cut: jobs %+v, want one from %s (where the first would have started)", second, cs[n-7].Time)
	}
	s.catchUpTimeframe(ctx, second[0], sink)
	if got := caughtUp(t, s, db, key); len(got) < n {
		t.Fatalf("%d candles stored, want %d", len(got), n)
	}
	// Caught up: a third catch-up has nothing to read (the forming candle
	// is stored, and nothing is left unfinished).
	if third := s.catchUpJobs(ctx, plan, sink); len(third) != 0 {
		t.Fatalf("catch-up after the repair: jobs %+v, want none", third)
	}
}

// Listing the plans again restarts only the kind of source whose plans
// changed: Alpaca's stream picking other symbols (as two minutes into a
// cold start, when the screener has its volumes) leaves the exchanges'
// websockets, and their catch-up, running.
func TestReplanRestartsOnlyTheKindThatChanged(t *testing.T) {
	t.Parallel()
	reg, err := feeds.New(feeds.Config{Names: []string{"binance", "alpaca"}, AlpacaKeyID: "k", AlpacaSecret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	if sourceOf(reg, spot) != exchangePush || sourceOf(reg, nasdaq) != alpacaPush {
		t.Fatalf("sources: %v, %v", sourceOf(reg, spot), sourceOf(reg, nasdaq))
	}
	var mu sync.Mutex
	lists := 0
	starts := map[string][]string{} // by exchange: the plans' first symbol at each start
	s := &PushIngest{In: &Ingester{Feeds: reg}, ReplanEvery: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	s.listPlans = func(context.Context) ([]push.Plan, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		lists++
		stock := fmt.Sprintf("S%d", lists/2) // a new pick every other listing
		return []push.Plan{{Combination: spot, Symbols: []string{"BTC_USDT"}}, {Combination: nasdaq, Symbols: []string{stock}}}, false, nil
	}
	s.followPlans = func(ctx context.Context, plans []push.Plan) error {
		mu.Lock()
		for _, p := range plans {
			starts[p.Combination.Exchange] = append(starts[p.Combination.Exchange], p.Symbols[0])
		}
		mu.Unlock()
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.lead(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(starts["nasdaq"])
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Alpaca's plans were followed %d times in 10 s, want a restart at each new pick", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := starts["binance"]; len(got) != 1 {
		t.Fatalf("the exchange's websockets were started %d times (%v) while only Alpaca's pick changed", len(got), got)
	}
	if got := starts["nasdaq"]; len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Fatalf("Alpaca's plans restarted without a change: %v", got)
	}
}

// A catch-up reads a hole longer than one request's page page after page,
// to the present, before it forgets where the series started.
func TestCatchUpReadsALongHoleWhole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, db, now := simCatchUp(t, nil)
	key, _ := longHole(t, s, db, now)
	plan := push.Plan{Combination: spotOf(key), Series: []push.Series{{Symbol: key.Symbol, Timeframe: key.Timeframe}}}
	sink := newCandleSink(s)
	s.catchUpTimeframe(ctx, oneCatchUpJob(t, s, plan, sink), sink)
	atPresent(t, caughtUp(t, s, db, key), key.Timeframe, now)
}

// A catch-up whose read fails after its first pages (a provider that
// rejects a later page) stores what those pages brought and records the
// series' starting point after them: the next catch-up reads on from
// there, not the whole hole again.
func TestCatchUpFailingPartWayKeepsWhatItRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var failAfter atomic.Int64 // a klines request starting later is rejected (unix ms; 0: none)
	s, db, now := simCatchUp(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start, _ := strconv.ParseInt(r.URL.Query().Get("startTime"), 10, 64)
			if f := failAfter.Load(); f > 0 && start > f {
				// Binance's error body (REST API, "Error codes": -1100 ILLEGAL_CHARS).
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"code":-1100,"msg":"Illegal characters found in parameter 'startTime'."}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	key, stored := longHole(t, s, db, now) // two requests of at most 1,000 to catch up
	spot, sym, tf := spotOf(key), key.Symbol, key.Timeframe
	p, _ := s.In.Feeds.For(spot)
	failAfter.Store(stored.UnixMilli()) // the first request, from the newest stored candle, passes
	plan := push.Plan{Combination: spot, Series: []push.Series{{Symbol: sym, Timeframe: tf}}}
	sink := newCandleSink(s)
	s.catchUpTimeframe(ctx, oneCatchUpJob(t, s, plan, sink), sink)
	got, err := db.Candles(ctx, key, 5000)
	if err != nil {
		t.Fatal(err)
	}
	reached := got[len(got)-1].Time
	if want := stored.Add(900 * time.Minute); reached.Before(want) {
		t.Fatalf("after a failed second page the series reaches %s, want the first page stored (past %s)", reached, want)
	}
	if start, err := s.Redis.HGet(ctx, s.startsKey(spot, tf), sym).Result(); err != nil || start != strconv.FormatInt(reached.UnixMicro(), 10) {
		t.Fatalf("recorded start %q (%v), want the newest candle stored (%d)", start, err, reached.UnixMicro())
	}
	// Meanwhile the push feed stored the candle that closed last, past
	// the rest of the hole. The provider accepts the page again: the next
	// catch-up reads on from where the first stopped, not from the pushed
	// candle, and finishes the series.
	failAfter.Store(0)
	pushed, err := p.Candles(ctx, spot, sym, tf, tf.Truncate(now).Add(-tf.Duration()), 1)
	if err != nil || len(pushed) != 1 {
		t.Fatalf("simulator's last closed candle: %v, %v", pushed, err)
	}
	if err := db.UpsertCandles(ctx, key, pushed); err != nil {
		t.Fatal(err)
	}
	job := oneCatchUpJob(t, s, plan, sink)
	if !job.latest[sym].Equal(reached) {
		t.Fatalf("catch-up job %+v, want one from %s", job, reached)
	}
	s.catchUpTimeframe(ctx, job, sink)
	atPresent(t, caughtUp(t, s, db, key), tf, now)
}

// longHole stores ETH_USDT's 1m history on the simulator up to 25 hours
// before now: 1,500 minutes to catch up, more than a request's 1,000. It
// returns the series' key and its newest candle stored.
func longHole(t *testing.T, s *PushIngest, db *store.DB, now time.Time) (store.CandleKey, time.Time) {
	t.Helper()
	key := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF1m}
	p, _ := s.In.Feeds.For(spotOf(key))
	oldest := key.Timeframe.Truncate(now).Add(-(1500 + InitialCandles) * time.Minute)
	cs, err := p.Candles(t.Context(), spotOf(key), key.Symbol, key.Timeframe, oldest, InitialCandles)
	if err != nil || len(cs) != InitialCandles {
		t.Fatalf("simulator candles: %d, %v", len(cs), err)
	}
	if err := db.UpsertCandles(t.Context(), key, cs); err != nil {
		t.Fatal(err)
	}
	return key, cs[len(cs)-1].Time
}

// atPresent checks that a series' candles reach the last closed one at now.
func atPresent(t *testing.T, got []domain.Candle, tf domain.Timeframe, now time.Time) {
	t.Helper()
	if newest := got[len(got)-1].Time; newest.Before(tf.Truncate(now).Add(-tf.Duration())) {
		t.Fatalf("caught up to %s, want the present (%s)", newest, tf.Truncate(now))
	}
}

// spotOf is the spot combination of a series' key.
func spotOf(key store.CandleKey) domain.Combination {
	return domain.Combination{Market: key.Market, Exchange: key.Exchange, Instrument: "spot"}
}

// oneCatchUpJob is the one catch-up job of plan (a series behind).
func oneCatchUpJob(t *testing.T, s *PushIngest, plan push.Plan, sink *candleSink) catchUpJob {
	t.Helper()
	jobs := s.catchUpJobs(t.Context(), plan, sink)
	if len(jobs) != 1 {
		t.Fatalf("catch-up jobs %+v, want one", jobs)
	}
	return jobs[0]
}

// simCatchUp is a push ingest whose catch-up reads a local Binance
// simulator (behind wrap, when given) into db, with its clock fixed at now
// and its starting points in a Redis space of its own.
func simCatchUp(t *testing.T, wrap func(http.Handler) http.Handler) (s *PushIngest, db *store.DB, now time.Time) {
	t.Helper()
	db = storetest.New(t)
	sim := exchangesim.New(exchangesim.Config{Spot: 3, Perpetual: 1})
	t.Cleanup(sim.Close)
	var h http.Handler = sim
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{"binance"}, BaseURLs: map[string]string{"binance": srv.URL, "binance-futures": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	now = time.Now().UTC()
	s = &PushIngest{In: &Ingester{Store: db, Feeds: reg, Now: func() time.Time { return now }}, Redis: redistest.Client(t), KeyPrefix: redistest.Prefix(t)}
	return s, db, now
}

// caughtUp checks a series after its catch-up: no hole between its oldest
// candle and its newest, and no starting point left in Redis. It returns
// the series' candles.
func caughtUp(t *testing.T, s *PushIngest, db *store.DB, key store.CandleKey) []domain.Candle {
	t.Helper()
	got, err := db.Candles(t.Context(), key, 5000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time.Sub(got[i-1].Time) != key.Timeframe.Duration() {
			t.Fatalf("a hole is left: %s then %s", got[i-1].Time, got[i].Time)
		}
	}
	if left, err := s.Redis.HLen(t.Context(), s.startsKey(spotOf(key), key.Timeframe)).Result(); err != nil || left != 0 {
		t.Fatalf("starting points left after the catch-up: %d (%v)", left, err)
	}
	return got
}

// A follow that ends (its kind's plans changed) drops its jobs still
// queued, rather than wait for the shared workers to reach them behind
// the other kinds' jobs; the others' jobs stay queued.
func TestCatchUpQueueDropsAnEndedFollowsJobs(t *testing.T) {
	t.Parallel()
	q := newCatchUpQueue()
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	var crypto, stocks sync.WaitGroup
	add := func(wg *sync.WaitGroup, jobs ...catchUpJob) {
		for i := range jobs {
			jobs[i].passes = wg
		}
		wg.Add(len(jobs))
		q.add(jobs)
	}
	add(&crypto, catchUpJob{c: spot, tf: "15m", scored: true}, catchUpJob{c: spot, tf: "1m"})
	add(&stocks, catchUpJob{c: nasdaq, tf: "1d", scored: true}, catchUpJob{c: nasdaq, tf: "1m"})
	q.drop(&stocks)
	waited := make(chan struct{})
	go func() { stocks.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the ended follow still waits for its queued jobs")
	}
	for _, want := range []string{"binance/15m", "binance/1m"} {
		j, ok := q.next(t.Context())
		if !ok || j.c.Exchange+"/"+string(j.tf) != want {
			t.Fatalf("next %s/%s (%v), want %s", j.c.Exchange, j.tf, ok, want)
		}
		q.done(j)
		j.passes.Done()
	}
	crypto.Wait()
}
