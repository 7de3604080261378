package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// Task types of market-data ingest.
const (
	TypeIngestTickers = "ingest:tickers"
	TypeIngestCandles = "ingest:candles"
)

// InitialCandles is how much history a series gets on its first ingest:
// enough for the longest indicator (SMA 200) plus warm-up of the
// Wilder-smoothed ones.
const InitialCandles = 300

// IngestPayload names what one ingest task loads.
type IngestPayload struct {
	Market     domain.Market    `json:"market"`
	Exchange   string           `json:"exchange"`
	Instrument string           `json:"instrument"`
	Timeframe  domain.Timeframe `json:"timeframe,omitempty"`
	// Tick is the schedule tick that enqueued the task (for logs; the data
	// loaded does not depend on it, so running a task twice is harmless).
	Tick time.Time `json:"tick"`
}

// Combination is the payload's combination.
func (p IngestPayload) Combination() domain.Combination {
	return domain.Combination{Market: p.Market, Exchange: p.Exchange, Instrument: p.Instrument}
}

// NewIngestTickersTask returns the task that replaces a combination's screener rows.
func NewIngestTickersTask(c domain.Combination, tick time.Time) *asynq.Task {
	return newTask(TypeIngestTickers, IngestPayload{Market: c.Market, Exchange: c.Exchange, Instrument: c.Instrument, Tick: tick.UTC()})
}

// NewIngestCandlesTask returns the task that upserts a combination's candles of one timeframe.
func NewIngestCandlesTask(c domain.Combination, tf domain.Timeframe, tick time.Time) *asynq.Task {
	return newTask(TypeIngestCandles, IngestPayload{Market: c.Market, Exchange: c.Exchange, Instrument: c.Instrument, Timeframe: tf, Tick: tick.UTC()})
}

func newTask(typ string, payload any) *asynq.Task {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("worker: encode %s payload: %v", typ, err)) // plain structs always encode
	}
	return asynq.NewTask(typ, b)
}

// IngestStore is what ingest writes.
type IngestStore interface {
	ReplaceTickers(ctx context.Context, c domain.Combination, tickers []domain.Ticker) error
	Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error)
	UpsertCandleSeries(ctx context.Context, series map[store.CandleKey][]domain.Candle) error
	UpsertChangedCandles(ctx context.Context, series map[store.CandleKey][]domain.Candle, final map[store.CandleKey]time.Time) ([]store.CandleKey, error)
	LatestCandleTimes(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string) (map[string]time.Time, error)
	CandleCounts(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string, atMost int) (map[string]int, error)
	RecordFeedSuccess(ctx context.Context, c domain.Combination, kind string, at time.Time) error
	RecordFeedError(ctx context.Context, c domain.Combination, kind string, at time.Time, msg string) error
	UpsertFundamentals(ctx context.Context, m domain.Market, rows map[string]map[string]float64, at time.Time) error
	SyncListings(ctx context.Context, c domain.Combination, symbols []string, at time.Time) (listed, delisted int, err error)
	FeedHealthOf(ctx context.Context, c domain.Combination, kind string) (store.FeedHealth, error)
}

// Ingester runs the ingest tasks.
type Ingester struct {
	Store  IngestStore
	Feeds  *feeds.Registry
	Logger *slog.Logger
	Now    func() time.Time
	// Notify announces a write so api replicas drop the cached data of its
	// scope; nil skips it (the api cache TTL still applies).
	Notify func(ctx context.Context, s readcache.Scope)
	// MaxCandleSymbols caps the symbols whose candles are ingested per
	// combination (highest volume first); 0 = all. Real feeds need it to
	// stay inside the providers' rate limits.
	MaxCandleSymbols int
	// Changes hears of every write that scoring reads (candles that changed,
	// new fundamentals), so the affected assets are scored at once; nil
	// leaves scoring to the scheduler's tick.
	Changes ChangeSink
	// Pushed reports which series of a combination's timeframe a
	// websocket delivers (PushIngest's live marks, PushedCandles): REST
	// never stores their forming candle (dropPushedEdge), and while
	// every series is delivered the scheduled ingest only loads series with
	// nothing stored yet. nil means none.
	Pushed func(ctx context.Context, c domain.Combination, tf domain.Timeframe) PushedSeries
	// Retention is how long candles of each timeframe are kept (the
	// RetentionJob's): backfill never loads what it would delete. nil
	// keeps everything.
	Retention map[domain.Timeframe]time.Duration
	// Hours are the markets' calendars: a candle read after its market's
	// session close within it is final (finalThrough). nil: every market
	// trades around the clock.
	Hours domain.MarketHours
	// Rescoring is the closes under way in this process: a read of a
	// scored timeframe's just-closed candles is one, and the history of
	// display-only timeframes waits for them before each request (nil:
	// it never waits).
	Rescoring *Rescoring

	// polled is, by combination and timeframe, where the next bulk poll
	// of each series may start at the latest (a *seriesFloors: the
	// series this process has read, ingestBulk).
	polled sync.Map
	// due is, by combination and timeframe, the series polled before
	// their history was read (a *historyDue).
	due sync.Map
	// polls is, by combination and timeframe, the pollState of this
	// process's last complete scheduled poll (pollDue).
	polls sync.Map
	// listed is, by combination, the digest of the symbol list last
	// recorded by syncListings.
	listed sync.Map
	// history holds the display-only history loads under way (historySlot),
	// minuteHistory the one of the 1m tasks (takeHistoryTurn).
	history       chan struct{}
	minuteHistory chan struct{}
	historyOnce   sync.Once
	// minuteHistoryFor and minuteHistoryChunk bound a 1m task's history
	// load (historyTurn); zero is the default, tests set them.
	minuteHistoryFor   time.Duration
	minuteHistoryChunk int
	// scored is, by combination, whether scoredLoaded holds, and under
	// "first" when this process first asked.
	scored sync.Map
}

