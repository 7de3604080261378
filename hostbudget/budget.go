// Package hostbudget shares the request budget of each market-data
// provider host among every caller of a deployment. Binance, OKX and
// Coinbase limit an IP, not a client: every task, goroutine and worker
// process behind that IP spends one budget, and one that ignores a 429
// gets the whole deployment banned (418, from 2 minutes up to 3 days). So
// the budget lives in Redis, beside the rate limiter, and every request is
// booked there before it is sent.
//
// # Model
//
// A host's Limit is at most Max weight in each fixed window (Binance's
// REQUEST_WEIGHT resets at the start of every minute). A budget plans only
// Headroom of it (80 % by default), so the provider's own count, which
// also sees what the budget cannot (another tool on the same IP, a request
// that crossed a window boundary), stays below the limit. Reserve books a
// request's weight in the first window, at or after the time asked, that
// has room and is not banned, and says when that window opens: the caller
// waits until then. The end of a window (an eighth of it, at most a
// second) is not booked, so a request booked in one window is not counted
// by the provider in the next. A request's Class (WithClass) sets how
// much of a window it may fill: Urgent the whole planned weight, Bulk only
// BulkShare of it (75 % by default), so history loads leave every window
// room for the requests that keep served data current. On a host whose
// polls tick (Limit.Tick: Alpaca's bars, every minute) the window that
// opens each tick is kept for Live requests, the reads of candles that
// have just closed: Bulk books none of it and Urgent TickUrgentShare.
// Observe raises a window's count to the provider's own figure
// (X-MBX-USED-WEIGHT-1M); Ban pauses every caller of the host, in every
// process, until a 429's or a 418's Retry-After has passed.
//
// Windows are numbered from the Unix epoch on Redis's clock, the one every
// process shares: each process measures its own clock's offset from it
// and converts the times it is given (so a process whose clock runs ahead
// cannot drop the current window's count, and tests may still pass a
// fixed clock). The provider's clock is not ours: skew between the workers and the provider moves a window edge by
// the skew, which the guard and the headroom absorb, and the used-weight
// header corrects.
//
// # Redis down
//
// When Redis does not answer, the Redis-backed counters' outage policy
// holds (rediskeys.Outage): each process books in a budget of its own,
// LocalShare of the planned budget (a quarter by default, so up to four
// worker processes stay within it together), and the bans it has seen,
// without asking Redis until the policy's probe sees it answer, so an
// outage does not cost every request a time-out. Every request it paces
// is counted in marketd_upstream_budget_local_total.
package hostbudget

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/rediskeys"
)

// Limit is the documented budget of one provider host.
type Limit struct {
	// Name is the host's logical name ("binance", "binance-futures",
	// "okx"): its Redis key and its metric label.
	Name string
	// Window is the provider's counting window (Binance: one minute).
	Window time.Duration
	// Max is the weight allowed in a window; 0 means the host has no weight
	// budget, only the bans its 429s and 418s impose.
	Max int
	// Tick, when set (a multiple of Window), is the period of the host's
	// scheduled polls, on the callers' clock: the window that opens each
	// tick is kept for Live requests (see Live).
	Tick time.Duration
}

// Defaults of Options.
const (
	DefaultHeadroom   = 0.8
	DefaultLocalShare = 0.25
	DefaultBulkShare  = 0.75
	maxGuard          = time.Second
	// TickUrgentShare is the share of a tick's window (Limit.Tick) that
	// Urgent requests may fill; Live ones may fill all of it.
	TickUrgentShare = 1.0 / 3
)

// Options configure a Budget.
type Options struct {
	// Redis holds the shared budget; nil keeps it in process (a single
	// process: tests, the backfill command without a worker).
	Redis *redis.Client
	// Prefix is put before every key (the deployment's; tests' own).
	Prefix string
	// Headroom is the fraction of each Limit's Max planned (0 < h ≤ 1).
	Headroom float64
	// LocalShare is the fraction of the planned budget one process books
	// on its own while Redis does not answer (with Redis nil: all of it).
	LocalShare float64
	// BulkShare is the fraction (0 < s ≤ 1) of a window's planned weight
	// that Bulk requests may fill; the rest is Urgent's alone. Every
	// process of a deployment must use the same.
	BulkShare float64
	Logger    *slog.Logger
	// Now is this process's wall clock (time.Now when nil), read only to
	// measure its offset from Redis's (the windows' one clock).
	Now func() time.Time
}

// Budget books requests against the shared budgets of provider hosts.
// It is safe for concurrent use.
type Budget struct {
	rdb        *redis.Client
	prefix     string
	headroom   float64
	localShare float64
	bulkShare  float64
	log        *slog.Logger
	outage     *rediskeys.Outage
	now        func() time.Time
	offset     atomic.Int64 // Redis's clock less this process's (ns), 0 within clockTolerance
	offsetAt   atomic.Int64 // when offset was measured (Unix ns, this process's clock); 0: never

	mu    sync.Mutex
	local map[string]*localHost
}

