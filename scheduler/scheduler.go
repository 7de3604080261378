// Package scheduler enqueues the periodic tasks: it only enqueues. Each
// periodic task gets a deterministic task id per tick (for example
// "ingest:tickers:crypto:binance:spot:20261122T101500"), so several
// scheduler replicas enqueue each tick once: the second enqueue of an id
// is refused by asynq as a conflict.
//
// A job of a market that closes (Job.Market: stocks, forex) follows its
// calendar: it is enqueued on the ticks when the market trades, and once
// after each close, the catch-up that stores the session's final candles
// and screener rows, under an id of the close
// ("ingest:tickers:stocks:nasdaq:stock:close:20261127T180000") that asynq
// keeps until the next open, so no later tick of the closure enqueues it
// again.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/worker"
)

// Entry is one periodic job: every Interval, Tasks gives what to enqueue
// for the tick (the start of the interval, UTC).
type Entry struct {
	Name     string
	Interval time.Duration
	// Offset moves the ticks past the interval's boundaries: a tick at
	// every k·Interval + Offset (UTC).
	Offset time.Duration
	Tasks  func(tick time.Time) []Job
}

// Tick is the entry's latest tick at or before now.
func (e Entry) Tick(now time.Time) time.Time {
	return now.Add(-e.Offset).Truncate(e.Interval).Add(e.Offset)
}

// Job is one task with its deterministic id.
type Job struct {
	ID    string
	Task  *asynq.Task
	Queue string
	// Timeout bounds one run of the task.
	Timeout time.Duration
	// Market is the market whose sessions the job follows (its data does
	// not move while the market is closed); empty for a job of every tick.
	Market domain.Market
	// Closing: the job is part of its market's closing read (closingRead):
	// the candles scoring reads and the 1m bars. The rest waits for the
	// catch-up, so that the close's scoring has the machine.
	Closing bool
}

// CatchUpDelay is how long after a close a market's catch-up waits: the
// provider's last bars and closing prints settle in the seconds after the
// close, and a read at the bell could miss them.
const CatchUpDelay = 2 * time.Minute

// maxCatchUpRetention bounds how long asynq keeps a finished catch-up
// when the next open is not known: longer than any closure (a holiday
// weekend is under four days).
const maxCatchUpRetention = 8 * 24 * time.Hour

// Config configures a Scheduler.
type Config struct {
	RedisURL string
	Logger   *slog.Logger
	Now      func() time.Time
	Entries  []Entry
	// Hours are the markets' calendars (calendar.Book): a job of a market
	// is enqueued while it trades, at the tick of its close (closingRead)
	// and once after each close (catchUp). Nil: every market trades around
	// the clock.
	Hours domain.MarketHours
}

// Scheduler enqueues the entries' jobs on their ticks.
type Scheduler struct {
	cfg    Config
	client *asynq.Client
}