// PushedSeries is what a websocket delivers of one timeframe of a
// combination.
type PushedSeries struct {
	// All: every series (the combination's timeframe is pushed live).
	All bool
	// Symbols are the series delivered when not all are (a plan's symbol
	// limit): REST keeps polling every series, these included.
	Symbols map[string]bool
}

// Has reports whether the series of symbol is delivered.
func (s PushedSeries) Has(symbol string) bool { return s.All || s.Symbols[symbol] }

// Any reports whether any series is delivered.
func (s PushedSeries) Any() bool { return s.All || len(s.Symbols) > 0 }

// pushed is Pushed's answer, none without the hook.
func (in *Ingester) pushed(ctx context.Context, c domain.Combination, tf domain.Timeframe) PushedSeries {
	if in.Pushed == nil {
		return PushedSeries{}
	}
	return in.Pushed(ctx, c, tf)
}

// ChangeSink is told what ingest changed; ScoreTrigger is the service's.
type ChangeSink interface {
	// WantsCandles reports whether changes of the series of a market,
	// exchange and timeframe matter to it: only those are looked for
	// (the upsert's RETURNING) and announced.
	WantsCandles(m domain.Market, exchange string, tf domain.Timeframe) bool
	CandlesChanged(ctx context.Context, changed []store.CandleKey)
	FundamentalsChanged(ctx context.Context, m domain.Market, symbols []string)
}

func (in *Ingester) logger() *slog.Logger {
	if in.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Logger
}

// Register adds the ingest handlers to a worker.
func (in *Ingester) Register(w *Worker) {
	w.Handle(TypeIngestTickers, asynq.HandlerFunc(in.HandleIngestTickers))
	w.Handle(TypeIngestCandles, asynq.HandlerFunc(in.HandleIngestCandles))
	w.Handle(TypeIngestFundamentals, asynq.HandlerFunc(in.HandleIngestFundamentals))
}

