package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

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
// which candle series (or which assets' fundamentals) changed, and it
// enqueues the scoring of exactly those assets in the styles that read
// them.
//
// Bursts are coalesced per (market, style) in Redis: the changed symbols
// go into a pending set, and one score:assets task runs per generation of
// that set: the write that marks the first symbols of a generation also
// claims it (in the same script), and only the claimer runs the task, so
// a burst of writes while the task waits makes one task and one scoring,
// however many workers wrote. The task takes the set and moves to the
// next generation in one atomic step, so a write that lands while the task
// is scoring claims the next generation and runs a new task rather than
// being lost behind the running one. A symbol is marked before the
// generation is read, so it is either in the set the waiting task takes or
// in the next generation's.
//
// Before, each generation's task was enqueued in asynq under an id naming
// the generation (the duplicate id was the coalescing), held back as the
// safety net of RunNow and deleted after its run: two asynq scripts per
// run, on top of the mark and the take, for runs that mostly find nothing
// to score. A claim lasts claimTTL: a process that dies between its claim
// and its take leaves the generation to the next write after that (and to
// the tick meanwhile).
//
// The scorer's own rules still decide what is scored: an asset whose
// candle and fundamentals were already scored is skipped, and one whose
// still-open candle moved is rescored once per open-candle slot
// (rescoreSlot, the open-candle rule), so a trigger never scores more
// often than a tick would. Nothing depends on the trigger: a lost enqueue (Redis away, a
// crash between the write and the enqueue) is caught by the scheduler's
// score tick, which scores every asset with something new.
type ScoreTrigger struct {
	Redis  redis.UniversalClient
	Queue  *asynq.Client
	Scorer *Scorer
	// Prefix starts every Redis key of the trigger (default "pipeline:").
	Prefix string
	Region string
	// Served is what the deployment's feeds serve (nil: every combination
	// of the region's catalogue); it picks the analytics source, as the
	// Scorer's does.
	Served domain.Served
	Logger *slog.Logger
	// Drop, when set, is asked before each wake-up is published; true
	// drops it (tests prove the safety net with it).
	Drop func(m domain.Market, style analytics.Style) bool
	// RunNow, when set (Worker.RunNow), runs each task this trigger
	// claimed in this process at once (enqueued, held back CopyDelay, only
	// when that run fails; 0: DefaultCopyDelay); unset, tasks are enqueued.
	RunNow    func(t *asynq.Task, taskID string, copyOpts ...asynq.Option) bool
	CopyDelay time.Duration
}

// NewQueueClient returns the asynq client the trigger and the waker
// enqueue with (close it when done).
func NewQueueClient(redisURL string) (*asynq.Client, error) {
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		return nil, fmt.Errorf("worker: redis url: %w", err)
	}
	return asynq.NewClient(opt), nil
}

// markScript adds the changed symbols (ARGV[2:]) to the pending set and
// returns the current generation and, when ARGV[1] (a claim's time to
// live in ms) is not 0, whether this call claimed the generation (1) or
// it was claimed already (0). Keys expire a day after their last use (a
// set whose task was lost is scored by the tick anyway).
var markScript = redis.NewScript(`
redis.call('SADD', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], 86400)
local g = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] == '0' or redis.call('GET', KEYS[3]) == tostring(g) then
  return {g, 0}
end
redis.call('SET', KEYS[3], tostring(g), 'PX', ARGV[1])
return {g, 1}
`)

// claimTTL is how long a generation's claim lasts (see ScoreTrigger).
const claimTTL = time.Minute

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

func (tr *ScoreTrigger) keys(m domain.Market, style analytics.Style) (pending, gen, claim string) {
	p := tr.Prefix
	if p == "" {
		p = "pipeline:"
	}
	return fmt.Sprintf("%sscore:pending:%s:%s", p, m, style), fmt.Sprintf("%sscore:gen:%s:%s", p, m, style),
		fmt.Sprintf("%sscore:claim:%s:%s", p, m, style)
}

