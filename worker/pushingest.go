package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/rediskeys"
)

// PushIngest stores what the exchanges' websockets push (package
// feeds/push) as ingest stores what REST returns: candles upserted and
// announced to the score trigger, screener rows replaced. It follows every
// combination of the region whose configured feed is the exchange itself
// (binance, okx) and has push feeds, the minute and daily bars of the stock
// exchanges whose feed is alpaca (push.Alpaca, within the plan's symbol
// limit: limitAlpaca), the screener rows of a feed pushing its prices over
// streaming HTTP (oanda: push.OandaPricing), and the candles of every
// combination served by a feed computed in process (the synthetic one,
// read at every minute close: push.Local); the scheduler's REST ingest
// keeps running beside it as the safety net and for everything else.
//
// One process of a deployment holds the push feeds at a time (a lease in Redis): the
// exchanges count connections per IP, and every worker process of a
// deployment shares one. The holder keeps the lease while it runs; another
// worker takes over within LeaseTTL of its end.
type PushIngest struct {
	In     *Ingester
	Region string
	Redis  redis.UniversalClient
	// Push configures the connections (base URLs, metrics, logger);
	// OnCandle, OnTickers and Repair are set by Run.
	Push push.Config
	// FlushEvery bounds how long a pushed candle waits to be stored; a
	// closed candle is stored at once. 0 means 1 s.
	FlushEvery time.Duration
	// OpenEvery is how often the still-open candle of a series is stored
	// (the exchanges push it every second or two; storing each push would
	// cost a write per series and second for a price scoring reads once per
	// open-candle slot). 0 means 10 s.
	OpenEvery time.Duration
	// TickerFlushEvery is how often the screener rows of a combination are
	// replaced with the pushed ones; 0 means 5 s.
	TickerFlushEvery time.Duration
	// ReplanEvery is how often the symbols to follow are listed again (new
	// listings, delistings); a changed plan restarts the connections. 0
	// means 1 h.
	ReplanEvery time.Duration
	// LeaseTTL is the push lease's length; 0 means 30 s.
	LeaseTTL time.Duration
	// LocalTicks drives the reads of an in-process feed (tests); nil
	// means one at every minute close (push.LocalConfig.Ticks).
	LocalTicks <-chan time.Time
	// KeyPrefix starts the Redis keys of the lease and the live marks
	// ("push:lease", "push:live:crypto:binance"); tests isolate with it.
	KeyPrefix string
	Logger    *slog.Logger

	// catchUps is the catch-up queue of every kind of source a lead
	// follows (catchUpWorkers).
	catchUps *catchUpQueue

	// listPlans and followPlans stand in for plans and follow (tests).
	listPlans   func(ctx context.Context) ([]push.Plan, bool, error)
	followPlans func(ctx context.Context, plans []push.Plan) error
}

// liveTTL is how long a live mark lasts unless refreshed (every
// liveTTL/6): when the pushing worker stops, the scheduled REST ingest
// takes its series back within that time.
const liveTTL = 30 * time.Second

func liveKey(prefix string, c domain.Combination) string {
	return rediskeys.Space(prefix).PushLive(string(c.Market), c.Exchange)
}

func seriesKey(prefix string, c domain.Combination, tf domain.Timeframe) string {
	return rediskeys.Space(prefix).PushSeries(string(c.Market), c.Exchange, string(tf))
}

// allSeries is the member of a pushed-series set standing for every
// symbol.
const allSeries = "*"

// PushedCandles is the Ingester's Pushed hook: every series when the
// live mark of the combination's exchange is set, else the series its
// timeframe's pushed-series set names (every one for "*"). Without
// Redis, none: REST polls every series, as without push feeds.
func PushedCandles(rdb redis.UniversalClient, keyPrefix string) func(ctx context.Context, c domain.Combination, tf domain.Timeframe) PushedSeries {
	return func(ctx context.Context, c domain.Combination, tf domain.Timeframe) PushedSeries {
		pipe := rdb.Pipeline()
		live := pipe.Exists(ctx, liveKey(keyPrefix, c))
		members := pipe.SMembers(ctx, seriesKey(keyPrefix, c, tf))
		if _, err := pipe.Exec(ctx); err != nil {
			return PushedSeries{}
		}
		if live.Val() == 1 {
			return PushedSeries{All: true}
		}
		var out PushedSeries
		for _, m := range members.Val() {
			if m == allSeries {
				return PushedSeries{All: true}
			}
			if out.Symbols == nil {
				out.Symbols = map[string]bool{}
			}
			out.Symbols[m] = true
		}
		return out
	}
}