func decodeIngest(t *asynq.Task) (IngestPayload, domain.Combination, error) {
	var p IngestPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return p, domain.Combination{}, fmt.Errorf("worker: %s: bad payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return p, p.Combination(), nil
}

// HandleIngestTickers replaces the screener rows of a combination with a
// fresh snapshot from its feed. Running it twice only re-reads the feed.
func (in *Ingester) HandleIngestTickers(ctx context.Context, t *asynq.Task) error {
	_, c, err := decodeIngest(t)
	if err != nil {
		return err
	}
	p, ok := in.Feeds.For(c)
	if !ok {
		return fmt.Errorf("worker: no configured feed serves %s: %w", c, asynq.SkipRetry)
	}
	tickers, err := p.Tickers(ctx, c)
	if err == nil && len(tickers) == 0 {
		err = errors.New("feed returned no tickers")
	}
	if err == nil {
		err = in.storeTickers(ctx, c, tickers)
	}
	if err != nil {
		in.recordError(c, store.FeedKindTickers, err)
		return fmt.Errorf("worker: ingest tickers %s: %w", c, err)
	}
	in.syncListings(ctx, p, c)
	in.logger().Debug("ingested tickers", "combination", c.String(), "rows", len(tickers))
	return nil
}

// HandleIngestCandles upserts the newest candles of every symbol of a
// combination for one timeframe, resuming each series from its newest
// stored candle (which is re-read: it may still have been open).
func (in *Ingester) HandleIngestCandles(ctx context.Context, t *asynq.Task) error {
	pl, c, err := decodeIngest(t)
	if err != nil {
		return err
	}
	if _, ok := domain.ParseTimeframe(string(pl.Timeframe)); !ok {
		return fmt.Errorf("worker: ingest candles: bad timeframe %q: %w", pl.Timeframe, asynq.SkipRetry)
	}
	if in.cadenced(ctx, t, c, pl.Timeframe) {
		if due, why := in.pollDue(ctx, c, pl.Timeframe); !due {
			in.logger().Debug("candle poll not due", "combination", c.String(), "timeframe", pl.Timeframe, "why", why)
			return nil
		}
		// Between closes the forming candles of a display-only
		// timeframe leave part of every window of the host's budget to
		// the scored timeframes' and the 1m polls.
		ctx = hostbudget.WithClass(ctx, hostbudget.Bulk)
	} else if in.liveRead(t, c, pl.Timeframe) {
		ctx = hostbudget.WithClass(ctx, hostbudget.Live)
	}
	if t.Headers()[HeaderClosing] != "" {
		ctx = context.WithValue(ctx, closingReadKey{}, true)
	}
	started := time.Now()
	n, err := in.IngestCandles(ctx, c, pl.Timeframe, nil)
	if took := time.Since(started); took >= slowRun && hostbudget.ClassOf(ctx) == hostbudget.Live {
		// A read of just-closed candles (a close's, or the minute's 1m
		// bars) that took seconds: a close's rescoring waits for it.
		in.logger().Info("slow closing read", "combination", c.String(), "timeframe", pl.Timeframe, "candles", n, "took", took, "err", err)
	}
	observeRows(c, store.CandleFeed(c.Market, c.Exchange, pl.Timeframe).Kind, n)
	in.recordCandleHealth(ctx, c.Market, c.Exchange, pl.Timeframe, err)
	if err != nil {
		return fmt.Errorf("worker: ingest candles %s %s: %w", c, pl.Timeframe, err)
	}
	in.logger().Debug("ingested candles", "combination", c.String(), "timeframe", pl.Timeframe, "candles", n)
	return nil
}

// IngestCandles loads candles of one timeframe for the given symbols (nil =
// every symbol of the combination) and returns how many were stored.
func (in *Ingester) IngestCandles(ctx context.Context, c domain.Combination, tf domain.Timeframe, symbols []string) (int, error) {
	return in.ingestCandles(ctx, c, tf, symbols, nil, nil)
}

// IngestCandlesFrom is IngestCandles of the given symbols from their
// newest stored candles as read before (latest, by symbol; a symbol
// absent had none): the push feeds' catch-up reads them before it lets the
// pushes be stored, which would otherwise move a series' newest candle
// past the gap the catch-up is there to fill.
func (in *Ingester) IngestCandlesFrom(ctx context.Context, c domain.Combination, tf domain.Timeframe, symbols []string, latest map[string]time.Time) (int, error) {
	return in.CatchUpCandles(ctx, c, tf, symbols, latest, nil)
}

// CatchUpMarks is told what a catch-up (Ingester.CatchUpCandles) has
// stored, so that one cut short or failing knows where each series it
// left starts again.
type CatchUpMarks interface {
	// Settled: the series read from their starting points to the present
	// and stored (or found with nothing new).
	Settled(symbols []string)
	// Reached: series whose read failed part-way; the candles read
	// before the failure are stored, through the time given (the newest
	// of each).
	Reached(newest map[string]time.Time)
}

// CatchUpCandles is IngestCandlesFrom that tells marks (nil: nothing) of
// the series it has read and stored: a catch-up cut short knows which
// series it left, and from where. A series read one a request is read page
// after page from its start, and settled with the transaction that stores
// it (or, when a page fails, what the pages before it brought is stored
// and reached); a multi-symbol read's series are settled when the whole
// read is stored.
func (in *Ingester) CatchUpCandles(ctx context.Context, c domain.Combination, tf domain.Timeframe, symbols []string,
	latest map[string]time.Time, marks CatchUpMarks) (int, error) {
	if latest == nil {
		latest = map[string]time.Time{}
	}
	return in.ingestCandles(ctx, c, tf, symbols, latest, marks)
}

func (in *Ingester) ingestCandles(ctx context.Context, c domain.Combination, tf domain.Timeframe, symbols []string, latest map[string]time.Time,
	marks CatchUpMarks) (int, error) {
	if !c.HasCandles() {
		return 0, fmt.Errorf("no candles are ingested for %s: %w", c, asynq.SkipRetry)
	}
	p, ok := in.Feeds.For(c)
	if !ok {
		return 0, fmt.Errorf("no configured feed serves %s: %w", c, asynq.SkipRetry)
	}
	scheduled := symbols == nil
	if scheduled {
		var err error
		if symbols, err = in.candleSymbols(ctx, p, c); err != nil {
			return 0, err
		}
	}
	if latest == nil {
		var err error
		if latest, err = in.Store.LatestCandleTimes(ctx, c.Market, c.Exchange, tf, symbols); err != nil {
			return 0, ours(err)
		}
	}
	pushed := in.pushed(ctx, c, tf)
	// full: a scheduled poll of every series, REST's alone; when it ends
	// without a failure its pollState is kept (pollDue).
	full := scheduled && !pushed.Any()
	closes := closeTracker{tf: tf}
	if scheduled && pushed.All {
		// What is left is the initial history of new series: bulk work,
		// like the push feeds' catch-up it runs beside.
		symbols = slices.DeleteFunc(symbols, func(s string) bool { _, stored := latest[s]; return stored })
		ctx = hostbudget.WithClass(ctx, hostbudget.Bulk)
	}
	now := in.Now()
	const flushEvery = 40 // series per transaction: bounded memory, few round trips
	batch := map[store.CandleKey][]domain.Candle{}
	stored, failures := 0, 0
	var lastErr error
	want := in.Changes != nil && in.Changes.WantsCandles(c.Market, c.Exchange, tf)
	if want && hostbudget.ClassOf(ctx) == hostbudget.Live {
		// The just-closed candles of a timeframe scoring reads: a close,
		// rescored as they are stored.
		defer in.Rescoring.Begin()()
	}
	// Every batch is stored through the one path of candles; what changed
	// is announced after each stored batch, so that a close's rescoring
	// starts on the first batch of the closing read while the next ones
	// are read (a whole stock market's 4h bars at the bell: a dozen
	// requests), and when the task ends (also when it fails part-way).
	write := in.newCandleWrite()
	defer func() { write.announce(context.WithoutCancel(ctx)) }()
	fetched := map[store.CandleKey]time.Time{} // when each series of the batch was asked for
	var read []string                          // the series read whole since the last flush, for marks
	reached := map[string]time.Time{}          // the series read in part since the last flush, for marks
	flush := func() error {
		if len(batch) == 0 {
			if marks != nil && len(read) > 0 {
				marks.Settled(read)
				read = nil
			}
			return nil
		}
		for key, cs := range batch {
			closes.saw(cs, fetched[key])
		}
		if s := in.pushed(ctx, c, tf); s.Any() {
			dropPushedEdge(batch, fetched, tf, s)
		}
		final := map[store.CandleKey]time.Time{}
		for key, cs := range batch {
			stored += len(cs)
			if open, ok := in.finalThrough(key.Market, key.Timeframe, cs, fetched[key]); ok {
				final[key] = open
			}
		}
		clear(fetched)
		err := write.store(ctx, batch, final)
		clear(batch)
		if err == nil {
			write.announce(ctx)
			if marks != nil && len(read) > 0 {
				marks.Settled(read)
			}
			if marks != nil && len(reached) > 0 {
				marks.Reached(reached)
			}
		}
		read = nil
		clear(reached)
		return err
	}
	if bp, ok := p.(feeds.BulkCandleProvider); ok {
		pending := 0 // candles in batch
		if scheduled && !want && in.Changes != nil && !in.scoredLoaded(ctx, c) {
			// A cold start of a whole stock market: the display-only
			// series' history (eight timeframes of thousands of symbols:
			// most of the budget for a quarter of an hour) waits for the
			// scored series', which the reports need.
			n := len(symbols)
			symbols = slices.DeleteFunc(symbols, func(s string) bool { _, stored := latest[s]; return !stored })
			full = full && len(symbols) == n
		}
		// The series with candles are polled first, then the new ones'
		// history is loaded. A display-only timeframe's history (hundreds
		// of pages of a whole stock market) takes one of historySlots, or
		// waits for a later tick: a worker's bulk slots are never all held
		// by minutes-long history loads while the next tick's polls (the
		// 1m bars) wait in the queue behind them.
		polls, fresh := symbols, []string(nil)
		if scheduled {
			polls = make([]string, 0, len(symbols))
			for _, s := range symbols {
				if _, stored := latest[s]; stored {
					polls = append(polls, s)
				} else {
					fresh = append(fresh, s)
				}
			}
		}
		// A 1m task polls new series' newest bars with the others (two
		// or three bars each, in the same requests) and loads their
		// history after, in its turn: a new listing's just-closed bar does
		// not wait for its history, which takes the free plan's budget
		// minutes for a whole market. The series polled without it are
		// kept (historyDue) until their history is read; a process's
		// first 1m task of the combination also finds those a process
		// before it left without their history (seedDue).
		var due *historyDue
		if scheduled && tf == domain.TF1m && !want {
			due = in.historyDue(c, tf)
			in.seedDue(ctx, c, tf, due, polls)
			if len(fresh) > 0 {
				recent := now.Add(-minuteFirstBars * tf.Duration()).Truncate(tf.Duration())
				for _, s := range fresh {
					latest[s] = recent
				}
				due.add(fresh)
				polls = append(polls, fresh...)
			}
			fresh = due.list()
		}
		if len(fresh) > 0 && closingRead(ctx) {
			// The closing read reads the bars that have just closed, no
			// history (HeaderClosing): the 1m series stay due, the new
			// ones of another timeframe wait for the catch-up.
			fresh, full = nil, false
		}
		var turn historyTurn // a 1m task's is taken at its first history read
		if len(fresh) > 0 && !want && due == nil {
			if turn = in.takeHistoryTurn(tf); turn.ok {
				defer turn.release()
			} else {
				in.logger().Debug("history load waits for a slot", "combination", c.String(), "timeframe", tf, "series", len(fresh))
				fresh, full = nil, false
			}
		}
		keep := func(key store.CandleKey, cs []domain.Candle, asked time.Time) error {
			batch[key], fetched[key] = cs, asked
			if pending += len(cs); len(batch) >= bulkFlushEvery || pending >= bulkFlushCandles {
				pending = 0
				return flush()
			}
			return nil
		}
		n := 0
		var failedAll []string
		parts := [][]string{polls}
		if due != nil {
			// A 1m task's history is read in pieces, until its turn ends.
			parts = append(parts, slices.Collect(slices.Chunk(fresh, in.minuteChunk()))...)
		} else {
			parts = append(parts, fresh)
		}
		for k, part := range parts {
			if len(part) == 0 {
				continue
			}
			pctx := ctx
			history := k > 0 && due != nil // a 1m task's history piece
			if k > 0 && hostbudget.ClassOf(ctx) == hostbudget.Live {
				// New series' history is not a just-closed bar: it
				// does not take the window kept for those.
				pctx = hostbudget.WithClass(ctx, hostbudget.Urgent)
			}
			if history {
				if !turn.ok {
					if turn = in.takeHistoryTurn(tf); !turn.ok {
						in.logger().Debug("history load waits for a slot", "combination", c.String(), "timeframe", tf, "series", len(fresh))
						full = false
						break
					}
					defer turn.release()
				} else if turn.over() {
					in.logger().Debug("history load continues at the next tick", "combination", c.String(), "timeframe", tf, "series", len(fresh))
					full = false
					break
				}
			}
			from := latest
			if history {
				from = nil // their history: InitialCandles each
			}
			// Display-only history (a later part), and display-only bulk
			// work (a push catch-up, a poll between closes) step aside.
			yield := !want && (k > 0 || hostbudget.ClassOf(ctx) == hostbudget.Bulk)
			failed, err := in.ingestBulk(pctx, bp, c, tf, part, from, pushed, scheduled, now, yield, keep)
			if !history {
				n += len(failed) // a due series that fails counts once, in the poll
			}
			failedAll = append(failedAll, failed...)
			if err != nil {
				return stored, err
			}
			if err := flush(); err != nil {
				return stored, err
			}
			if history {
				// A series whose read failed stays due.
				due.remove(slices.DeleteFunc(slices.Clone(part), func(s string) bool { return slices.Contains(failed, s) }))
			}
		}
		if marks != nil {
			// A bulk request's pages may split a series: it is settled
			// once every part has been read and stored.
			marks.Settled(slices.DeleteFunc(slices.Clone(symbols), func(s string) bool { return slices.Contains(failedAll, s) }))
		}
		if n > 0 {
			return stored, fmt.Errorf("%d of %d symbols failed", n, len(symbols))
		}
		if full {
			in.polls.Store(pollKey(c, tf), pollState{nextClose: closes.next})
		}
		return stored, nil
	}
	// A scheduled 1m task takes its history turn at its first new series.
	var turn historyTurn
	asked1m := 0 // new series read in the turn
	defer func() {
		if turn.ok {
			turn.release()
		}
	}()
	for _, sym := range symbols {
		if err := ctx.Err(); err != nil {
			return stored, err // stopping: not a provider's error, and not the rest of the symbols
		}
		since, limit := time.Time{}, InitialCandles
		if _, ok := latest[sym]; !ok && scheduled && tf == domain.TF1m {
			if closingRead(ctx) {
				continue // no history in the closing read (HeaderClosing)
			}
			if !turn.ok && !turn.refused {
				if turn = in.takeHistoryTurn(tf); !turn.ok {
					turn.refused = true
					in.logger().Debug("history load waits for a slot", "combination", c.String(), "timeframe", tf)
				}
			}
			if turn.ok && asked1m > 0 && turn.over() {
				// The turn has ended: its slot goes to the next task.
				turn.release()
				turn.ok, turn.refused = false, true
			}
			if turn.refused {
				full = false
				continue
			}
			asked1m++
		}
		if _, ok := latest[sym]; !ok && !want && hostbudget.ClassOf(ctx) != hostbudget.Live {
			// A display-only history; not in a task of just-closed
			// candles, whose stored series come after it in this loop.
			in.yieldToCloses(ctx, c, tf)
		}
		if last, ok := latest[sym]; ok {
			// A series stalled for longer than its retention resumes at the
			// cut-off: older candles would only be deleted again.
			since = rereadPushed(pushed, sym, tf, retainedSince(in.Retention, tf, now, last))
			limit = min(int(now.Sub(since)/tf.Duration())+2, 1000)
		}
		asked := in.Now()
		cs, err := p.Candles(ctx, c, sym, tf, since, limit)
		for marks != nil && err == nil && len(cs) > 0 && cs[len(cs)-1].Time.Before(tf.Truncate(now).Add(-tf.Duration())) {
			// A catch-up reads the whole hole: a read that ended before
			// the last closed candle is followed by one from its last
			// candle (a provider may read a window of time: OKX's page
			// is short wherever candles are missing), until one brings
			// nothing newer.
			last := cs[len(cs)-1].Time
			var page []domain.Candle
			if page, err = p.Candles(ctx, c, sym, tf, last, limit); err != nil {
				break
			}
			more := slices.DeleteFunc(page, func(m domain.Candle) bool { return !m.Time.After(last) })
			if len(more) == 0 {
				break
			}
			cs = append(cs, more...)
		}
		if err != nil {
			if ctx.Err() != nil {
				return stored, ctx.Err()
			}
			// One bad symbol must not starve the others; it is logged and
			// the task fails at the end so the feed's health shows it.
			failures++
			lastErr = err
			in.logger().Warn("candles rejected", "combination", c.String(), "symbol", sym, "timeframe", tf, "err", err)
			if marks == nil || len(cs) == 0 {
				continue
			}
			// A catch-up's page failed after others were read: those
			// are stored, and the series starts again from their newest
			// candle, not from where this read began.
			reached[sym] = cs[len(cs)-1].Time
		} else {
			read = append(read, sym)
		}
		if len(cs) == 0 {
			continue
		}
		key := store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: tf}
		batch[key], fetched[key] = cs, asked
		if len(batch) >= flushEvery {
			if err := flush(); err != nil {
				return stored, err
			}
		}
	}
	if err := flush(); err != nil {
		return stored, err
	}
	if failures > 0 {
		return stored, fmt.Errorf("%d of %d symbols failed, last: %w", failures, len(symbols), lastErr)
	}
	if full {
		in.polls.Store(pollKey(c, tf), pollState{nextClose: closes.next})
	}
	return stored, nil
}