// Register adds the score:assets handler to a worker.
func (tr *ScoreTrigger) Register(w *Worker) {
	w.Handle(TypeScoreAssets, asynq.HandlerFunc(tr.HandleScoreAssets))
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
	src, ok := domain.AnalyticsSource(region, m, served)
	return ok && src.Exchange == exchange &&
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
		src, ok := domain.AnalyticsSource(tr.Region, k.Market, tr.Served)
		if !ok || src.Exchange != k.Exchange {
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
// generation whose task will take them and, when claim is set, whether
// this call claimed that generation (its caller runs the task); ok is
// false when Redis failed (logged: the next score tick scores them).
func (tr *ScoreTrigger) mark(ctx context.Context, m domain.Market, style analytics.Style, symbols []string, claim bool) (gen int64, claimed, ok bool) {
	pending, genKey, claimKey := tr.keys(m, style)
	chunks := slices.Collect(slices.Chunk(symbols, 1000)) // Lua's unpack has a stack limit
	for i, chunk := range chunks {
		ttl := "0"
		if claim && i == len(chunks)-1 { // the generation the last symbols went into
			ttl = strconv.FormatInt(claimTTL.Milliseconds(), 10)
		}
		args := make([]any, 0, len(chunk)+1)
		args = append(args, ttl)
		for _, s := range chunk {
			args = append(args, s)
		}
		res, err := markScript.Run(ctx, tr.Redis, []string{pending, genKey, claimKey}, args...).Int64Slice()
		if err != nil || len(res) != 2 {
			tr.logger().Warn("score trigger: mark failed; the next score tick scores these assets", "market", m, "style", style, "err", err)
			return 0, false, false
		}
		gen, claimed = res[0], res[1] == 1
	}
	return gen, claimed, true
}

func (tr *ScoreTrigger) enqueue(ctx context.Context, m domain.Market, style analytics.Style, symbols []string) {
	if tr.Drop != nil && tr.Drop(m, style) {
		return
	}
	gen, claimed, ok := tr.mark(ctx, m, style, symbols, true)
	if !ok || !claimed {
		return // not claimed: this generation's task is waiting and takes these symbols too
	}
	task := newTask(TypeScoreAssets, ScoreAssetsPayload{Market: m, Style: style, Generation: gen})
	id := fmt.Sprintf("score:assets:%s:%s:g%d", m, style, gen)
	err := runPipeline(ctx, tr.Queue, task, id, tr.RunNow, tr.CopyDelay, asynq.MaxRetry(3))
	switch {
	case err == nil:
	case errors.Is(err, asynq.ErrTaskIDConflict), errors.Is(err, asynq.ErrDuplicateTask):
		// This generation's task is queued already (its claim ran out) and
		// takes these symbols too.
	default:
		tr.logger().Warn("score trigger: enqueue failed; the next score tick scores these assets", "market", m, "style", style, "err", err)
	}
}

// HandleScoreAssets takes the pending assets of its market and style and
// scores them. A failure puts them back (the retry, or the next
// generation's task, takes them again). Running it twice is harmless: the
// second run finds nothing pending, or only newer changes.
func (tr *ScoreTrigger) HandleScoreAssets(ctx context.Context, t *asynq.Task) error {
	var p ScoreAssetsPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("worker: %s: bad payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	_, marketOK := domain.ParseMarket(string(p.Market))
	if _, ok := analytics.ParseStyle(string(p.Style)); !ok || p.Style == "" || !marketOK {
		return fmt.Errorf("worker: %s: bad market or style %q/%q: %w", t.Type(), p.Market, p.Style, asynq.SkipRetry)
	}
	pending, genKey, _ := tr.keys(p.Market, p.Style)
	symbols, err := takeScript.Run(ctx, tr.Redis, []string{pending, genKey}).StringSlice()
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
		tr.mark(context.WithoutCancel(ctx), p.Market, p.Style, symbols, false)
		return err
	}
	tr.logger().Debug("scored on trigger", "market", p.Market, "style", p.Style, "pending", len(symbols), "assets", scored, "verdict_events", events)
	return nil
}