func (s *PushIngest) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// HasPushFeeds reports whether any combination of the region is pushed
// (PushIngest has something to do) with the feeds of reg.
func HasPushFeeds(reg *feeds.Registry, region string) bool {
	for _, c := range domain.Catalogue(region) {
		if sourceOf(reg, c) != notPushed {
			return true
		}
	}
	return false
}

// sourceKind is how a combination is pushed.
type sourceKind int

const (
	notPushed sourceKind = iota
	// exchangePush: the exchange's websockets (push.Manager), when
	// the configured feed is the exchange itself and it has push feeds.
	exchangePush
	// inProcess: the candles of a feed computed in process, read at every
	// close (push.Local); a second exchange's fallback is not pushed.
	inProcess
	// pricePush: the screener rows of a feed whose prices are pushed
	// over streaming HTTP (feeds.PricePusher: OANDA's pricing stream);
	// its candles keep their REST schedule.
	pricePush
	// alpacaPush: the stock exchanges' minute and daily bars from
	// Alpaca's websocket (push.Alpaca), when the configured feed of
	// stocks is alpaca.
	alpacaPush
)

func sourceOf(reg *feeds.Registry, c domain.Combination) sourceKind {
	p, ok := reg.For(c)
	_, pushesPrices := p.(feeds.PricePusher)
	switch {
	case !ok:
		return notPushed
	case p.Name() == c.Exchange && push.Supports(c):
		return exchangePush
	case p.Name() == c.Exchange && pushesPrices:
		return pricePush
	case p.Name() == feeds.NameAlpaca && push.AlpacaSupports(c):
		return alpacaPush
	case feeds.InProcess(p) && c.HasCandles():
		return inProcess
	}
	return notPushed
}

// Plans lists what the region follows over push feeds: candles of every timeframe of the
// candle combinations (the symbols REST ingest loads), and the screener
// rows of every combination pushed by its exchange. Combinations served
// by a second exchange's fallback are not pushed. Stock exchanges on
// Alpaca get their minute and daily bars, within the plan's symbol limit
// (limitAlpaca).
func (s *PushIngest) Plans(ctx context.Context) ([]push.Plan, error) {
	plans, _, err := s.plans(ctx)
	return plans, err
}

// plans is Plans, and whether the Alpaca symbols were picked without
// every exchange's screener volumes (a cold start): worth picking again
// soon.
func (s *PushIngest) plans(ctx context.Context) ([]push.Plan, bool, error) {
	var plans []push.Plan
	for _, c := range domain.Catalogue(s.Region) {
		kind := sourceOf(s.In.Feeds, c)
		if kind == notPushed {
			continue
		}
		p, _ := s.In.Feeds.For(c)
		plan := push.Plan{Combination: c}
		if kind == exchangePush || kind == pricePush {
			all, err := p.Symbols(ctx, c)
			if err != nil {
				return nil, false, err
			}
			plan.Tickers, plan.Symbols = true, all
		}
		if c.HasCandles() && kind != pricePush {
			syms, err := s.In.candleSymbols(ctx, p, c)
			if err != nil {
				return nil, false, err
			}
			for _, sym := range syms {
				if kind == alpacaPush {
					plan.Series = append(plan.Series, push.AlpacaSeries(sym)...)
					continue
				}
				for _, tf := range domain.Timeframes {
					plan.Series = append(plan.Series, push.Series{Symbol: sym, Timeframe: tf})
				}
			}
		}
		plans = append(plans, plan)
	}
	provisional, err := s.limitAlpaca(ctx, plans)
	if err != nil {
		return nil, false, err
	}
	return plans, provisional, nil
}

// Run follows the push feeds while it holds the lease, until ctx ends.
func (s *PushIngest) Run(ctx context.Context) error {
	ttl := s.LeaseTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	key := rediskeys.Space(s.KeyPrefix).PushLease()
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:]) // this process's claim on the lease
	for ctx.Err() == nil {
		ok, err := s.Redis.SetNX(ctx, key, token, ttl).Result()
		if err != nil || !ok {
			waitCtx(ctx, ttl/3)
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		go s.keepLease(lctx, cancel, key, token, ttl)
		if err := s.lead(lctx); err != nil {
			s.logger().Error("push: not following", "err", err)
			waitCtx(lctx, ttl)
		}
		cancel()
		_ = releaseLease.Run(context.WithoutCancel(ctx), s.Redis, []string{key}, token).Err()
	}
	return nil
}

