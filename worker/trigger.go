package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
)

// TypeScoreAssets scores the assets of one market and style whose inputs
// changed (a new or changed candle of the style's timeframe, new
// fundamentals), as announced by ingest through a ScoreTrigger.
const TypeScoreAssets = "score:assets"

// ScoreAssetsPayload names the market and style whose pending assets a
// score:assets task scores; Generation is part of the task id (see
// ScoreTrigger).
type ScoreAssetsPayload struct {
	Market     domain.Market   `json:"market"`
	Style      analytics.Style `json:"style"`
	Generation int64           `json:"generation"`
}

// ScoreTrigger turns ingest's writes into scoring at once: ingest tells it
// which candle series (or which assets' fundamentals) changed, and it has
// exactly those assets scored in the styles that read them.
//
// Bursts are coalesced per (market, style) in Redis: the changed symbols
// go into a pending set (rediskeys.Space.ScorePending), and one
// score:assets task runs per generation of that set
// ("score:assets:crypto:swing:g42", the generation counted by
// ScoreGeneration). A write marks its symbols and reads the generation in
// one script, then starts that generation's task through the Pipeline,
// which claims the task id across workers: the first write of a
// generation runs the task, later writes while it waits only add to the
// set, however many workers wrote. The task takes the set and moves to
// the next generation in one atomic step, so a write that lands while the
// task is scoring starts the next generation's task rather than being
// lost behind the running one. A symbol is marked before the generation
// is read, so it is either in the set the waiting task takes or in the
// next generation's.
//
// A write whose generation was taken between its mark and its claim
// starts a task that finds the set empty or newer: an extra run, never a
// lost one. The scorer's own rules decide what is scored (an asset already
// scored on its candle and fundamentals is skipped; one whose still-open
// candle moved is rescored once per open-candle slot, store.RescoreCandidates),
// so a trigger never scores more often than a tick would. Nothing depends
// on the trigger: a lost start (Redis away, a crash between the write and
// the claim) is caught by the scheduler's score tick, which scores every
// asset with something new.
type ScoreTrigger struct {
	// Pipeline claims and runs the tasks; its Redis and Keys hold the
	// pending sets and generations too.
	Pipeline Pipeline
	Scorer   *Scorer
	Region   string
	// Served is what the deployment's feeds serve (nil: every combination
	// of the region's catalogue); it picks the analytics source, as the
	// Scorer's does.
	Served domain.Served
	Logger *slog.Logger
	// Drop, when set, is asked before each task is started; true drops it
	// (tests prove the safety net with it).
	Drop func(m domain.Market, style analytics.Style) bool
}

// markScript adds the changed symbols (ARGV) to the pending set and
// returns the current generation: the one whose task will take them. Keys
// expire a day after their last use (a set whose task was lost is scored
// by the tick anyway).
var markScript = redis.NewScript(`
redis.call('SADD', KEYS[1], unpack(ARGV))
redis.call('EXPIRE', KEYS[1], 86400)
return tonumber(redis.call('GET', KEYS[2]) or '0')
`)

// takeScript empties the pending set and moves to the next generation, in
// one step, and returns what was pending.
var takeScript = redis.NewScript(`
local m = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], 86400)
return m
`)

func (tr *ScoreTrigger) logger() *slog.Logger {
	if tr.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return tr.Logger
}

func (tr *ScoreTrigger) keys(m domain.Market, style analytics.Style) (pending, gen string) {
	return tr.Pipeline.Keys.ScorePending(string(m), string(style)), tr.Pipeline.Keys.ScoreGeneration(string(m), string(style))
}

// Register adds the score:assets handler to a worker.
func (tr *ScoreTrigger) Register(w *Worker) {
	w.Handle(TypeScoreAssets, asynq.HandlerFunc(tr.HandleScoreAssets))
	w.Gate(TypeScoreAssets, tr.gate)
}

// gate takes the run lock of a task's market and style before RunNow
// gives it a slot (Worker.Gate): at a close, the stock market's runs
// queue on their lock without holding the slots the other markets' closes
// run in. A payload it cannot read passes ungated; the handler rejects it.
func (tr *ScoreTrigger) gate(ctx context.Context, t *asynq.Task) (context.Context, func(), error) {
	p, err := scoreAssetsPayload(t)
	if err != nil {
		return ctx, func() {}, nil
	}
	return tr.Scorer.LockRun(ctx, p.Market, p.Style)
}