// bulkFlushEvery and bulkFlushCandles bound what a transaction of a bulk
// read stores: a poll brings thousands of series with a candle or two
// each, a history load hundreds of candles a series, and the statement's
// encoded arguments are held in memory until it is sent.
const (
	bulkFlushEvery   = 500
	bulkFlushCandles = 20000
)

// bulkChunkCandles bounds the candles one BulkCandles call may bring, as
// bulkChunks estimates them: the call holds them all in memory. Each
// chunk is then cut into the provider's own batches (BulkBatches), a
// call a request, so the series a request brought are stored and
// announced (bulkFlushEvery at a time) while the next is read. A poll brings a few candles a series, so the
// requests are as full as the provider allows (the bell's closing read of
// 5,234 Nasdaq stocks: four requests of ≈ 1,500 symbols, not six of
// 1,000); a history load, InitialCandles a series, a thousand series a
// call.
const bulkChunkCandles = 1000 * InitialCandles

// bulkChunks splits symbols, each read from from[sym] (zero: its
// InitialCandles newest), into calls of at most bulkChunkCandles
// estimated candles of tf by now: a series read from a start brings at
// most one candle a tf since it, and the one it starts on.
func bulkChunks(symbols []string, from map[string]time.Time, tf domain.Timeframe, now time.Time) [][]string {
	var out [][]string
	start, est := 0, 0
	for i, sym := range symbols {
		n := InitialCandles
		if since := from[sym]; !since.IsZero() {
			n = min(int(max(now.Sub(since), 0)/tf.Duration())+2, bulkChunkCandles)
		}
		if i > start && est+n > bulkChunkCandles {
			out = append(out, symbols[start:i])
			start, est = i, 0
		}
		est += n
	}
	if start < len(symbols) {
		out = append(out, symbols[start:])
	}
	return out
}