// extendLease and releaseLease act only on the caller's own lease.
var (
	extendLease  = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
	releaseLease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// keepLease extends the lease every third of its length and ends the
// following (cancel) when it is lost.
func (s *PushIngest) keepLease(ctx context.Context, cancel context.CancelFunc, key, token string, ttl time.Duration) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := extendLease.Run(ctx, s.Redis, []string{key}, token, ttl.Milliseconds()).Int()
		if err == nil && n == 0 {
			s.logger().Warn("push: lease lost; another worker holds the push feeds")
			cancel()
			return
		}
	}
}

// lead follows the region's plans until ctx ends, listing them again every
// ReplanEvery. The plans of each kind of source (the exchanges'
// websockets, Alpaca's, the price pushes, the in-process feed) are
// followed apart, and only a kind whose plans changed restarts its
// connections (which catch up over REST before their series are marked
// live, as after any start): Alpaca's stream picking other symbols (two
// minutes into a cold start, when the screener has its volumes, and at
// any hour) leaves the crypto exchanges' connections and catch-up as they
// are.
func (s *PushIngest) lead(ctx context.Context) error {
	every := s.ReplanEvery
	if every <= 0 {
		every = time.Hour
	}
	listPlans := s.plans
	if s.listPlans != nil {
		listPlans = s.listPlans
	}
	followPlans := s.follow
	if s.followPlans != nil {
		followPlans = s.followPlans
	}
	plans, provisional, err := listPlans(ctx)
	if err != nil {
		return err
	}
	// The catch-up workers outlive every follow: a follow that ends
	// drops its jobs not yet taken and waits for those under way.
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	s.catchUps = s.catchUpWorkers(wctx)
	defer func() { s.catchUps = nil }()
	type following struct {
		plans []push.Plan
		stop  context.CancelFunc
		done  chan error
	}
	running := map[sourceKind]*following{}
	start := func(k sourceKind, ps []push.Plan) {
		runCtx, stop := context.WithCancel(ctx)
		f := &following{plans: ps, stop: stop, done: make(chan error, 1)}
		go func() { f.done <- followPlans(runCtx, ps) }()
		running[k] = f
	}
	end := func(k sourceKind) error {
		f := running[k]
		delete(running, k)
		f.stop()
		return <-f.done
	}
	defer func() {
		for _, f := range running {
			f.stop()
		}
		for k := range running {
			if err := end(k); err != nil && ctx.Err() == nil {
				s.logger().Error("push: following ended", "err", err)
			}
		}
	}()
	for k, ps := range s.byKind(plans) {
		start(k, ps)
	}
	for ctx.Err() == nil {
		wait := every
		if provisional {
			wait = min(every, provisionalReplan)
		}
		waitCtx(ctx, wait)
		next, prov, err := listPlans(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.logger().Warn("push: listing symbols failed; following the previous list", "err", err)
			}
			continue
		}
		provisional = prov
		kinds := s.byKind(next)
		for k, f := range running {
			if !reflect.DeepEqual(kinds[k], f.plans) {
				if err := end(k); err != nil {
					return err
				}
			}
		}
		for k, ps := range kinds {
			if running[k] == nil {
				start(k, ps)
			}
		}
	}
	return nil
}

// byKind groups plans by the kind of source that follows them.
func (s *PushIngest) byKind(plans []push.Plan) map[sourceKind][]push.Plan {
	out := map[sourceKind][]push.Plan{}
	for _, p := range plans {
		k := sourceOf(s.In.Feeds, p.Combination)
		out[k] = append(out[k], p)
	}
	return out
}