// scoreAssetsPayload is a score:assets task's payload, its market and
// style checked; an error is final (asynq.SkipRetry: a retry reads the
// same bytes).
func scoreAssetsPayload(t *asynq.Task) (ScoreAssetsPayload, error) {
	var p ScoreAssetsPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return p, fmt.Errorf("worker: %s: bad payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	_, marketOK := domain.ParseMarket(string(p.Market))
	if _, ok := analytics.ParseStyle(string(p.Style)); !ok || p.Style == "" || !marketOK {
		return p, fmt.Errorf("worker: %s: bad market or style %q/%q: %w", t.Type(), p.Market, p.Style, asynq.SkipRetry)
	}
	return p, nil
}

// WantsCandles reports whether series of the market, exchange and
// timeframe are scored (ScoresSeries).
func (tr *ScoreTrigger) WantsCandles(m domain.Market, exchange string, tf domain.Timeframe) bool {
	return ScoresSeries(tr.Region, tr.Served, m, exchange, tf)
}

// ScoresSeries reports whether scoring reads candle series of the market,
// exchange and timeframe in the region with the served combinations: of
// the market's analytics source (candles are stored per exchange), in a
// timeframe a style of the market is scored in.
func ScoresSeries(region string, served domain.Served, m domain.Market, exchange string, tf domain.Timeframe) bool {
	return domain.ScoredExchange(region, m, exchange, served) &&
		slices.ContainsFunc(analytics.ScoredStyles(m), func(st analytics.Style) bool { return st.Timeframe() == tf })
}

// CandlesChanged enqueues the scoring of the assets of the changed series,
// in every style whose timeframe they are, when they are of a market's
// analytics source. It only logs failures: the tick is the safety net.
func (tr *ScoreTrigger) CandlesChanged(ctx context.Context, changed []store.CandleKey) {
	type target struct {
		m     domain.Market
		style analytics.Style
	}
	symbols := map[target][]string{}
	for _, k := range changed {
		if !domain.ScoredExchange(tr.Region, k.Market, k.Exchange, tr.Served) {
			continue
		}
		for _, st := range analytics.ScoredStyles(k.Market) {
			if st.Timeframe() == k.Timeframe {
				t := target{k.Market, st}
				symbols[t] = append(symbols[t], k.Symbol)
			}
		}
	}
	for t, syms := range symbols {
		tr.enqueue(ctx, t.m, t.style, syms)
	}
}

// FundamentalsChanged enqueues the scoring of the given assets of a market
// in every style it is scored in.
func (tr *ScoreTrigger) FundamentalsChanged(ctx context.Context, m domain.Market, symbols []string) {
	if len(symbols) == 0 {
		return
	}
	for _, st := range analytics.ScoredStyles(m) {
		tr.enqueue(ctx, m, st, symbols)
	}
}

// mark adds symbols to the pending set of (m, style) and returns the
// generation whose task will take them; ok is false when Redis failed
// (logged: the next score tick scores them).
func (tr *ScoreTrigger) mark(ctx context.Context, m domain.Market, style analytics.Style, symbols []string) (gen int64, ok bool) {
	pending, genKey := tr.keys(m, style)
	for chunk := range slices.Chunk(symbols, 1000) { // Lua's unpack has a stack limit
		args := make([]any, len(chunk))
		for i, s := range chunk {
			args[i] = s
		}
		var err error
		if gen, err = markScript.Run(ctx, tr.Pipeline.Redis, []string{pending, genKey}, args...).Int64(); err != nil {
			tr.logger().Warn("score trigger: mark failed; the next score tick scores these assets", "market", m, "style", style, "err", err)
			return 0, false
		}
	}
	return gen, true
}

// enqueue marks the symbols and starts the task of the generation the
// last of them went into; a write that does not claim it leaves them to
// the task of the write that did.
func (tr *ScoreTrigger) enqueue(ctx context.Context, m domain.Market, style analytics.Style, symbols []string) {
	if tr.Drop != nil && tr.Drop(m, style) {
		return
	}
	gen, ok := tr.mark(ctx, m, style, symbols)
	if !ok {
		return
	}
	task := newTask(TypeScoreAssets, ScoreAssetsPayload{Market: m, Style: style, Generation: gen})
	id := fmt.Sprintf("score:assets:%s:%s:g%d", m, style, gen)
	if _, err := tr.Pipeline.Start(ctx, task, id, asynq.MaxRetry(3)); err != nil {
		tr.logger().Warn("score trigger: task not started; the next score tick scores these assets", "market", m, "style", style, "err", err)
	}
}

// HandleScoreAssets takes the pending assets of its market and style and
// scores them. A failure puts them back (the retry, or the next
// generation's task, takes them again). Running it twice is harmless: the
// second run finds nothing pending, or only newer changes.
func (tr *ScoreTrigger) HandleScoreAssets(ctx context.Context, t *asynq.Task) error {
	p, err := scoreAssetsPayload(t)
	if err != nil {
		return err
	}
	pending, genKey := tr.keys(p.Market, p.Style)
	symbols, err := takeScript.Run(ctx, tr.Pipeline.Redis, []string{pending, genKey}).StringSlice()
	if err != nil {
		return fmt.Errorf("worker: %s: take pending: %w", t.Type(), err)
	}
	if len(symbols) == 0 {
		return nil
	}
	scored, events, err := tr.Scorer.ScoreSymbols(ctx, p.Market, p.Style, symbols)
	if err != nil {
		// Back into the set only: asynq's retry (with its backoff) takes
		// them again, or the next generation's task does. A new task here
		// would run at once and, while Postgres is down, fail in a loop.
		tr.mark(context.WithoutCancel(ctx), p.Market, p.Style, symbols)
		return err
	}
	tr.logger().Debug("scored on trigger", "market", p.Market, "style", p.Style, "pending", len(symbols), "assets", scored, "verdict_events", events)
	return nil
}