// ingestBulk reads the candles of symbols through a provider that reads
// many in one request, and hands each series to store; it returns how many
// symbols failed (logged), or an error that ends the task.
//
// Each series starts where ingestCandles would start it (its newest stored
// candle, within the retention), but a scheduled poll's never before this
// process's last read of the same series that answered (less two candles and a minute,
// for late corrections): a series with nothing new since then (a stock
// that did not trade) would otherwise make every poll start at its last
// candle, hours or days back, a request for each such start. The floor is
// kept per series and set as each chunk's read returns, so a poll cut
// short (a deadline while the budget is short) still moves the floor of
// what it read, and the next poll is not longer for it. Without a read
// yet (a new process), each series starts at its own newest candle.
// history marks display-only history or bulk work, whose every request
// waits while a close is rescored (yieldToCloses).
func (in *Ingester) ingestBulk(ctx context.Context, bp feeds.BulkCandleProvider, c domain.Combination, tf domain.Timeframe, symbols []string,
	latest map[string]time.Time, pushed PushedSeries, scheduled bool, now time.Time, history bool,
	keep func(store.CandleKey, []domain.Candle, time.Time) error) (failed []string, err error) {
	v, _ := in.polled.LoadOrStore(pollKey(c, tf), &seriesFloors{m: map[string]time.Time{}})
	floors := v.(*seriesFloors)
	var lastErr error
	starts := make(map[string]time.Time, len(symbols))
	for _, sym := range symbols {
		if last, ok := latest[sym]; ok {
			since := retainedSince(in.Retention, tf, now, last)
			// This process's polls reached the floor; a caller's own
			// starting point (a catch-up's, a gap's) is read from.
			if floor := floors.get(sym); scheduled && since.Before(floor) {
				since = floor
			}
			starts[sym] = rereadPushed(pushed, sym, tf, since)
		} else {
			starts[sym] = time.Time{}
		}
	}
	var chunks [][]string
	for _, part := range bulkChunks(symbols, starts, tf, now) {
		chunks = append(chunks, bp.BulkBatches(part)...)
	}
	read := func(ctx context.Context, chunk []string) chunkRead {
		if history {
			in.yieldToCloses(ctx, c, tf)
		}
		from := make(map[string]time.Time, len(chunk))
		for _, sym := range chunk {
			from[sym] = starts[sym]
		}
		r := chunkRead{chunk: chunk, asked: in.Now()}
		r.got, r.bad, r.err = bp.BulkCandles(ctx, c, tf, from, InitialCandles)
		return r
	}
	parallel := 1
	if hostbudget.ClassOf(ctx) == hostbudget.Live {
		// A read of just-closed candles (the minute's 1m bars, the bell's
		// 4h bars of a whole exchange: four requests each) is waited for
		// by clients and by the close's rescoring: its requests go
		// together, each stored as it is read, in order.
		parallel = liveChunkReads
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel() // the reads not taken when a chunk fails
	for r := range readChunks(rctx, chunks, parallel, read) {
		if r.err == nil && scheduled {
			floors.set(r.chunk, r.bad, r.asked.Add(-2*tf.Duration()-time.Minute))
		}
		for sym, e := range r.bad {
			failed, lastErr = append(failed, sym), e
			in.logger().Warn("candles rejected", "combination", c.String(), "symbol", sym, "timeframe", tf, "err", e)
		}
		for sym, cs := range r.got {
			if len(cs) == 0 {
				continue
			}
			if serr := keep(store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: tf}, cs, r.asked); serr != nil {
				return failed, serr
			}
		}
		if r.err != nil {
			if ctx.Err() != nil {
				return failed, ctx.Err()
			}
			// What was read is stored; the rest of this chunk and the
			// chunks after it wait for the next poll.
			return failed, r.err
		}
	}
	if err := ctx.Err(); err != nil {
		return failed, err // stopped with reads not taken
	}
	if len(failed) > 0 {
		in.logger().Warn("bulk candle read: symbols failed", "combination", c.String(), "timeframe", tf, "failed", len(failed), "last", lastErr)
	}
	return failed, nil
}

