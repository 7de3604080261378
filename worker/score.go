package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// TypeScore scores every asset of a market in one trading style.
const TypeScore = "score"

// scoreCandles is how many candles an asset is scored on: enough for the
// 200-bar averages and for TradingView-seeded smoothing to settle.
const scoreCandles = 500

// sparklinePoints is the length of the list's price mini-chart (closes of
// the style's timeframe, oldest first).
const sparklinePoints = 30

// ScorePayload names a scoring task's market and style; Tick is the
// scheduler tick, part of the task id.
type ScorePayload struct {
	Market domain.Market   `json:"market"`
	Style  analytics.Style `json:"style"`
	Tick   time.Time       `json:"tick"`
}

// NewScoreTask builds the task that scores a market in one style.
func NewScoreTask(m domain.Market, style analytics.Style, tick time.Time) *asynq.Task {
	return newTask(TypeScore, ScorePayload{Market: m, Style: style, Tick: tick.UTC()})
}

// ScoreStore is what scoring reads and writes.
type ScoreStore interface {
	// RescoreCandidates decides which assets must be scored (again) and
	// reads only those: most runs rescore few assets or none.
	RescoreCandidates(ctx context.Context, q store.RescoreQuery) ([]store.RescoreCandidate, int, error)
	// CandlesOf reads the newest candles of several series at once.
	CandlesOf(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string, limit int) (map[string][]domain.Candle, error)
	// CachedCandlesOf is CandlesOf by column through a cache of the
	// candles read before, which serves only what Postgres has
	// (store.CandleCache); the bars are shared with the cache.
	CachedCandlesOf(ctx context.Context, cache *store.CandleCache, m domain.Market, exchange string, tf domain.Timeframe,
		symbols []string, limit int) (map[string]*domain.Bars, store.CandleReads, error)
	SaveAnalytics(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord) (int, error)
}

// AlertingStore saves a run's records with the alerts on them evaluated
// in the same transaction (store.DB.SaveAnalyticsAlerting).
type AlertingStore interface {
	SaveAnalyticsAlerting(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord, m store.AlertMatcher) (int, error)
}

// Scorer runs the scoring tasks: the stored candles of the market's
// analytics source go through analytics.Score, and the results replace the
// reports the api serves.
type Scorer struct {
	Store  ScoreStore
	Region string
	// Served is what the deployment's feeds serve (nil: every combination
	// of the region's catalogue); it picks the analytics source.
	Served domain.Served
	Logger *slog.Logger
	Now    func() time.Time
	// Notify announces new reports so api replicas drop cached analytics.
	Notify func(ctx context.Context, s readcache.Scope)
	// Candles keeps the candles runs read, so that the next run of a
	// series reads only its newest ones (nil: every run reads every
	// candle). At a close that is two candles a series instead of 500.
	Candles *store.CandleCache
	// Alerts evaluates the clients' alerts on the assets each save
	// changed, in the save's transaction (nil: alerts are not evaluated).
	// It takes effect when Store is an AlertingStore.
	Alerts store.AlertMatcher
	// Hours are the markets' calendars: a candle that ends with its
	// market's session (a stock's 12:00-16:00 4h bar) has closed at the
	// bell, and its reports are rescored then (store.RescoreQuery's
	// SessionClose). Nil: every market trades around the clock.
	Hours domain.MarketHours
	// Rescoring is told of every run of a close (bigRun assets or more
	// whose candle ended, or a newer one came), for the history loads
	// that step aside meanwhile (nil: none is told).
	Rescoring *Rescoring

	runs  sync.Map // market/style → chan struct{} (capacity 1): the run lock
	order runOrder // the runs of a market at once, by their alerts

	saveSlotsOnce sync.Once
	saveSlots     chan struct{} // saveSlotsTotal: the saves under way in this process
}

// Register adds the scoring handler to a worker.
func (s *Scorer) Register(w *Worker) {
	w.Handle(TypeScore, asynq.HandlerFunc(s.HandleScore))
}