// New returns a scheduler.
func New(cfg Config) (*Scheduler, error) {
	opt, err := rediskeys.AsynqOpt(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("scheduler: redis url: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{cfg: cfg, client: asynq.NewClient(opt)}, nil
}

// Run enqueues every entry's current tick at once, then each following
// tick, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.client.Close()
	s.cfg.Logger.Info("scheduler started", "entries", len(s.cfg.Entries))
	next := make([]time.Time, len(s.cfg.Entries))
	for {
		now := s.cfg.Now().UTC()
		wake := now.Add(time.Minute)
		for i, e := range s.cfg.Entries {
			tick := e.Tick(now)
			if !tick.Before(next[i]) {
				s.EnqueueTick(ctx, e, tick)
				next[i] = tick.Add(e.Interval)
			}
			if next[i].Before(wake) {
				wake = next[i]
			}
		}
		select {
		case <-ctx.Done():
			s.cfg.Logger.Info("scheduler stopped")
			return nil
		// wake is on the configured clock, which need not be the wall
		// clock (a benchmark's shifted one): the wait is measured on it.
		case <-time.After(wake.Sub(s.cfg.Now()) + 10*time.Millisecond):
		}
	}
}

// EnqueueTick enqueues an entry's jobs of one tick and returns how many
// were new (the others were already enqueued by another replica).
func (s *Scheduler) EnqueueTick(ctx context.Context, e Entry, tick time.Time) int {
	fresh := 0
	for _, p := range s.Plan(e, tick) {
		opts := []asynq.Option{
			asynq.TaskID(p.ID),
			asynq.Queue(p.Queue),
			asynq.MaxRetry(2),
			asynq.Retention(p.Retention),
		}
		if p.Timeout > 0 {
			opts = append(opts, asynq.Timeout(p.Timeout))
		}
		task := asynq.NewTaskWithHeaders(p.Task.Type(), p.Task.Payload(), p.Headers)
		_, err := s.client.EnqueueContext(ctx, task, opts...)
		switch {
		case err == nil:
			fresh++
		case errors.Is(err, asynq.ErrTaskIDConflict) || errors.Is(err, asynq.ErrDuplicateTask):
		default:
			s.cfg.Logger.Warn("enqueue failed", "task_id", p.ID, "err", err)
		}
	}
	return fresh
}

// Planned is one job as a tick enqueues it.
type Planned struct {
	Job
	Headers map[string]string
	// Retention is how long asynq keeps the finished task's id, so that
	// a replica running late cannot enqueue the same work again.
	Retention time.Duration
}

// Plan is what a tick of e enqueues: the entry's jobs with their
// headers, and for a market that is closed at the tick, nothing or its
// catch-up (catchUp).
func (s *Scheduler) Plan(e Entry, tick time.Time) []Planned {
	// A tick not started within its interval is superseded by the next:
	// the worker skips it (worker.HeaderNotAfter). This is a start-by
	// time, not asynq's Deadline, which would also cut short a task that
	// started on time but late in its tick, so that under load none ever
	// finished.
	notAfter := tick.Add(e.Interval).UTC().Format(time.RFC3339Nano)
	stamp := tickStamp(tick)
	jobs := e.Tasks(tick)
	out := make([]Planned, 0, len(jobs))
	for _, j := range jobs {
		series, periodic := strings.CutSuffix(j.ID, ":"+stamp)
		closing := false
		if j.Market != "" {
			st := domain.StateAt(s.cfg.Hours, j.Market, tick)
			if !st.Open && !(j.Closing && closingRead(st, tick, e.Interval)) {
				if c, ok := catchUp(j, series, st, tick, e.Interval); ok && periodic {
					out = append(out, c)
				}
				continue
			}
			closing = !st.Open
		}
		headers := map[string]string{worker.HeaderNotAfter: notAfter}
		if closing {
			headers[worker.HeaderClosing] = "1"
		}
		if periodic {
			headers[worker.HeaderSeries] = series
		}
		out = append(out, Planned{Job: j, Headers: headers, Retention: 2 * e.Interval})
	}
	return out
}

// closingRead reports whether tick is a closed market's closing read: the
// first tick at or after its session's close, within CatchUpDelay of it,
// when the jobs marked Closing are planned as a tick of the session (with
// its start-by time). The session's last 1m bar and the candles scoring
// reads that end with the session (a stock's 12:00-16:00 4h bar) are read
// at the bell, so their reports are rescored within seconds of the close;
// the catch-up CatchUpDelay later reads the rest (screener rows, the
// display-only timeframes) and what settled after the bell (late prints,
// the provider's corrections).
func closingRead(st domain.MarketState, tick time.Time, interval time.Duration) bool {
	closed := st.Session.Close
	return !closed.IsZero() && !tick.Before(closed) && tick.Before(closed.Add(min(interval, CatchUpDelay)))
}

// catchUp is the catch-up of job j (of series series) at a tick when its
// market is closed (st): the first tick CatchUpDelay after the session's
// close and every later one of the closure plan it under the same id,
// the series and the close, so asynq takes it once. It runs however late
// it starts (no start-by header: it is the last read of the session, no
// later tick does it again) and its id is kept until the next open. ok is
// false before the delay, and when no session has closed yet.
func catchUp(j Job, series string, st domain.MarketState, tick time.Time, interval time.Duration) (Planned, bool) {
	closed := st.Session.Close
	if closed.IsZero() || tick.Before(closed.Add(CatchUpDelay)) {
		return Planned{}, false
	}
	keep := maxCatchUpRetention
	if !st.NextOpen.IsZero() {
		keep = min(st.NextOpen.Sub(tick)+interval, maxCatchUpRetention)
	}
	j.ID = series + ":close:" + tickStamp(closed)
	return Planned{Job: j, Headers: map[string]string{}, Retention: keep}, true
}

// tickStamp ends a periodic job's task id: the tick, so each tick of a
// series has an id of its own (the series' is the id without it).
func tickStamp(tick time.Time) string { return tick.UTC().Format("20060102T150405") }

// IngestEntries are the market-data entries for a region: tickers of
// every served combination every tickerEvery, candles of every served
// candle-bearing combination and timeframe every candleEvery. A
// combination no feed serves (served: what the deployment's feeds serve,
// nil for every combination) is never scheduled: its tasks could only fail.
func IngestEntries(region string, served domain.Served, tickerEvery, candleEvery time.Duration) []Entry {
	var combos []domain.Combination
	for _, c := range domain.Catalogue(region) {
		if served.Has(c) {
			combos = append(combos, c)
		}
	}
	scored, rest := candleOrder(region, served)
	// The 1m series follow the scored ones at every tick, not rotated:
	// their bars are polled every minute and read at once, in a lane of
	// their own (worker.QueueMinute).
	minute := slices.DeleteFunc(slices.Clone(rest), func(sr candleSeries) bool { return sr.tf != domain.TF1m })
	rest = slices.DeleteFunc(rest, func(sr candleSeries) bool { return sr.tf == domain.TF1m })
	first := append(slices.Clip(scored), minute...)
	return []Entry{
		{Name: "ingest:tickers", Interval: tickerEvery, Tasks: func(tick time.Time) []Job {
			jobs := make([]Job, 0, len(combos))
			for _, c := range rotated(combos, tick, tickerEvery) {
				jobs = append(jobs, Job{
					ID:   fmt.Sprintf("ingest:tickers:%s:%s:%s:%s", c.Market, c.Exchange, c.Instrument, tickStamp(tick)),
					Task: worker.NewIngestTickersTask(c, tick), Queue: worker.QueueLive, Timeout: tickerEvery * 3,
					Market: c.Market,
				})
			}
			return jobs
		}},
		{Name: "ingest:candles", Interval: candleEvery, Tasks: func(tick time.Time) []Job {
			jobs := make([]Job, 0, len(first)+len(rest))
			for _, sr := range append(slices.Clip(first), rotated(rest, tick, candleEvery)...) {
				c, tf := sr.c, sr.tf
				queue := worker.QueueIngest
				if tf == domain.TF1m {
					queue = worker.QueueMinute
				}
				jobs = append(jobs, Job{
					ID:   fmt.Sprintf("ingest:candles:%s:%s:%s:%s:%s", c.Market, c.Exchange, c.Instrument, tf, tickStamp(tick)),
					Task: worker.NewIngestCandlesTask(c, tf, tick), Queue: queue, Timeout: 5 * time.Minute,
					Market: c.Market, Closing: sr.scored || tf == domain.TF1m,
				})
			}
			return jobs
		}},
	}
}

// rotated is the tick's order of tasks that have no order of their own
// (the combinations' tickers, the display-only candle series): each tick
// starts one further along. A worker that cannot finish a tick's tasks
// within the tick runs them in queue order and drops the rest as
// superseded (worker.HeaderNotAfter); in a fixed order the same last ones
// would be dropped every tick and never refreshed. Rotated, each is first
// once in len(items) ticks.
func rotated[T any](items []T, tick time.Time, every time.Duration) []T {
	n := int64(len(items))
	if n == 0 || every <= 0 {
		return items
	}
	k := ((tick.UnixNano()/int64(every))%n + n) % n
	return append(slices.Clone(items[k:]), items[:k]...)
}

type candleSeries struct {
	c      domain.Combination
	tf     domain.Timeframe
	scored bool // scoring reads it (worker.ScoresSeries)
}

// candleOrder is the order of a tick's candle ingest: first the series
// scoring reads (worker.ScoresSeries: those the score trigger watches, the
// default style's timeframe first), then the others, rotated per tick
// (rotated); each group by timeframe in candleTimeframes' order. asynq runs a queue
// in order, so on a cold start the analytics are scored (ingest triggers
// scoring) before the display-only series are loaded, so crypto's
// intraday series does not wait behind the 15m and 1h candles of forex
// and stocks, which nothing scores.
func candleOrder(region string, served domain.Served) (scored, rest []candleSeries) {
	for _, tf := range candleTimeframes {
		for _, c := range domain.Catalogue(region) {
			if !c.HasCandles() || !served.Has(c) {
				continue
			}
			sr := candleSeries{c: c, tf: tf}
			if worker.ScoresSeries(region, served, c.Market, c.Exchange, tf) {
				sr.scored = true
				scored = append(scored, sr)
			} else {
				rest = append(rest, sr)
			}
		}
	}
	return scored, rest
}

// candleTimeframes are the timeframes in ingest order: the default
// style's, then the other styles', then the display-only ones.
var candleTimeframes = func() []domain.Timeframe {
	order := []domain.Timeframe{analytics.DefaultStyle.Timeframe()}
	for _, st := range analytics.Styles {
		if !slices.Contains(order, st.Timeframe()) {
			order = append(order, st.Timeframe())
		}
	}
	for _, tf := range domain.Timeframes {
		if !slices.Contains(order, tf) {
			order = append(order, tf)
		}
	}
	return order
}()

// ScoreEntries are the analytics entries for a region: every market whose
// candle source is served is scored every scoreEvery, crypto in every
// trading style, the other markets in the default one (style changes
// crypto only). They tick whatever the markets' hours: a closed market's
// run finds every asset's last candle unchanged and skips it (the
// catch-up's candles were scored when they were stored), and a market
// that is not scored for a weekend would raise MarketdScoringStalled.
func ScoreEntries(region string, served domain.Served, scoreEvery time.Duration) []Entry {
	return []Entry{{Name: "score", Interval: scoreEvery, Tasks: func(tick time.Time) []Job {
		var jobs []Job
		for _, m := range domain.Markets {
			if !domain.Scored(region, m, served) {
				continue
			}
			for _, st := range analytics.ScoredStyles(m) {
				jobs = append(jobs, Job{
					ID:   fmt.Sprintf("score:%s:%s:%s", m, st, tickStamp(tick)),
					Task: worker.NewScoreTask(m, st, tick), Queue: worker.QueueDefault, Timeout: 5 * time.Minute,
				})
			}
		}
		return jobs
	}}}
}

// StatsEntries are the statistics entries for a region: every market whose
// candle source is served every statsEvery.
func StatsEntries(region string, served domain.Served, statsEvery time.Duration) []Entry {
	return []Entry{{Name: "stats", Interval: statsEvery, Offset: BetweenCloses(statsEvery), Tasks: func(tick time.Time) []Job {
		var jobs []Job
		for _, m := range domain.Markets {
			if domain.Scored(region, m, served) {
				jobs = append(jobs, Job{ID: fmt.Sprintf("stats:%s:%s", m, tickStamp(tick)),
					Task: worker.NewStatsTask(m, tick), Queue: worker.QueueDefault, Timeout: 15 * time.Minute})
			}
		}
		return jobs
	}}}
}

// WebhookEntries wake the webhook dispatcher every `every`: it fans new
// verdict changes out and sends what is due (retries included).
func WebhookEntries(every time.Duration) []Entry {
	return []Entry{{Name: "webhooks", Interval: every, Tasks: func(tick time.Time) []Job {
		return []Job{{ID: "webhooks:dispatch:" + tickStamp(tick),
			Task: worker.NewWebhookDispatchTask(tick), Queue: worker.QueueCritical, Timeout: 5 * time.Minute}}
	}}}
}

// FundamentalsEntries refresh the fundamental inputs of every market's
// served analytics source every `every`, FundamentalsOffset(every) past
// its boundaries; a closed market's once after its close (its inputs do
// not move while it is shut, and the scorer uses them for a week).
func FundamentalsEntries(region string, served domain.Served, every time.Duration) []Entry {
	return []Entry{{Name: "ingest:fundamentals", Interval: every, Offset: FundamentalsOffset(every), Tasks: func(tick time.Time) []Job {
		var jobs []Job
		for _, m := range domain.Markets {
			for _, src := range domain.AnalyticsSources(region, m, served) {
				jobs = append(jobs, Job{ID: fmt.Sprintf("ingest:fundamentals:%s:%s:%s:%s", m, src.Exchange, src.Instrument, tickStamp(tick)),
					Task: worker.NewIngestFundamentalsTask(src, tick), Queue: worker.QueueIngest, Timeout: 10 * time.Minute,
					Market: m})
			}
		}
		return jobs
	}}}
}

// FundamentalsOffset is how far past its interval's boundaries the
// fundamentals refresh ticks: half the greatest common divisor of the
// interval and 15 minutes (7 min 30 s for 15 minutes or an hour), so never
// on a 15-minute close. New fundamentals rescore their assets in every
// style at once (on Binance, every pair with a perpetual: 400 assets × 4
// styles); on the close they would be scored beside the closed candles,
// which are due within seconds.
func FundamentalsOffset(every time.Duration) time.Duration { return BetweenCloses(every) }

// BetweenCloses is the offset that puts the ticks of a job every `every`
// halfway between two 15-minute closes (the shortest scored timeframe's):
// half the greatest common divisor of every and 15 minutes. The
// fundamentals refresh and the maintenance jobs (candle retention and
// packing, the archive's thinning, the stream's pruning) tick there, never
// on a close, when the markets' closing reads and rescoring want the
// cores: the candle retention's packing moved 1.5 M candles at 16:00 New
// York, beside the stock close.
func BetweenCloses(every time.Duration) time.Duration {
	a, b := every, 15*time.Minute
	for b != 0 {
		a, b = b, a%b
	}
	return a / 2
}

// StreamPruneInterval is how often the event stream's log is pruned: the
// rows past the retention of one interval are a few thousand at most.
const StreamPruneInterval = 10 * time.Minute

// StreamPruneEntries prune the event stream's log every `every`.
func StreamPruneEntries(every time.Duration) []Entry {
	return []Entry{{Name: "stream:prune", Interval: every, Offset: BetweenCloses(every), Tasks: func(tick time.Time) []Job {
		return []Job{{ID: "stream:prune:" + tickStamp(tick),
			Task: worker.NewStreamPruneTask(tick), Queue: worker.QueueDefault, Timeout: 5 * time.Minute}}
	}}}
}

// AnalyticsRetentionEntries thin the archive of published reports every
// `every` (worker.AnalyticsRetentionJob); deciding twice decides the same.
func AnalyticsRetentionEntries(every time.Duration) []Entry {
	return []Entry{{Name: "analytics:retention", Interval: every, Offset: BetweenCloses(every), Tasks: func(tick time.Time) []Job {
		return []Job{{ID: "analytics:retention:" + tickStamp(tick),
			Task: worker.NewAnalyticsRetentionTask(tick), Queue: worker.QueueDefault, Timeout: 10 * time.Minute}}
	}}}
}

// RetentionEntries delete the candles past their timeframe's retention
// every `every` (worker.RetentionJob). Deleting what is gone deletes
// nothing, so a tick run twice or late is harmless.
func RetentionEntries(every time.Duration) []Entry {
	return []Entry{{Name: "candles:retention", Interval: every, Offset: BetweenCloses(every), Tasks: func(tick time.Time) []Job {
		return []Job{{ID: "candles:retention:" + tickStamp(tick),
			Task: worker.NewCandleRetentionTask(tick), Queue: worker.QueueDefault, Timeout: 10 * time.Minute}}
	}}}
}

// CalendarInterval is how often the sessions of the markets that trade in
// sessions are read from their feeds: they change a few times a year, and
// are announced ahead.
const CalendarInterval = 24 * time.Hour

// CalendarOffset puts the daily refresh at 06:00 UTC: the US night
// (01:00 or 02:00 in New York), between a close and the next open.
const CalendarOffset = 6 * time.Hour

// CalendarEntries refresh the markets' sessions (worker.CalendarJob)
// daily. A scheduler starting enqueues the day's refresh at once, and a
// worker refreshes at its own start too, so a new deployment knows its
// sessions within seconds.
func CalendarEntries() []Entry {
	return []Entry{{Name: "calendar:refresh", Interval: CalendarInterval, Offset: CalendarOffset, Tasks: func(tick time.Time) []Job {
		return []Job{{ID: "calendar:refresh:" + tickStamp(tick),
			Task: worker.NewCalendarRefreshTask(tick), Queue: worker.QueueDefault, Timeout: 5 * time.Minute}}
	}}}
}