// liveChunkReads is how many requests of a close's bulk read
// (hostbudget.Live) are under way at once.
const liveChunkReads = 4

// chunkRead is one request of a bulk read: its symbols, when it was
// asked, and what it returned.
type chunkRead struct {
	chunk []string
	asked time.Time
	got   map[string][]domain.Candle
	bad   map[string]error
	err   error
}

// readChunks reads the chunks, parallel at a time (reads under way and
// answers not yet taken together), and yields them in their order; the
// caller stops by breaking out and cancelling ctx (the reads under way
// then end, and none more starts).
func readChunks(ctx context.Context, chunks [][]string, parallel int, read func(context.Context, []string) chunkRead) iter.Seq[chunkRead] {
	return func(yield func(chunkRead) bool) {
		if parallel <= 1 {
			for _, chunk := range chunks {
				if !yield(read(ctx, chunk)) {
					return
				}
			}
			return
		}
		outs := make([]chan chunkRead, len(chunks))
		for i := range outs {
			outs[i] = make(chan chunkRead, 1)
		}
		slots := make(chan struct{}, parallel)
		go func() {
			for i, chunk := range chunks {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				go func() {
					defer func() {
						if p := recover(); p != nil { // as the task's own goroutine would have been
							outs[i] <- chunkRead{chunk: chunk, err: fmt.Errorf("worker: bulk read panicked: %v", p)}
						}
					}()
					outs[i] <- read(ctx, chunk)
				}()
			}
		}()
		for i := range chunks {
			var r chunkRead
			select {
			case r = <-outs[i]:
				<-slots // a slot is freed when its answer is taken: at most parallel held
			case <-ctx.Done():
				return
			}
			if !yield(r) {
				return
			}
		}
	}
}

// yieldToCloses waits, before a request of a display-only timeframe's
// history, while a close is rescored in this process (Rescoring.Wait).
func (in *Ingester) yieldToCloses(ctx context.Context, c domain.Combination, tf domain.Timeframe) {
	if waited := in.Rescoring.Wait(ctx); waited >= 100*time.Millisecond {
		in.logger().Debug("history load waited for a close's rescoring", "combination", c.String(), "timeframe", tf, "waited", waited)
	}
}

// historySlots is how many display-only history loads a process runs at
// once (of the bulk lane's slots, 6 by default).
const historySlots = 2

// historySlot takes one of historySlots for a display-only history load;
// ok is false when all are taken.
func (in *Ingester) historySlot() (release func(), ok bool) {
	in.initHistory()
	select {
	case in.history <- struct{}{}:
		return func() { <-in.history }, true
	default:
		return nil, false
	}
}