// follow runs the connections of plans and stores what they push until ctx
// ends.
func (s *PushIngest) follow(ctx context.Context, plans []push.Plan) error {
	if len(plans) == 0 {
		<-ctx.Done()
		return nil
	}
	candles := newCandleSink(s)
	tickers := newTickerSink(s)
	cfg := s.Push
	cfg.OnCandle = candles.add
	cfg.OnTickers = tickers.add
	cfg.Repair = func(ctx context.Context, g push.Gap) error {
		// The gap is read from where it began (the last candle the dropped
		// connection delivered), not from the newest stored candle: the
		// new connection has usually stored a newer one by now, and every
		// candle in between would be skipped. What is read is upserted
		// over what is stored; the candle still forming is left to the
		// push feed (dropPushedEdge).
		_, err := s.In.IngestCandlesFrom(ctx, g.Combination, g.Timeframe, []string{g.Symbol}, map[string]time.Time{g.Symbol: g.Since})
		return err
	}
	cfg.RepairBatch = s.repairBatch
	var remote, local, priced, alpaca []push.Plan
	for _, p := range plans {
		switch sourceOf(s.In.Feeds, p.Combination) {
		case inProcess:
			local = append(local, p)
		case pricePush:
			priced = append(priced, p)
		case alpacaPush:
			alpaca = append(alpaca, p)
		default:
			remote = append(remote, p)
		}
	}
	src := sources{remote: push.New(cfg), alpaca: push.NewAlpaca(cfg), local: push.NewLocal(push.LocalConfig{
		Feed: localFeed{s.In.Feeds}, OnCandles: candles.addAll, Now: s.In.Now, Ticks: s.LocalTicks, Logger: s.logger()})}
	var wg sync.WaitGroup
	wg.Go(func() { candles.run(ctx) })
	wg.Go(func() { tickers.run(ctx) })
	wg.Go(func() { s.markLive(ctx, src, plans, candles) })
	// One line per follow, naming the kinds it follows (one, from lead).
	var counts []any
	for _, k := range []struct {
		name  string
		plans []push.Plan
	}{{"combinations", remote}, {"in_process", local}, {"price_pushes", priced}, {"alpaca", alpaca}} {
		if len(k.plans) > 0 {
			counts = append(counts, k.name, len(k.plans))
		}
	}
	s.logger().Info("push: following", counts...)
	var remoteErr, alpacaErr error
	if len(local) > 0 {
		wg.Go(func() { _ = src.local.Run(ctx, local) })
	}
	for _, run := range s.pricePushes(priced, tickers.add) {
		wg.Go(func() { run(ctx) })
	}
	if len(alpaca) > 0 {
		wg.Go(func() {
			if alpacaErr = src.alpaca.Run(ctx, alpaca); alpacaErr != nil {
				s.logger().Error("push: not following alpaca", "err", alpacaErr)
			}
		})
	}
	if len(remote) > 0 {
		if remoteErr = src.remote.Run(ctx, remote); remoteErr != nil && ctx.Err() == nil {
			s.logger().Error("push: not following the exchanges", "err", remoteErr)
		}
	}
	wg.Wait()
	return errors.Join(remoteErr, alpacaErr)
}

// sources is the exchanges' websockets, Alpaca's and the in-process feed
// together.
type sources struct {
	remote *push.Manager
	alpaca *push.Alpaca
	local  *push.Local
}

func (s sources) Live(c domain.Combination) bool {
	return s.remote.Live(c) || s.alpaca.Live(c) || s.local.Live(c)
}

// localFeed reads the candles of a combination from the feed serving it.
type localFeed struct{ reg *feeds.Registry }

func (f localFeed) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	p, ok := f.reg.For(c)
	if !ok {
		return nil, fmt.Errorf("worker: no configured feed serves %s", c)
	}
	return p.Candles(ctx, c, symbol, tf, since, limit)
}

// catchUpParallel is how many catch-up passes run at once.
const catchUpParallel = 2

// catchUpWorkers starts catchUpParallel workers on a new queue, until ctx
// ends. The passes are one job per combination and timeframe, of every
// kind of source (a job is taken once its follow has ended only if it was
// added after the follow dropped its queued ones): every job of a timeframe scoring reads (of every
// combination up by then) before any display-only one, in the order
// added, shortest timeframe first. Every pass at once (a dozen
// combinations) made a dozen writers extend the candles table together,
// each waiting for the others' extension locks; one combination's
// timeframes one after the other left a cold start's 1h history waiting
// for its 15m one, and the scored history of one exchange for the
// display-only history of another. A job whose follow has ended is
// dropped.
func (s *PushIngest) catchUpWorkers(ctx context.Context) *catchUpQueue {
	queue := newCatchUpQueue()
	for range catchUpParallel {
		go func() {
			for {
				j, ok := queue.next(ctx)
				if !ok {
					return
				}
				if j.ctx.Err() == nil {
					s.catchUpTimeframe(j.ctx, j, j.sink)
				}
				queue.done(j)
				j.passes.Done()
			}
		}()
	}
	return queue
}

