package rediskeys

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/obs"
)

// The outage policy of the Redis-backed counters: the rate windows
// (admission), the provider host budgets (hostbudget) and the stream slots
// (stream). One policy for the three, so an operator reads one story:
//
//   - Every call of a counter to Redis is bounded by its connection's dial
//     and read timeouts (ClientOptions: 200 ms and 150 ms, the api's rate
//     windows and stream slots; BackgroundClientOptions: 200 ms and 1 s,
//     the workers' budgets, whose replies on a loaded worker may take
//     longer). Waiting for a pooled connection is load, not an outage, and
//     is bounded by the pool's own timeout. A call that fails, times out
//     or meets a read-only replica (a Sentinel failover in progress)
//     starts an outage.
//   - During an outage the counter fails OPEN on a local fallback bounded
//     like the shared count: a rate window of the limit per replica, a
//     host budget of LocalShare of the planned weight per process, the cap
//     of streams per replica. No request waits on Redis meanwhile: one
//     call per CounterRetry is let through as a probe (the first caller
//     after it), the rest take the fallback at once.
//   - The outage lasts until a probe answers: it has no time limit, the
//     fallback is safe for as long as Redis is away.
//   - Each outage is logged twice, when it starts (Warn) and when it ends
//     (Info, with its length), and shown as marketd_redis_counter_outage
//     {counter} (1 while it lasts), marketd_redis_counter_outages_total and
//     marketd_redis_counter_fallback_total (the decisions the fallback
//     took).
const CounterRetry = time.Second

// The counters' names: their metric label.
const (
	CounterRateWindow  = "rate_window"
	CounterHostBudget  = "host_budget"
	CounterStreamSlots = "stream_slots"
)

// Outage is one counter's state under the policy. It is safe for
// concurrent use; the zero value is not (use NewOutage).
type Outage struct {
	counter  string
	fallback string // what the counter does meanwhile, for the log line
	logger   *slog.Logger
	probe    func(context.Context) error

	down  atomic.Bool
	since atomic.Int64 // when the outage started (Unix ns)
}

// NewOutage returns the outage state of counter (one of the Counter*
// names); fallback says what it does while Redis does not answer, and
// probe asks Redis whether it answers (nil: rdb.Ping).
func NewOutage(counter, fallback string, logger *slog.Logger, rdb redis.Cmdable, probe func(context.Context) error) *Outage {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if probe == nil && rdb != nil {
		probe = func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
	}
	obs.ExportRedisCounters(counter)
	return &Outage{counter: counter, fallback: fallback, logger: logger, probe: probe}
}

// Ask reports whether a call may go to Redis now: not during an outage.
// A caller told no takes the fallback and calls Fallback.
func (o *Outage) Ask() bool { return !o.down.Load() }

// Done records the outcome of a call to Redis made under parent (the
// caller's context) and reports whether Redis
// answered. redis.Nil is an answer. An error because parent itself ended
// (the client went away) says nothing about Redis: it neither starts nor
// ends an outage, and Done reports false.
func (o *Outage) Done(parent context.Context, err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		o.recovered()
		return true
	}
	if parent.Err() != nil {
		return false
	}
	o.failed(err)
	return false
}

// Fallback counts one decision taken locally during an outage.
func (o *Outage) Fallback() { obs.RedisCounterFallback(o.counter) }

// Down reports whether an outage is in progress.
func (o *Outage) Down() bool { return o.down.Load() }

func (o *Outage) failed(err error) {
	now := time.Now()
	if !o.down.CompareAndSwap(false, true) {
		return
	}
	o.since.Store(now.UnixNano())
	obs.RedisCounterOutage(o.counter, true)
	o.logger.Warn("redis counter outage: Redis does not answer; falling back until it does",
		"counter", o.counter, "fallback", o.fallback, "err", err)
	if o.probe != nil {
		go o.watch()
	}
}

// watch probes Redis every CounterRetry until it answers (the outage
// ends) or its client is closed (the process is stopping).
func (o *Outage) watch() {
	t := time.NewTicker(CounterRetry)
	defer t.Stop()
	for range t.C {
		if !o.down.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), CounterRetry)
		err := o.probe(ctx)
		cancel()
		if err == nil {
			o.recovered()
			return
		}
		if errors.Is(err, redis.ErrClosed) {
			return
		}
	}
}

func (o *Outage) recovered() {
	if !o.down.CompareAndSwap(true, false) {
		return
	}
	obs.RedisCounterOutage(o.counter, false)
	o.logger.Info("redis counter outage over: Redis answers again; the count is shared",
		"counter", o.counter, "lasted", time.Since(time.Unix(0, o.since.Load())).Round(time.Millisecond).String())
}