// New returns a budget with o's settings (zero values take the defaults).
func New(o Options) *Budget {
	if o.Headroom <= 0 || o.Headroom > 1 {
		o.Headroom = DefaultHeadroom
	}
	if o.LocalShare <= 0 || o.LocalShare > 1 {
		o.LocalShare = DefaultLocalShare
	}
	if o.BulkShare <= 0 || o.BulkShare > 1 {
		o.BulkShare = DefaultBulkShare
	}
	if o.Redis == nil {
		o.LocalShare = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Budget{rdb: o.Redis, prefix: o.Prefix, headroom: o.Headroom, localShare: o.LocalShare,
		bulkShare: o.BulkShare, log: o.Logger, now: o.Now, local: make(map[string]*localHost)}
	if o.Redis != nil {
		b.outage = rediskeys.NewOutage(rediskeys.CounterHostBudget, "each process paces provider requests with its own share of the budget", o.Logger, o.Redis, nil)
	}
	return b
}

// Planned is the weight a window of l may hold: Max·Headroom, at least 1.
func (b *Budget) Planned(l Limit) int {
	return max(1, int(math.Floor(float64(l.Max)*b.headroom)))
}

// caps are the weights requests of one class may fill a window up to:
// any window, and a window that opens a tick (Limit.Tick).
type caps struct{ window, tick int }

// capOf is what requests of class c may fill a window of l up to, of
// planned: all of it for Urgent and Live, BulkShare of it for Bulk; of a
// tick's window, all of it for Live, TickUrgentShare for Urgent, none for
// Bulk.
func (b *Budget) capOf(c Class, planned int) caps {
	switch c {
	case Bulk:
		return caps{window: max(1, int(math.Floor(float64(planned)*b.bulkShare)))}
	case Live:
		return caps{window: planned, tick: planned}
	}
	return caps{window: planned, tick: max(1, int(math.Floor(float64(planned)*TickUrgentShare)))}
}

// Reserve books weight on l's host in the first window from at that has
// room and no ban, and returns when the request may start (≥ at). It books
// nothing and returns ok false when no window opening by horizon has room:
// the caller then gives up instead of waiting past its patience. A request
// heavier than a whole window goes alone in an empty one. ctx's Class
// (ClassOf) sets how full a window it may fill.
func (b *Budget) Reserve(ctx context.Context, l Limit, weight int, at, horizon time.Time) (start time.Time, ok bool) {
	if l.Max <= 0 {
		weight = 0
	}
	class := ClassOf(ctx)
	start, ok, err := b.reserveShared(ctx, l, b.capOf(class, b.Planned(l)), weight, at, horizon)
	if err != nil {
		obs.UpstreamBudgetLocal(l.Name)
		if b.outage != nil {
			b.outage.Fallback()
		}
		start, ok = b.host(l).reserve(b.window(l), l.Tick, b.capOf(class, b.localPlanned(l)), weight, at, horizon)
	}
	// A ban seen by this process holds even if Redis lost it.
	if ban := b.host(l).bannedUntil(); ok && ban.After(start) {
		return b.Reserve(ctx, l, weight, ban, horizon)
	}
	if ok {
		obs.UpstreamWeight(l.Name, weight)
	}
	return start, ok
}

// BannedUntil is the end of the host's current ban (zero: none known).
func (b *Budget) BannedUntil(ctx context.Context, l Limit) time.Time {
	local := b.host(l).bannedUntil()
	if !b.shared() {
		return local
	}
	ms, err := b.rdb.HGet(ctx, b.key(l), "ban").Int64()
	if !b.outage.Done(ctx, err) {
		return local
	}
	if shared := time.UnixMilli(ms); ms > 0 && shared.After(local) {
		return shared
	}
	return local
}

// Ban pauses every caller of l's host, in every process, until until: the
// provider answered status (429 or 418) with that Retry-After. A later ban
// never shortens an earlier one.
func (b *Budget) Ban(ctx context.Context, l Limit, at, until time.Time, status int) {
	obs.UpstreamRefused(l.Name, status)
	b.host(l).ban(until)
	if !b.shared() {
		return
	}
	w := b.window(l)
	off := b.redisOffset(ctx)
	err := banScript.Run(ctx, b.rdb, []string{b.key(l)}, at.Add(off).UnixMilli(), until.Add(off).UnixMilli(), w.Milliseconds()).Err()
	b.outage.Done(ctx, err)
}

// Observe raises the count of the window holding at (when the provider
// answered) to used, the provider's own count of the deployment's weight.
// It never lowers it: requests booked but not yet sent are in ours only.
func (b *Budget) Observe(ctx context.Context, l Limit, at time.Time, used int) {
	if l.Max <= 0 || used <= 0 {
		return
	}
	obs.UpstreamUsedWeight(l.Name, used)
	w := b.window(l)
	if b.shared() {
		err := observeScript.Run(ctx, b.rdb, []string{b.key(l)}, w.Milliseconds(), at.Add(b.redisOffset(ctx)).UnixMilli(), used).Err()
		if b.outage.Done(ctx, err) {
			return
		}
	}
	b.host(l).observe(w, at, used)
}

func (b *Budget) reserveShared(ctx context.Context, l Limit, capacity caps, weight int, at, horizon time.Time) (time.Time, bool, error) {
	if !b.shared() {
		return time.Time{}, false, errNoRedis
	}
	w := b.window(l)
	off := b.redisOffset(ctx)
	res, err := reserveScript.Run(ctx, b.rdb, []string{b.key(l)}, w.Milliseconds(), capacity.window, weight,
		at.Add(off).UnixMilli(), horizon.Add(off).UnixMilli(), guard(w).Milliseconds(),
		l.Tick.Milliseconds(), capacity.tick, off.Milliseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = errors.New("hostbudget: reserve script: unexpected reply")
	}
	if !b.outage.Done(ctx, err) {
		return time.Time{}, false, errNoRedis
	}
	start := time.UnixMilli(res[1]).Add(-off).In(at.Location())
	if start.Before(at) {
		start = at
	}
	return start, res[0] == 1, nil
}

// Clock offsets: the windows are numbered on Redis's clock, the one every
// process shares. Each process measures how far its own clock is from it
// (TIME, halfway through the round trip) every clockResync, and turns the
// times it is given into Redis's before booking, and the window starts it
// is answered back. An offset within clockTolerance counts as none: the
// guard at each window's end absorbs it, and processes on one host (and
// tests' fixed clocks) keep their exact times. A reading whose round trip
// took longer than clockMaxRTT (a loaded host) is not used: Redis's time
// could be anywhere within it.
const (
	clockResync    = 30 * time.Second
	clockTolerance = 250 * time.Millisecond
	clockMaxRTT    = 100 * time.Millisecond
)

// redisOffset is Redis's clock less this process's, measured every
// clockResync (the last measure while Redis does not answer TIME).
func (b *Budget) redisOffset(ctx context.Context) time.Duration {
	if at := b.offsetAt.Load(); at != 0 && time.Duration(b.now().UnixNano()-at) < clockResync {
		return time.Duration(b.offset.Load())
	}
	t0 := b.now()
	rt, err := b.rdb.Time(ctx).Result()
	t1 := b.now()
	if err != nil || t1.Sub(t0) > clockMaxRTT {
		// No answer, or one too slow to place Redis's reading within the
		// round trip: the last measure holds, and a booking a second on
		// asks again.
		b.offsetAt.Store(t1.Add(time.Second - clockResync).UnixNano())
		return time.Duration(b.offset.Load())
	}
	off := rt.Sub(t0.Add(t1.Sub(t0) / 2))
	if off > -clockTolerance && off < clockTolerance {
		off = 0
	} else if d := off - time.Duration(b.offset.Load()); d <= -clockTolerance || d >= clockTolerance {
		b.log.Warn("hostbudget: this process's clock is off Redis's; the budget windows follow Redis's", "offset", off.Round(time.Millisecond).String())
	}
	b.offset.Store(int64(off))
	b.offsetAt.Store(t1.UnixNano())
	return off
}

func (b *Budget) key(l Limit) string { return rediskeys.Space(b.prefix).HostBudget(l.Name) }

// window is l's window, a minute when unset (bans only).
func (b *Budget) window(l Limit) time.Duration {
	if l.Window <= 0 {
		return time.Minute
	}
	return l.Window
}

func (b *Budget) localPlanned(l Limit) int {
	return max(1, int(math.Floor(float64(b.Planned(l))*b.localShare)))
}

func (b *Budget) host(l Limit) *localHost {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.local[l.Name]
	if !ok {
		h = &localHost{used: make(map[int64]int)}
		b.local[l.Name] = h
	}
	return h
}

// Degraded reports whether an outage of Redis is in progress: each
// process paces with its own share until it ends.
func (b *Budget) Degraded() bool { return b.outage != nil && b.outage.Down() }

// shared reports whether to ask Redis: there is one, and no outage of it
// is in progress (so an outage does not cost every request a time-out).
func (b *Budget) shared() bool {
	return b.rdb != nil && b.outage.Ask()
}

// guard is the end of a window not booked: a request booked just before
// the edge might reach the provider after it and count in the next window.
// An eighth of the window, at most a second: far above a request's transit
// on a one-minute window, and still above it on the shortened windows of
// tests and simulators.
func guard(window time.Duration) time.Duration { return min(window/8, maxGuard) }

// opensTick reports whether the window [start, start+window) holds the
// start of a tick (a multiple of tick), all on the callers' clock (the
// reserve script does the same on Redis's, less the offset).
func opensTick(start, window, tick int64) bool {
	if tick <= 0 {
		return false
	}
	r := (start%tick + tick) % tick
	return r == 0 || r+window > tick
}

// errNoRedis: the shared budget could not be asked; the local one answers.
var errNoRedis = errors.New("hostbudget: no shared budget")