// markLive sets the live marks of every candle combination whose
// connections are all up (mark: the combination, or for Alpaca the series
// of its final timeframe), so the scheduled REST ingest stops polling its
// pushed series, or leaves their forming candle to the push feed when it
// keeps polling them, and clears them while they are not. When the
// connections first come up, one REST pass (catchUp, in the background)
// loads what happened since the last stored candles (the time no worker
// pushed), or the initial history of a series with none; only then are a timeframe's
// pushed candles stored (the sink holds them), since REST resumes from the
// newest stored candle and a pushed one stored first would leave a new
// series without its history, or an old one with a gap. The mark is set
// while that pass runs: the pass loads every series the scheduled ingest
// would, and both sharing the host's request budget starved the pass at a
// whole exchange's size (minutes of budget). The marks are refreshed
// whatever the passes do, so a combination marked live stays marked.
// After the pass, each dropped connection repairs its own series' gaps.
func (s *PushIngest) markLive(ctx context.Context, m interface{ Live(domain.Combination) bool }, plans []push.Plan, candles *candleSink) {
	caughtUp, marked := map[domain.Combination]bool{}, map[domain.Combination]bool{}
	// The passes are jobs of the queue every kind of source shares
	// (catchUpWorkers), or of one of their own when there is none.
	queue := s.catchUps
	if queue == nil {
		wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		queue = s.catchUpWorkers(wctx)
		defer stop()
	}
	var passes sync.WaitGroup
	defer func() {
		// The jobs not yet taken are dropped (their starting points
		// stay recorded for the next pass); those under way end with
		// ctx.
		queue.drop(&passes)
		passes.Wait()
		for c := range marked {
			_ = s.Redis.Del(context.WithoutCancel(ctx), s.markKeys(c)...).Err()
		}
	}()
	for ctx.Err() == nil {
		every := liveTTL / 6
		for _, p := range plans {
			c := p.Combination
			if len(p.Series) == 0 {
				continue
			}
			if !m.Live(c) {
				every = 200 * time.Millisecond // mark it soon after it comes up
				if marked[c] {
					_ = s.Redis.Del(ctx, s.markKeys(c)...).Err()
					delete(marked, c)
				}
				continue
			}
			if !caughtUp[c] {
				caughtUp[c] = true
				jobs := s.catchUpJobs(ctx, p, candles)
				for i := range jobs {
					jobs[i].ctx, jobs[i].sink, jobs[i].passes = ctx, candles, &passes
				}
				passes.Add(len(jobs))
				queue.add(jobs)
			}
			if err := s.mark(ctx, p); err == nil {
				marked[c] = true
			}
		}
		waitCtx(ctx, every)
	}
}