// minuteFirstBars is how far back a 1m task's first poll of a new series
// reads, in bars: the one that just closed and the two before.
const minuteFirstBars = 3

// historyDue is the series of one combination and timeframe polled before
// their history was read (the 1m tasks'), by symbol.
type historyDue struct {
	mu     sync.Mutex
	m      map[string]bool
	seeded bool // seedDue has read the store
}

// seedDue adds to due, once a process, the stored series (of symbols) with
// fewer than unloadedCandles candles: those whose history a process before
// this one did not read (it stopped first), or a listing younger than that,
// which loads its few bars again. A failed read is logged and tried again
// at the next task.
func (in *Ingester) seedDue(ctx context.Context, c domain.Combination, tf domain.Timeframe, due *historyDue, symbols []string) {
	due.mu.Lock()
	seeded := due.seeded
	due.mu.Unlock()
	if seeded || len(symbols) == 0 {
		return
	}
	counts, err := in.Store.CandleCounts(ctx, c.Market, c.Exchange, tf, symbols, unloadedCandles)
	if err != nil {
		in.logger().Warn("reading which series lack their history failed", "combination", c.String(), "timeframe", tf, "err", err)
		return
	}
	var short []string
	for _, s := range symbols {
		if counts[s] < unloadedCandles {
			short = append(short, s)
		}
	}
	due.add(short)
	due.mu.Lock()
	due.seeded = true
	due.mu.Unlock()
	if len(short) > 0 {
		in.logger().Info("series without their history load it in the 1m tasks' turn", "combination", c.String(), "timeframe", tf, "series", len(short))
	}
}

// historyDue is the set of c's series of tf whose history is still due.
func (in *Ingester) historyDue(c domain.Combination, tf domain.Timeframe) *historyDue {
	v, _ := in.due.LoadOrStore(pollKey(c, tf), &historyDue{m: map[string]bool{}})
	return v.(*historyDue)
}

func (d *historyDue) add(symbols []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range symbols {
		d.m[s] = true
	}
}

func (d *historyDue) remove(symbols []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range symbols {
		delete(d.m, s)
	}
}

// list is the due symbols, sorted.
func (d *historyDue) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.m))
}

// minuteHistorySlots is how many 1m tasks of a process load new series'
// history at once: one of the minute lane's slots (three by default), so
// the others always poll the bars that just closed.
const minuteHistorySlots = 1

// minuteHistoryFor is how long a 1m task loads history before it leaves
// the rest to the next tick's task (its slot then polls again), and
// minuteHistoryChunk how many series it reads between two looks at the
// clock.
const (
	minuteHistoryFor   = 2 * time.Minute
	minuteHistoryChunk = 100
)

// historyTurn is a task's permission to load new series' history: one of
// historySlots, or for a 1m task the minute lane's own slot, which ends
// minuteHistoryFor after it is taken (until).
type historyTurn struct {
	release func()
	ok      bool
	refused bool // asked and refused: the series wait for a later tick
	until   time.Time
}

// over reports whether a turn bounded in time has ended.
func (t historyTurn) over() bool { return !t.until.IsZero() && !time.Now().Before(t.until) }

// minuteChunk is how many series a 1m task's history load reads between
// two looks at the clock.
func (in *Ingester) minuteChunk() int {
	if in.minuteHistoryChunk > 0 {
		return in.minuteHistoryChunk
	}
	return minuteHistoryChunk
}

// takeHistoryTurn takes a history slot for a load of tf; ok is false when
// every slot is taken. A 1m load is bounded by time (the turn's until,
// on the wall clock: it bounds how long the lane's slot is held).
func (in *Ingester) takeHistoryTurn(tf domain.Timeframe) historyTurn {
	if tf != domain.TF1m {
		release, ok := in.historySlot()
		return historyTurn{release: release, ok: ok}
	}
	in.initHistory()
	select {
	case in.minuteHistory <- struct{}{}:
	default:
		return historyTurn{}
	}
	d := in.minuteHistoryFor
	if d <= 0 {
		d = minuteHistoryFor
	}
	return historyTurn{release: func() { <-in.minuteHistory }, ok: true, until: time.Now().Add(d)}
}

func (in *Ingester) initHistory() {
	in.historyOnce.Do(func() {
		in.history = make(chan struct{}, historySlots)
		in.minuteHistory = make(chan struct{}, minuteHistorySlots)
	})
}

// seriesFloors is, by symbol, where the next bulk poll of a series may
// start at the latest.
type seriesFloors struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (f *seriesFloors) get(sym string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[sym]
}

// set moves the floor of the symbols read (but those that failed) to at.
func (f *seriesFloors) set(symbols []string, failed map[string]error, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sym := range symbols {
		if _, bad := failed[sym]; !bad && at.After(f.m[sym]) {
			f.m[sym] = at
		}
	}
}

// scoredFirstFor bounds how long display-only history waits for the
// scored series' (scoredLoaded) after this process began ingesting: a
// scored series that keeps failing must not keep the rest waiting.
const scoredFirstFor = 15 * time.Minute

// scoredLoaded reports whether the scored timeframes of c's exchange have
// had a complete ingest (every symbol, no failure: the feed health's
// success), or scoredFirstFor has passed since this process's first
// ingest. Once true it stays true.
func (in *Ingester) scoredLoaded(ctx context.Context, c domain.Combination) bool {
	if v, ok := in.scored.Load(c); ok && v.(bool) {
		return true
	}
	first, _ := in.scored.LoadOrStore("first", in.Now())
	ready := in.Now().Sub(first.(time.Time)) >= scoredFirstFor
	for _, tf := range domain.Timeframes {
		if ready || in.Changes == nil || !in.Changes.WantsCandles(c.Market, c.Exchange, tf) {
			continue
		}
		feed := store.CandleFeed(c.Market, c.Exchange, tf)
		h, err := in.Store.FeedHealthOf(ctx, feed.Combination, feed.Kind)
		if err == nil && h.LastSuccessAt != nil {
			ready = true
		}
	}
	if ready {
		in.scored.Store(c, true)
	}
	return ready
}