// HandleScore scores one market in one style. An asset whose last candle
// (open time and close) and fundamentals are the ones already scored is
// skipped, so running the task twice changes nothing and sends no second
// verdict event; one whose still-open candle moved is scored again once
// per open-candle slot, one with new fundamentals at once (the rescoring
// rule, store.RescoreCandidates).
func (s *Scorer) HandleScore(ctx context.Context, t *asynq.Task) error {
	var p ScorePayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("worker: %s: bad payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	_, marketOK := domain.ParseMarket(string(p.Market))
	if _, ok := analytics.ParseStyle(string(p.Style)); !ok || p.Style == "" || !marketOK {
		return fmt.Errorf("worker: %s: bad market or style %q/%q: %w", t.Type(), p.Market, p.Style, asynq.SkipRetry)
	}
	scored, events, err := s.Score(ctx, p.Market, p.Style)
	if err != nil {
		return err
	}
	s.logger().Debug("scored", "market", p.Market, "style", p.Style, "assets", scored, "verdict_events", events)
	return nil
}

func (s *Scorer) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Score scores every asset of a market in a style and stores what changed.
// It returns how many assets were (re)scored and how many verdict events
// were written.
func (s *Scorer) Score(ctx context.Context, m domain.Market, style analytics.Style) (scored, events int, err error) {
	return s.ScoreSymbols(ctx, m, style, nil)
}

// ScoreSymbols is Score restricted to the given symbols (nil = every
// asset), with the same rules: what was already scored is skipped.
//
// A run first decides, source by source, which assets to score, then
// reads, scores and saves them all in one pipeline: a stock market's five
// exchanges are one run whose reads, scoring and saves overlap from the
// first asset to the last, rather than five that each wait for their last
// save before the next one starts deciding.
func (s *Scorer) ScoreSymbols(ctx context.Context, m domain.Market, style analytics.Style, only []string) (scored, events int, err error) {
	srcs := domain.AnalyticsSources(s.Region, m, s.Served)
	if len(srcs) == 0 {
		return 0, 0, nil // the market has no candle feed in this region
	}
	// One run per market and style at a time in this process: a tick and
	// a trigger arriving together (both are enqueued on the minute) would
	// otherwise both compute the same assets from the same reports, and
	// one result would be thrown away (SaveAnalytics keeps the first). The
	// second run waits, then finds the assets fresh. Across processes the
	// same race costs CPU only (docs/pipeline.md).
	ph := runPhases{start: time.Now(), reasons: map[store.RescoreReason]int{}}
	if held, ok := ctx.Value(heldRunKey{}).(*heldRun); ok && held.key == runKey(m, style) {
		// Taken by the caller (RunNow's gate, LockRun) before its slot.
		ph.start, ph.lockWait, ph.slotWait = held.waitStart, held.lockWait, time.Since(held.waitStart)-held.lockWait
	} else {
		unlock, err := s.lock(ctx, m, style)
		if err != nil {
			return 0, 0, err
		}
		defer unlock()
		ph.lockWait = time.Since(ph.start)
	}
	defer ph.log(s.logger(), m, style, &scored)
	// With alerts, the runs of the market at once go in order of their
	// alerts (runOrder).
	ds, ordered := s.alertDensityStore()
	var run *orderedRun
	if ordered {
		run = s.order.begin(m)
		defer s.order.end(run)
	}
	now := s.Now().UTC()
	work, considered, err := s.decide(ctx, srcs, style, only, now, &ph)
	if err != nil {
		return 0, 0, err
	}
	alerted := false
	if ordered {
		var density float64
		density, alerted = ds.AlertDensity(m, style, workSymbols(work), s.Alerts)
		run.setDensity(density)
	}
	if ph.reasons[store.RescoreEnded]+ph.reasons[store.RescoreEndedMoved]+ph.reasons[store.RescoreNewCandle] >= bigRun {
		defer s.Rescoring.Begin()()
	}
	if alerted && len(work) > 0 {
		ph.orderWait = s.order.wait(ctx, run)
	}
	scored, events, err = s.scoreWork(ctx, m, style, work, now, &ph, run)
	if err == nil {
		obs.Scored(string(m), string(style), scored, considered-scored, events)
	}
	// What was stored is announced even when the run stopped on an error
	// after it.
	if scored > 0 && s.Notify != nil {
		// The market's list, reports and history, and every top-setups
		// answer (they span markets).
		s.Notify(ctx, readcache.Analytics(m))
		s.Notify(ctx, readcache.TopSetups())
	}
	return scored, events, err
}

func runKey(m domain.Market, style analytics.Style) string { return string(m) + "/" + string(style) }

// lock waits for the run lock of a market and style, or for ctx.
func (s *Scorer) lock(ctx context.Context, m domain.Market, style analytics.Style) (unlock func(), err error) {
	mu, _ := s.runs.LoadOrStore(runKey(m, style), make(chan struct{}, 1))
	ch := mu.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// heldRun marks a context whose holder took the run lock of key: the
// runs of ScoreSymbols under it do not take it again.
type heldRun struct {
	key       string
	waitStart time.Time
	lockWait  time.Duration
}

type heldRunKey struct{}

// LockRun takes the run lock of a market and style ahead of a
// ScoreSymbols call, for a caller that must hold it before something else
// (RunNow takes a scoring task's lock before its slot, so a run queued
// behind another run of its market and style never holds a slot while it
// waits). ScoreSymbols with the returned context runs under it; the caller
// calls unlock when that run has returned.
func (s *Scorer) LockRun(ctx context.Context, m domain.Market, style analytics.Style) (runCtx context.Context, unlock func(), err error) {
	start := time.Now()
	unlock, err = s.lock(ctx, m, style)
	if err != nil {
		return nil, nil, err
	}
	return context.WithValue(ctx, heldRunKey{}, &heldRun{key: runKey(m, style), waitStart: start, lockWait: time.Since(start)}), unlock, nil
}

// alertDensityStore tells how many alerts a run's saves evaluate per asset,
// and whether the market has any (store.DB.AlertDensity), by which the
// runs of a market at once are ordered (runOrder).
type alertDensityStore interface {
	AlertDensity(m domain.Market, style analytics.Style, symbols []string, matcher store.AlertMatcher) (float64, bool)
}

// alertDensityStore is the store's, when the scorer evaluates alerts (a
// matcher, a store that saves with them and tells their density).
func (s *Scorer) alertDensityStore() (alertDensityStore, bool) {
	ds, ok := s.Store.(alertDensityStore)
	_, alerting := s.Store.(AlertingStore)
	return ds, ok && alerting && s.Alerts != nil
}

// workSymbols are the symbols of a run's work.
func workSymbols(work []sourceWork) []string {
	var syms []string
	for _, w := range work {
		for _, c := range w.cands {
			syms = append(syms, c.Symbol)
		}
	}
	return syms
}

// sourceWork is the assets of one analytics source that a run scores.
type sourceWork struct {
	src   domain.Combination
	cands []store.RescoreCandidate
}

// decide returns, per analytics source, the assets the rescoring rule
// picks (store.RescoreCandidates), and how many assets it considered. A
// symbol is scored once a run: two sources of a market that both list it
// (a forex exchange's candles read before its screener rows exist) must
// not score it twice, so the first source that picks it keeps it.
func (s *Scorer) decide(ctx context.Context, srcs []domain.Combination, style analytics.Style, only []string, now time.Time,
	ph *runPhases) (work []sourceWork, considered int, err error) {
	seen := map[string]bool{}
	for _, src := range srcs {
		// Settle: a close whose final state is not stored yet waits for
		// it (its write triggers a run) or, if none comes, for the first
		// tick after Settle.
		q := store.RescoreQuery{Source: src, Style: style, Timeframe: style.Timeframe(), Symbols: only, Now: now,
			SessionClose: domain.StateAt(s.Hours, src.Market, now).Session.Close, Settle: tickSettle}
		t0 := time.Now()
		cands, n, err := s.Store.RescoreCandidates(ctx, q)
		ph.decide += time.Since(t0)
		considered += n
		if err != nil {
			return nil, considered, err
		}
		cands = slices.DeleteFunc(cands, func(c store.RescoreCandidate) bool { return seen[c.Symbol] })
		for _, c := range cands {
			seen[c.Symbol] = true
			ph.reasons[c.Reason]++
		}
		ph.candidates += len(cands)
		if len(cands) > 0 {
			work = append(work, sourceWork{src: src, cands: cands})
		}
	}
	return work, considered, nil
}

// scoreWork scores the decided assets and stores them, and returns how
// many were scored and the verdict events written.
func (s *Scorer) scoreWork(ctx context.Context, m domain.Market, style analytics.Style, work []sourceWork, now time.Time,
	ph *runPhases, run *orderedRun) (scored, events int, err error) { // run: nil when not ordered
	if len(work) == 0 {
		return 0, 0, nil
	}
	prev := map[string]store.AnalyticsRecord{}
	for _, w := range work {
		for _, c := range w.cands {
			if c.HadPrev {
				prev[c.Symbol] = c.Prev
			}
		}
	}
	work = staggered(work, m, style)
	// The candles are read a batch ahead: while one batch is scored and
	// saved, the next one's read is under way on another connection, so
	// a run over a whole universe costs about its reads or its saves,
	// whichever is longer, rather than their sum.
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	batches := s.readAhead(rctx, style.Timeframe(), work)
	// The records are saved saveEvery at a time on up to saveConns
	// connections at once while the run goes on scoring: a run over a
	// whole universe (11,000 stocks at their close) would otherwise wait
	// for each transaction's commit in turn.
	sv := s.startSaving(rctx, prev)
	var recs []store.AnalyticsRecord
read:
	for b := range batches {
		ph.read += b.took
		ph.reads.Extended += b.reads.Extended
		ph.reads.Full += b.reads.Full
		if b.err != nil {
			err = b.err
			break
		}
		for _, c := range b.cands {
			t0 := time.Now()
			rec, ok := s.scoreOne(m, style, b.src, c, b.candles[c.Symbol], now)
			ph.score += time.Since(t0)
			if !ok {
				continue
			}
			recs = append(recs, rec)
			if len(recs) == saveEvery {
				if !sv.save(recs) {
					break read
				}
				recs = make([]store.AnalyticsRecord, 0, saveEvery)
			}
		}
	}
	if err == nil && len(recs) > 0 {
		sv.save(recs)
	}
	if run != nil {
		run.scoredAll() // the lighter runs waiting for this one go on
	}
	var saveErr error
	var saved time.Duration
	scored, events, saved, saveErr = sv.wait()
	ph.save += saved
	if err == nil {
		err = saveErr
	}
	return scored, events, err
}

// staggered is work with each source's assets rotated by the style, in a
// market scored in several (crypto): at a close the styles' runs go
// together over the same assets, and a save locks its assets' reports of
// every style (alerts read them all), so runs in one order would each
// wait, save after save, for another style's save of the same assets.
// Started a quarter of the list apart, they save different assets at any
// moment. The order of a run's assets is otherwise free: each save sorts
// its own.
func staggered(work []sourceWork, m domain.Market, style analytics.Style) []sourceWork {
	styles := analytics.ScoredStyles(m)
	k := slices.Index(styles, style)
	if k <= 0 {
		return work
	}
	out := make([]sourceWork, len(work))
	for i, w := range work {
		n := len(w.cands)
		at := n * k / len(styles)
		w.cands = append(slices.Clone(w.cands[at:]), w.cands[:at]...)
		out[i] = w
	}
	return out
}

// scoreOne scores a candidate on its candles; ok is false when it has too
// little history or its scoring failed (logged).
func (s *Scorer) scoreOne(m domain.Market, style analytics.Style, src domain.Combination, c store.RescoreCandidate,
	bars *domain.Bars, now time.Time) (rec store.AnalyticsRecord, ok bool) {
	sym, tf := c.Symbol, style.Timeframe()
	if bars == nil || bars.Len() < analytics.MinCandles {
		return rec, false // not enough history yet: no report rather than a poor one
	}
	n := bars.Len()
	inputs, err := c.Fundamentals.Decoded()
	if err != nil {
		s.logger().Warn("fundamentals unreadable; scored without them", "market", m, "symbol", sym, "err", err)
	}
	res, err := analytics.Score(analytics.Input{Market: m, Symbol: sym, Bars: bars, PrevVerdict: c.Prev.Verdict,
		Fundamentals: analyticsFundamentals(inputs)})
	if err != nil {
		s.logger().Warn("scoring failed", "market", m, "symbol", sym, "style", style, "err", err)
		return rec, false
	}
	rec = store.AnalyticsRecord{Market: m, Style: style, Symbol: sym, Exchange: src.Exchange, Result: &res,
		OverallScore: res.OverallScore, Verdict: res.Verdict, Price: bars.Close[n-1],
		ChangePct: changePct(bars.Close, tf), Sparkline: sparkline(bars.Close), CandleTime: bars.Time(n - 1),
		CandleClose: bars.Close[n-1], UpdatedAt: now, CandlesUsed: n, Instrument: src.Instrument}
	if c.HasTicker {
		rec.Price, rec.ChangePct = c.Price, c.ChangePct
	}
	if !c.Fundamentals.UpdatedAt.IsZero() { // even unreadable: not retried every run
		at := c.Fundamentals.UpdatedAt
		rec.FundamentalsAt = &at
	}
	return rec, true
}

// runPhases is where a scoring run's time went, logged at debug level,
// and at info level when the run took slowRun or longer or had bigRun
// candidates or more: an operator (or a benchmark's log) reading a slow
// rescoring sees whether it waited for the previous run, for Postgres
// (deciding, reading, saving) or for the CPU, and why its assets were
// scored (reasons).
type runPhases struct {
	start                     time.Time
	lockWait, slotWait        time.Duration // for the run lock, then (RunNow's tasks) for a slot
	orderWait                 time.Duration // for denser runs of the market (runOrder)
	decide, read, score, save time.Duration
	candidates                int
	reads                     store.CandleReads
	reasons                   map[store.RescoreReason]int // the candidates by the rule's clause
}

func (ph *runPhases) log(l *slog.Logger, m domain.Market, style analytics.Style, scored *int) {
	if ph.candidates == 0 {
		return
	}
	level := slog.LevelDebug
	if time.Since(ph.start) >= slowRun || ph.candidates >= bigRun {
		level = slog.LevelInfo
	}
	l.Log(context.Background(), level, "scoring run", "market", m, "style", style, "candidates", ph.candidates, "scored", *scored,
		"took", time.Since(ph.start), "lock_wait", ph.lockWait, "slot_wait", ph.slotWait, "order_wait", ph.orderWait, "decide", ph.decide, "read", ph.read, "score", ph.score, "save", ph.save,
		"series_extended", ph.reads.Extended, "series_read_in_full", ph.reads.Full, "reasons", ph.reasonCounts())
}

// reasonCounts is the candidates by the rule's clause, in the rule's
// order ("ended=1980 ended_moved=3"): the reason a run scored what it did.
func (ph *runPhases) reasonCounts() string {
	var b strings.Builder
	for _, r := range store.RescoreReasons {
		if n := ph.reasons[r]; n > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%d", r, n)
		}
	}
	return b.String()
}

// tickSettle is how long after a candle's end a run waits for its final
// state (store.RescoreQuery's Settle) before it rescores the candle on
// what is stored: the stream's closing push lands within seconds, the
// bell's REST read of a whole stock market within a quarter of a minute,
// and either is marked final, which rescores it at once. A candle whose
// final state equals what was stored before its end and that no final
// write marked (a feed that cannot tell) is rescored by the first tick
// after it, a minute on.
const tickSettle = 45 * time.Second

// slowRun is the duration from which a scoring run's phases are logged at
// info level: a few seconds, a close's goal (every report rescored within
// 5 s) at risk.
const slowRun = 2 * time.Second

// bigRun is the candidates from which a scoring run is logged at info
// level whatever it took: a close's runs (thousands of assets), with the
// rule's clauses that picked them.
const bigRun = 500

// readBatch is how many assets' candles a scoring run reads per
// statement.
const readBatch = 32

// candleBatch is one read of a scoring run: the candidates of one source
// and their candles (by symbol), or the read's error.
type candleBatch struct {
	src     domain.Combination
	cands   []store.RescoreCandidate
	candles map[string]*domain.Bars
	reads   store.CandleReads
	took    time.Duration
	err     error
}

// readAhead reads the candidates' candles readBatch at a time, source by
// source, one batch ahead of its reader, and closes the channel after the
// last batch or the first error. Cancelling ctx stops it.
func (s *Scorer) readAhead(ctx context.Context, tf domain.Timeframe, work []sourceWork) <-chan candleBatch {
	out := make(chan candleBatch, 1)
	go func() {
		defer close(out)
		for _, w := range work {
			for chunk := range slices.Chunk(w.cands, readBatch) {
				syms := make([]string, len(chunk))
				for i, c := range chunk {
					syms[i] = c.Symbol
				}
				t0 := time.Now()
				cs, reads, err := s.Store.CachedCandlesOf(ctx, s.Candles, w.src.Market, w.src.Exchange, tf, syms, scoreCandles)
				select {
				case out <- candleBatch{src: w.src, cands: chunk, candles: cs, reads: reads, took: time.Since(t0), err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}
	}()
	return out
}

// saveEvery is how many scored assets are stored per transaction: a
// verdict event commits (and is delivered) while the rest of its run is
// still being scored, instead of after the whole market. With clients'
// alerts each save also reads the assets' other reports and alert states
// and writes the states and events, and each has its share of fixed work
// (the alerts' look-up, the reports' locks, the stream's lock, a commit):
// a 00:00 close of 2,000 assets with 10,000 alerts (BenchmarkCloseAlerts,
// in one process, close by close) took 3.1 s at 64 a save against 4.2 s
// at 16, and its alerts' p95 was 5 % lower at 128 than at 64 (no lower at
// 256); a quarter-hour's close (scalp alone) was no slower, its first
// alerts committed after ≈ 0.2 s.
const saveEvery = 128

// saveConns is how many transactions of one run are saved at once, and
// saveSlotsTotal how many of all runs in the process: a run alone (a
// market closing in one style) saves on three connections, and the four
// runs of a daily close share four, leaving the pool's other connections
// to the api and ingest (the reads take one a run, as before).
const (
	saveConns      = 3
	saveSlotsTotal = 4
)

// runSaver saves a run's records (SaveAnalytics) on up to saveConns
// connections at once. The first failure stops it: no later batch is
// saved, and the run returns the error (its assets are scored again by
// the next run, as when a run fails half-way).
type runSaver struct {
	s      *Scorer
	parent context.Context
	prev   map[string]store.AnalyticsRecord
	in     chan []store.AnalyticsRecord
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu             sync.Mutex
	scored, events int
	took           time.Duration
	err            error
}

func (s *Scorer) startSaving(ctx context.Context, prev map[string]store.AnalyticsRecord) *runSaver {
	s.saveSlotsOnce.Do(func() { s.saveSlots = make(chan struct{}, saveSlotsTotal) })
	sv := &runSaver{s: s, parent: ctx, prev: prev, in: make(chan []store.AnalyticsRecord)}
	sv.ctx, sv.cancel = context.WithCancel(ctx)
	for range saveConns {
		sv.wg.Go(sv.run)
	}
	return sv
}

func (sv *runSaver) run() {
	for recs := range sv.in {
		if sv.ctx.Err() != nil {
			continue // failed: drain without saving
		}
		select {
		case sv.s.saveSlots <- struct{}{}:
		case <-sv.ctx.Done():
			continue
		}
		t0 := time.Now()
		// A save under way finishes on the run's context, not the
		// savers': cancelling it when another save failed could leave it
		// committed but reported failed, and stored reports uncounted.
		n, err := sv.s.save(sv.parent, recs, sv.prev)
		<-sv.s.saveSlots
		sv.mu.Lock()
		sv.took += time.Since(t0)
		if err != nil {
			if sv.err == nil {
				sv.err = err
			}
			sv.cancel()
		} else {
			sv.scored, sv.events = sv.scored+len(recs), sv.events+n
		}
		sv.mu.Unlock()
	}
}

// save stores records, with the alerts on them when the scorer has a
// matcher and the store evaluates alerts.
func (s *Scorer) save(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord) (int, error) {
	if as, ok := s.Store.(AlertingStore); ok && s.Alerts != nil {
		return as.SaveAnalyticsAlerting(ctx, recs, prev, s.Alerts)
	}
	return s.Store.SaveAnalytics(ctx, recs, prev)
}

// save hands a batch to a saver; false once saving has failed (or the
// run's context ended), when the run should stop.
func (sv *runSaver) save(recs []store.AnalyticsRecord) bool {
	select {
	case sv.in <- recs:
		return true
	case <-sv.ctx.Done():
		return false
	}
}

// wait waits for the batches handed over and returns what they stored,
// the time spent saving (summed over the connections) and the first error.
func (sv *runSaver) wait() (scored, events int, took time.Duration, err error) {
	close(sv.in)
	sv.wg.Wait()
	sv.cancel()
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.err == nil && sv.parent.Err() != nil {
		sv.err = sv.parent.Err() // batches may have been dropped
	}
	return sv.scored, sv.events, sv.took, sv.err
}

// sourceSymbols lists the symbols of a source combination (its screener
// rows, keyed for their price and change) or, when it has none yet, the
// symbols with candles of the timeframe.
func sourceSymbols(ctx context.Context, st interface {
	Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error)
	CandleSymbols(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe) ([]string, error)
}, src domain.Combination, tf domain.Timeframe) ([]string, map[string]domain.Ticker, error) {
	ts, err := st.Tickers(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	tickers := make(map[string]domain.Ticker, len(ts))
	symbols := make([]string, 0, len(ts))
	for _, t := range ts {
		tickers[t.Symbol] = t
		symbols = append(symbols, t.Symbol)
	}
	if len(symbols) == 0 {
		if symbols, err = st.CandleSymbols(ctx, src.Market, src.Exchange, tf); err != nil {
			return nil, nil, err
		}
	}
	return symbols, tickers, nil
}

// changePct is the percent change over the last 24 hours of candles (or
// the whole series when shorter), from their closes, for assets without a
// screener row.
func changePct(closes []float64, tf domain.Timeframe) float64 {
	n := max(int(24*time.Hour/tf.Duration()), 1)
	from := closes[max(len(closes)-1-n, 0)]
	return (closes[len(closes)-1] - from) / from * 100
}

// sparkline is the last sparklinePoints closes, copied (the closes are
// the candle cache's).
func sparkline(closes []float64) []float64 {
	return slices.Clone(closes[max(len(closes)-sparklinePoints, 0):])
}