// mark sets (and extends) the live marks of a plan whose connections are
// up: the combination's live mark when the push feed delivers every series
// as REST would load it (the exchanges' klines, the in-process feed);
// for Alpaca, whose pushes are final for minute bars only
// (push.AlpacaFinal), the pushed-series set of the minute bars,
// naming every series ("*") when the plan carries every symbol of the
// combination, else the symbols it carries (push.Plan.Partial): REST
// then keeps polling every series, and leaves those series' forming
// candle to the push feed.
func (s *PushIngest) mark(ctx context.Context, p push.Plan) error {
	c := p.Combination
	if sourceOf(s.In.Feeds, c) != alpacaPush {
		return s.Redis.Set(ctx, liveKey(s.KeyPrefix, c), 1, liveTTL).Err()
	}
	members := map[domain.Timeframe][]any{}
	for _, se := range p.Series {
		if push.AlpacaFinal(se.Timeframe) {
			members[se.Timeframe] = append(members[se.Timeframe], se.Symbol)
		}
	}
	pipe := s.Redis.TxPipeline()
	for tf, syms := range members {
		key := seriesKey(s.KeyPrefix, c, tf)
		if !p.Partial {
			syms = []any{allSeries}
		}
		pipe.Del(ctx, key)
		pipe.SAdd(ctx, key, syms...)
		pipe.PExpire(ctx, key, liveTTL)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// markKeys are the keys mark may set for a combination.
func (s *PushIngest) markKeys(c domain.Combination) []string {
	keys := []string{liveKey(s.KeyPrefix, c)}
	for _, tf := range domain.Timeframes {
		keys = append(keys, seriesKey(s.KeyPrefix, c, tf))
	}
	return keys
}

// catchUpJob is the catch-up of one timeframe of a plan: its series, and
// where each starts (read before the pushes were let through; absent
// when that read failed, and the pushes are then held until the job is
// done).
type catchUpJob struct {
	c       domain.Combination
	tf      domain.Timeframe
	series  []push.Series
	symbols []string
	latest  map[string]time.Time
	read    bool
	scored  bool // a timeframe scoring reads

	// The follow it belongs to: its context (the job is dropped once it
	// ends), its candle sink, and the passes it waits for.
	ctx    context.Context
	sink   *candleSink
	passes *sync.WaitGroup
}

// catchUpQueue holds the catch-up jobs not yet taken: those of the scored
// timeframes first, each group in the order added. A display-only job is
// taken only while no scored one is queued or running: the second worker
// then waits rather than spend the host's budget (and Postgres) on 1m
// history while the reports wait for a scored timeframe's.
type catchUpQueue struct {
	mu            sync.Mutex
	scored, all   []catchUpJob
	runningScored int
	ready         chan struct{} // signalled when a job is added or done
}

func newCatchUpQueue() *catchUpQueue {
	return &catchUpQueue{ready: make(chan struct{}, 1)}
}

func (q *catchUpQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *catchUpQueue) add(jobs []catchUpJob) {
	q.mu.Lock()
	for _, j := range jobs {
		if j.scored {
			q.scored = append(q.scored, j)
		} else {
			q.all = append(q.all, j)
		}
	}
	q.mu.Unlock()
	q.signal()
}

// drop takes out of the queue the jobs of the follow whose passes are
// counted by passes, and counts them done.
func (q *catchUpQueue) drop(passes *sync.WaitGroup) {
	q.mu.Lock()
	n := 0
	keep := func(js []catchUpJob) []catchUpJob {
		return slices.DeleteFunc(js, func(j catchUpJob) bool {
			if j.passes == passes {
				n++
				return true
			}
			return false
		})
	}
	q.scored, q.all = keep(q.scored), keep(q.all)
	q.mu.Unlock()
	passes.Add(-n)
	q.signal()
}

// done tells the queue a job taken from it has ended.
func (q *catchUpQueue) done(j catchUpJob) {
	if !j.scored {
		return
	}
	q.mu.Lock()
	q.runningScored--
	q.mu.Unlock()
	q.signal()
}

// next takes the first job that may run, waiting for one until ctx ends.
func (q *catchUpQueue) next(ctx context.Context) (catchUpJob, bool) {
	for {
		q.mu.Lock()
		var j catchUpJob
		found := true
		switch {
		case len(q.scored) > 0:
			j, q.scored = q.scored[0], q.scored[1:]
			q.runningScored++
		case len(q.all) > 0 && q.runningScored == 0:
			j, q.all = q.all[0], q.all[1:]
		default:
			found = false
		}
		more := len(q.scored) > 0 || len(q.all) > 0 && q.runningScored == 0
		q.mu.Unlock()
		if found {
			if more { // pass the signal on to another waiting worker
				q.signal()
			}
			return j, true
		}
		select {
		case <-ctx.Done():
			return catchUpJob{}, false
		case <-q.ready:
		}
	}
}

// catchUpJobs prepares the catch-up of a plan: one job per timeframe that
// loads every series of it over REST from its newest stored candle, or
// from where an unfinished catch-up would have (unfinishedStarts) (the
// jobs of the timeframes scoring reads run first: at a whole exchange's
// size the pass takes minutes of request budget, and after a cold start
// the reports wait for the scored timeframes' history, not for the 1m
// one). Where each series starts is read here, for every timeframe, and
// then the held pushes are let through: a closed candle of a scored
// timeframe is stored and scored at its close even while the pass is
// still loading that timeframe's history, instead of minutes later
// (pushes stored first would move a series' newest candle past the gap
// the pass fills, so they wait for that read). A timeframe whose starting
// points cannot be read keeps its pushes held until its job is done.
func (s *PushIngest) catchUpJobs(ctx context.Context, p push.Plan, candles *candleSink) []catchUpJob {
	byTF := map[domain.Timeframe][]push.Series{}
	for _, se := range p.Series {
		byTF[se.Timeframe] = append(byTF[se.Timeframe], se)
	}
	c := p.Combination
	var jobs []catchUpJob
	for _, tf := range domain.Timeframes {
		series := byTF[tf]
		if len(series) == 0 {
			continue
		}
		j := catchUpJob{c: c, tf: tf, series: series, symbols: make([]string, len(series)),
			scored: s.In.Changes != nil && s.In.Changes.WantsCandles(c.Market, c.Exchange, tf)}
		for i, se := range series {
			j.symbols[i] = se.Symbol
		}
		all := slices.Clone(j.symbols)
		latest, err := s.In.Store.LatestCandleTimes(ctx, c.Market, c.Exchange, tf, j.symbols)
		if err == nil {
			err = s.forgetUnloaded(ctx, c, tf, latest)
		}
		if err == nil {
			err = s.unfinishedStarts(ctx, c, tf, all, latest)
		}
		if err == nil && sourceOf(s.In.Feeds, c) != alpacaPush { // pushes whole candles, as mark says
			j.symbols = behind(j.symbols, latest, tf, s.In.Now())
		}
		if err == nil {
			err = s.recordStarts(ctx, c, tf, j.symbols, latest)
		}
		if err != nil {
			s.logger().Warn("push: reading or recording where the catch-up starts failed; the pushes wait for the catch-up",
				"combination", c.String(), "timeframe", string(tf), "err", err)
			j.symbols = slices.Clone(all)
		} else {
			j.latest, j.read = latest, true
			candles.release(c, series)
		}
		if len(j.symbols) > 0 {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// behind is the symbols whose catch-up starts (latest) before the candle
// forming at now: those with something to catch up. A catch-up starts from
// the newest stored candle, or from where an earlier one cut short would
// have (unfinishedStarts), so for a series whose forming candle is its
// start the request could only read that candle again, which the push
// feed delivers whole (an exchange's kline and the in-process feed push
// the candle's open, high, low, close and volume so far).
func behind(symbols []string, latest map[string]time.Time, tf domain.Timeframe, now time.Time) []string {
	forming := tf.Truncate(now)
	return slices.DeleteFunc(slices.Clone(symbols), func(s string) bool {
		last, ok := latest[s]
		return ok && !last.Before(forming)
	})
}

// catchUpStartsTTL is how long the starting points of catch-ups that did
// not finish are kept after they were last written (a catch-up's start, or
// a series it stored part of) in their timeframe (the next catch-up, at the
// next start of the push feeds, takes them).
const catchUpStartsTTL = 7 * 24 * time.Hour

// noStart is a starting point of a series with nothing stored: its
// catch-up loads its initial history.
const noStart = "-"

func (s *PushIngest) startsKey(c domain.Combination, tf domain.Timeframe) string {
	return rediskeys.Space(s.KeyPrefix).PushCatchUp(string(c.Market), c.Exchange, string(tf))
}

// unfinishedStarts moves back, in latest, the starting point of each
// series of planned that an earlier catch-up (of this process or another)
// recorded and did not finish: the pushes it let through may have stored
// candles past a hole it had still to fill, so the newest stored candle
// is no longer where the series' catch-up starts. Those of series no
// longer planned (delisted, no longer picked for Alpaca's stream) are
// forgotten. Without Redis there is nothing recorded.
func (s *PushIngest) unfinishedStarts(ctx context.Context, c domain.Combination, tf domain.Timeframe, planned []string,
	latest map[string]time.Time) error {
	if s.Redis == nil {
		return nil
	}
	starts, err := s.Redis.HGetAll(ctx, s.startsKey(c, tf)).Result()
	if err != nil {
		return err
	}
	var gone []string
	inPlan := make(map[string]bool, len(planned))
	for _, sym := range planned {
		inPlan[sym] = true
	}
	for sym := range starts {
		if !inPlan[sym] {
			gone = append(gone, sym)
			delete(starts, sym)
		}
	}
	if len(gone) > 0 {
		if err := s.Redis.HDel(ctx, s.startsKey(c, tf), gone...).Err(); err != nil {
			return err
		}
	}
	moved := 0
	for sym, v := range starts {
		last, stored := latest[sym]
		if !stored {
			continue // loads its history from the start anyway
		}
		if v == noStart {
			delete(latest, sym)
			moved++
			continue
		}
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue // not ours: the series starts from its newest candle
		}
		if at := time.UnixMicro(us).UTC(); at.Before(last) {
			latest[sym] = at
			moved++
		}
	}
	if moved > 0 {
		s.logger().Info("push: series an earlier catch-up left start where it would have", "combination", c.String(),
			"timeframe", string(tf), "series", moved)
	}
	return nil
}

// recordStarts records where the catch-up of symbols starts (latest),
// before the pushes are let through; catchUpMarks forgets a series once its
// catch-up has stored it (Settled), or moves its start to the newest candle
// stored of a read that failed part-way (Reached). Without Redis nothing is
// recorded.
func (s *PushIngest) recordStarts(ctx context.Context, c domain.Combination, tf domain.Timeframe, symbols []string, latest map[string]time.Time) error {
	if s.Redis == nil || len(symbols) == 0 {
		return nil
	}
	values := make([]any, 0, 2*len(symbols))
	for _, sym := range symbols {
		v := noStart
		if at, ok := latest[sym]; ok {
			v = strconv.FormatInt(at.UnixMicro(), 10)
		}
		values = append(values, sym, v)
	}
	key := s.startsKey(c, tf)
	pipe := s.Redis.TxPipeline()
	pipe.HSet(ctx, key, values...)
	pipe.Expire(ctx, key, catchUpStartsTTL)
	_, err := pipe.Exec(ctx)
	return err
}

// catchUpMarks keeps a catch-up job's recorded starting points
// (recordStarts) as it stores the series: a series read to the present
// is forgotten, one whose read failed part-way starts again after what
// was stored. A failure only costs the next catch-up a read of those
// series again.
type catchUpMarks struct {
	s   *PushIngest
	ctx context.Context
	c   domain.Combination
	tf  domain.Timeframe
}

func (m catchUpMarks) Settled(symbols []string) {
	if m.s.Redis == nil || len(symbols) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), time.Second)
	defer cancel()
	if err := m.s.Redis.HDel(ctx, m.s.startsKey(m.c, m.tf), symbols...).Err(); err != nil {
		m.s.logger().Debug("push: forgetting caught-up series failed", "combination", m.c.String(), "timeframe", string(m.tf), "err", err)
	}
}

func (m catchUpMarks) Reached(newest map[string]time.Time) {
	if m.s.Redis == nil || len(newest) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), time.Second)
	defer cancel()
	if err := m.s.recordStarts(ctx, m.c, m.tf, slices.Collect(maps.Keys(newest)), newest); err != nil {
		m.s.logger().Debug("push: moving the catch-up's starting points failed", "combination", m.c.String(), "timeframe", string(m.tf), "err", err)
	}
}