// syncListings records the combination's symbol list (store.SyncListings)
// when it differs from the one this process recorded last: a feed's list
// changes once a day at most, and a delisted asset then leaves the
// analytics list. A failure is logged and retried at the next run.
func (in *Ingester) syncListings(ctx context.Context, p feeds.Provider, c domain.Combination) {
	symbols, err := p.Symbols(ctx, c)
	if err != nil || len(symbols) == 0 {
		return // the tickers were read: the list will be next time
	}
	h := fnv.New64a()
	for _, s := range slices.Sorted(slices.Values(symbols)) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	digest := h.Sum64()
	if last, ok := in.listed.Load(c); ok && last.(uint64) == digest {
		return
	}
	listed, delisted, err := in.Store.SyncListings(ctx, c, symbols, in.Now())
	if err != nil {
		in.logger().Warn("recording the listed symbols failed; retried at the next tickers run", "combination", c.String(), "err", err)
		return
	}
	in.listed.Store(c, digest)
	if listed > 0 || delisted > 0 {
		in.logger().Info("listed symbols changed", "combination", c.String(), "listed", listed, "delisted", delisted, "symbols", len(symbols))
		in.notify(ctx, readcache.Analytics(c.Market))
		in.notify(ctx, readcache.TopSetups())
	}
}

// dropPushedEdge takes out of a batch read over REST the candles that
// may still have been open when their series was asked for, of the series
// a push feed delivers: the push feed owns the candle being formed. A batch
// holds series read over seconds (minutes under a tight request budget);
// a candle read open before a minute close and written after it would
// replace the closed state the push feed had stored in between, and nothing
// would repair it while the push feed is live (and REST, when it keeps
// polling a pushed series, resumes from the newest stored candle, which
// the push feed has moved past it). The time of asking, not of the answer,
// is what is compared: the exchange may have answered before a close the
// answer arrived after. The series the push feed does not deliver keep their
// forming candle from REST.
func dropPushedEdge(batch map[store.CandleKey][]domain.Candle, fetched map[store.CandleKey]time.Time, tf domain.Timeframe, pushed PushedSeries) {
	for key, cs := range batch {
		if !pushed.Has(key.Symbol) {
			continue
		}
		at := fetched[key]
		n := len(cs)
		for n > 0 && cs[n-1].Time.Add(tf.Duration()).After(at) {
			n--
		}
		if n == 0 {
			delete(batch, key)
		} else {
			batch[key] = cs[:n]
		}
	}
}

// pushedRereads is how many closed candles before the newest stored one
// REST reads again of a series a push feed delivers while REST keeps polling
// it (a plan's symbol limit): the push feed, not REST, moved that series'
// newest candle, so a REST read of an older candle written after the
// push feed's (its correction, Alpaca's updated bar 30 s after the bar) would
// otherwise never be read again. A read is written at most a minute or so
// after it was made (a request waits for the budget's next window, or its
// task fails), so three candles of the shortest timeframe cover it.
const pushedRereads = 3

// rereadPushed is where REST resumes a series from since: pushedRereads
// candles earlier for a series the push feed delivers while REST polls it.
func rereadPushed(pushed PushedSeries, symbol string, tf domain.Timeframe, since time.Time) time.Time {
	if pushed.All || !pushed.Symbols[symbol] {
		return since
	}
	return since.Add(-pushedRereads * tf.Duration())
}

// candleSymbols lists the symbols of a combination, capped to the highest
// volumes when MaxCandleSymbols is set.
func (in *Ingester) candleSymbols(ctx context.Context, p feeds.Provider, c domain.Combination) ([]string, error) {
	symbols, err := p.Symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	if in.MaxCandleSymbols <= 0 || len(symbols) <= in.MaxCandleSymbols {
		return symbols, nil
	}
	tickers, err := in.Store.Tickers(ctx, c)
	if err != nil {
		return nil, err
	}
	volume := make(map[string]float64, len(tickers))
	for _, t := range tickers {
		volume[t.Symbol] = t.Volume
	}
	sort.SliceStable(symbols, func(i, j int) bool { return volume[symbols[i]] > volume[symbols[j]] })
	return symbols[:in.MaxCandleSymbols], nil
}

// ourSide marks a failure on this service's side (Postgres, the task's own
// time-out), which says nothing about the feed: it is not recorded as the
// feed's error, so it can never turn stale data into a 502 "upstream
// failing". The task still fails and is retried.
type ourSide struct{ err error }

func (e ourSide) Error() string { return e.err.Error() }
func (e ourSide) Unwrap() error { return e.err }

// ours wraps a store error as ourSide (nil stays nil).
func ours(err error) error {
	if err == nil {
		return nil
	}
	return ourSide{err}
}

func (in *Ingester) recordError(c domain.Combination, kind string, err error) {
	var o ourSide
	if errors.As(err, &o) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		in.logger().Warn("ingest failed on this side; the feed's health is unchanged", "combination", c.String(), "kind", kind, "err", err)
		return
	}
	// A fresh context: the task's may be the one that ended.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rerr := in.Store.RecordFeedError(ctx, c, kind, in.Now(), err.Error()); rerr != nil {
		in.logger().Error("record feed error", "combination", c.String(), "err", rerr)
	}
}

func (in *Ingester) notify(ctx context.Context, s readcache.Scope) {
	if in.Notify != nil {
		in.Notify(ctx, s)
	}
}

// closingReadKey marks the context of a closing read's task
// (HeaderClosing).
type closingReadKey struct{}

func closingRead(ctx context.Context) bool {
	v, _ := ctx.Value(closingReadKey{}).(bool)
	return v
}