// unloadedCandles: a series with fewer candles stored never had its
// initial history (InitialCandles) loaded.
const unloadedCandles = InitialCandles / 4

// forgetUnloaded takes out of latest (where each series' catch-up starts)
// the series whose stored history never finished loading, so the catch-up
// loads their initial history as for a series with nothing stored. A
// catch-up lets the pushes through before it loads (catchUpJobs), so a
// catch-up cut short (the push feeds restarted for a new plan, the worker
// died) leaves a series with its pushed candles and no history; the next
// catch-up would start from the newest pushed candle, and the scheduled
// REST ingest loads only series with nothing stored: the history would
// never be loaded, and the series never scored. A young listing with less
// history than that loads its few candles again, once per catch-up.
func (s *PushIngest) forgetUnloaded(ctx context.Context, c domain.Combination, tf domain.Timeframe, latest map[string]time.Time) error {
	if len(latest) == 0 {
		return nil
	}
	counts, err := s.In.Store.CandleCounts(ctx, c.Market, c.Exchange, tf, slices.Collect(maps.Keys(latest)), unloadedCandles)
	if err != nil {
		return err
	}
	n := 0
	for sym := range latest {
		if counts[sym] < unloadedCandles {
			delete(latest, sym)
			n++
		}
	}
	if n > 0 {
		s.logger().Info("push: series without their history load it in the catch-up", "combination", c.String(), "timeframe", string(tf), "series", n)
	}
	return nil
}

// catchUpTimeframe runs a catch-up job. Its requests are bulk work
// (hostbudget.Bulk): they leave part of every window of the host's budget
// to the ticker refreshes, fundamentals and gap repairs that keep served
// data current while it runs.
func (s *PushIngest) catchUpTimeframe(ctx context.Context, j catchUpJob, candles *candleSink) {
	ctx = hostbudget.WithClass(ctx, hostbudget.Bulk)
	began := time.Now()
	var n int
	var err error
	if j.read {
		n, err = s.In.CatchUpCandles(ctx, j.c, j.tf, j.symbols, j.latest, catchUpMarks{s, ctx, j.c, j.tf})
	} else {
		n, err = s.In.IngestCandles(ctx, j.c, j.tf, j.symbols)
	}
	s.logger().Debug("push: caught up", "combination", j.c.String(), "timeframe", string(j.tf),
		"series", len(j.symbols), "candles", n, "took", time.Since(began).Round(time.Millisecond))
	if err != nil && ctx.Err() == nil {
		s.logger().Warn("push: catching up over REST failed", "combination", j.c.String(), "timeframe", string(j.tf), "err", err)
	}
	if !j.read {
		candles.release(j.c, j.series)
	}
}

// waitCtx waits d or until ctx ends.
func waitCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
