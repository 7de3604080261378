package admission

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// slidingLogScript decides a whole batch of one client's requests in one
// round trip, atomic in Redis.
//
// Time comes from the Redis server (TIME), not from the caller: every
// replica then stamps and expires entries with one clock, so the window is
// exact whatever the skew between api hosts. A caller-supplied time would
// let a replica whose clock runs behind add entries that look older than
// they are and leave the window early, admitting more than N.
//
// Entries are microseconds since the epoch (exact in a double until 2255).
// An entry stamped t counts for the half-open window (now-60s, now], so in
// any 60-second interval at most N entries exist.
//
// The batch is a list of runs (limit, k): k requests in arrival order
// decided with one limit (a batch mixes limits only around a tier change).
// Run by run, the script admits a = min(k, limit-count) of them (none when
// the window already holds limit or more), adding a members stamped now,
// exactly as k one-request calls in a row would. The reply is {now} and,
// per run, {before, a, oldest, blocker}: before is the count before the
// run, oldest the oldest entry after it, and blocker the entry whose
// departure lets one more request in (the oldest, unless the limit was
// lowered below what the window already holds). The i-th admitted request
// of a run saw count before+i; every refused one saw before+a.
//
// Leases. Before the runs, the script removes the unused members of the
// replica's earlier leases (ARGV[5] how many leases; per lease three
// arguments: the prefix of its members and the first and last unused
// number), so they count no more. After the runs, when
// ARGV[3] > 0 and the last run's limit is still at least leaseMinHeadroom
// away, it adds a lease: g = min(ARGV[3], headroom/64) members stamped
// now + ARGV[4], a time in the future. The replica admits up to g requests
// from memory until (its own clock) the moment it SENT this call plus
// ARGV[4]; every such request happens at or before its member's stamp. The
// window stays exact: for any two admitted requests less than a window
// apart, the one decided (or leased) later saw the other's member, whose
// stamp is at or after that request and so still in the window. Unused
// slots only make the window count high (never low) until they are given
// back or age out. The reply's second element is g.
//
// KEYS[1] the client's sorted set; ARGV[1] window in microseconds;
// ARGV[2] a member prefix unique to this batch; ARGV[3] lease wanted;
// ARGV[4] lease lifetime in microseconds; ARGV[5] G, the number of leases
// to give back, and 3G arguments naming them; then the runs as limit, k
// pairs.
const slidingLogScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local prefix = ARGV[2]
local key = KEYS[1]
local gives = tonumber(ARGV[5])
for j = 0, gives - 1 do
  local p, from, to = ARGV[6 + 3 * j], tonumber(ARGV[7 + 3 * j]), tonumber(ARGV[8 + 3 * j])
  while from <= to do
    local args = {}
    for m = from, math.min(to, from + 99) do
      args[#args + 1] = p .. m
    end
    redis.call('ZREM', key, unpack(args))
    from = from + 100
  end
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local out = {now, 0}
local seq = 0
local last = 0
for i = 6 + 3 * gives, #ARGV, 2 do
  local limit = tonumber(ARGV[i])
  last = limit
  local k = tonumber(ARGV[i + 1])
  local before = count
  local a = 0
  if count < limit then
    a = math.min(k, limit - count)
  end
  local done = 0
  while done < a do
    local n = math.min(a - done, 100)
    local args = {}
    for m = 1, n do
      seq = seq + 1
      args[2 * m - 1] = now
      args[2 * m] = prefix .. seq
    end
    redis.call('ZADD', key, unpack(args))
    done = done + n
  end
  count = count + a
  local oldest = now
  local blocker = now
  if count > 0 then
    oldest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
    blocker = oldest
    if count >= limit then
      blocker = tonumber(redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')[2])
    end
  end
  out[#out + 1] = before
  out[#out + 1] = a
  out[#out + 1] = oldest
  out[#out + 1] = blocker
end
local want = tonumber(ARGV[3])
if want > 0 and last - count >= LEASE_MIN_HEADROOM then
  local g = math.min(want, math.floor((last - count) / 64))
  local stamp = now + tonumber(ARGV[4])
  local done = 0
  while done < g do
    local args = {}
    for m = done + 1, math.min(g, done + 100) do
      args[#args + 1] = stamp
      args[#args + 1] = prefix .. 'L' .. m
    end
    redis.call('ZADD', key, unpack(args))
    done = math.min(g, done + 100)
  end
  out[2] = g
  seq = seq + g
end
if seq > 0 then
  redis.call('PEXPIRE', key, math.ceil(window / 1000) + math.ceil(tonumber(ARGV[4]) / 1000))
end
return out
`

// MaxRateLease is the most slots one lease takes ahead in a client's
// window, and so the most requests the RateLimit header's remaining count
// can be low by while a lease is out.
const MaxRateLease = leaseMax

// batchTimeout bounds one script call when the Redis client has no read
// timeout of its own; RedisOptions sets much shorter ones.
const batchTimeout = 5 * time.Second

// RollingWindowLimiter admits at most N requests per client in any rolling
// 60-second window, across every api replica sharing one Redis. It keeps a
// sliding log (a sorted set of admission times per client), so unlike a
// token bucket or GCRA it never admits more than N in a window, while
// still letting a client burst up to N at once. Memory is O(N) per active
// client and a request costs O(log N) in Redis.
//
// Concurrent Allow calls of one client are batched by the engine (see
// engine.go): one script call decides a whole batch in arrival order, and
// a busy client far below its limit gets leases. The script is atomic and
// the window lives in Redis, so the limit stays exact across replicas.
type RollingWindowLimiter struct {
	eng *engine[string, int, Decision, memberRange]

	// LeaseMin overrides the smallest lease (default 256, i.e. a client
	// sending ≈ 2 500 requests/s to this replica); tests lower it so that
	// a loaded machine still exercises leases. Set before first use.
	LeaseMin int
}

// Options are the dependencies of a limiter or ledger.
type Options struct {
	// Now is the clock leases are timed with (time.Now when nil).
	Now func() time.Time
	// Logger receives failures of background calls (discarded when nil).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// NewRollingWindowLimiter returns a limiter keeping its logs under
// prefix+"ratelimit:{<client id>}". Build rdb with RedisOptions so a dead
// Redis fails fast instead of stalling requests. Close it to give back
// what its leases did not use.
func NewRollingWindowLimiter(rdb redis.Scripter, prefix string, opts Options) *RollingWindowLimiter {
	opts = opts.withDefaults()
	var b [6]byte
	_, _ = rand.Read(b[:])
	policy := defaultPolicy()
	policy.callTimeout = batchTimeout
	be := &windowScript{
		rdb:      rdb,
		prefix:   prefix,
		script:   redis.NewScript(strings.Replace(slidingLogScript, "LEASE_MIN_HEADROOM", strconv.Itoa(leaseMinHeadroom), 1)),
		instance: base64.RawURLEncoding.EncodeToString(b[:]),
		leaseTTL: policy.ttl,
		now:      opts.Now,
	}
	l := &RollingWindowLimiter{}
	l.eng = newEngine[string, int, Decision, memberRange]("rate limit", be, policy, opts.Now, opts.Logger, func() int {
		if l.LeaseMin > 0 {
			return l.LeaseMin
		}
		return leaseMin
	})
	return l
}

// Allow records one request of clientID if fewer than limit requests were
// admitted in the last 60 seconds. limit is passed per call because it
// comes from the client's tier or contract, which may change at any time.
//
// If ctx ends before the request's batch returns, Allow returns ctx's
// error; the batch may still have recorded the request (as a single call
// cut off by its context may have). Waiters whose ctx ended before their
// batch is sent are left out of it.
func (l *RollingWindowLimiter) Allow(ctx context.Context, clientID string, limit int) (Decision, error) {
	return l.allowAt(ctx, clientID, limit, l.eng.now())
}

// allowAt is Allow with the clock read by the caller.
func (l *RollingWindowLimiter) allowAt(ctx context.Context, clientID string, limit int, now time.Time) (Decision, error) {
	if limit < 1 {
		return Decision{}, fmt.Errorf("admission: rate limit must be positive, got %d", limit)
	}
	return l.eng.admit(ctx, clientID, limit, now)
}

// ping checks that Redis answers (a cheap command on the script's connection).
func (l *RollingWindowLimiter) ping(ctx context.Context) error {
	be := l.eng.be.(*windowScript)
	return be.rdb.ScriptExists(ctx, be.script.Hash()).Err()
}

// Close waits for the batches in flight, stops the background work and
// removes from the windows the lease slots not used. Allow fails afterwards.
func (l *RollingWindowLimiter) Close() { l.eng.close() }

// LeaseStats reports how many request slots leases have taken ahead in
// Redis since the limiter started.
func (l *RollingWindowLimiter) LeaseStats() (leased int64) {
	leased, _ = l.eng.leaseStats()
	return leased
}

// windowScript is the limiter's backend: one slidingLogScript call.
type windowScript struct {
	rdb    redis.Scripter
	prefix string
	script *redis.Script
	// instance and seq make every log member unique across replicas, so two
	// requests stamped in the same microsecond are both counted.
	instance string
	seq      atomic.Uint64
	leaseTTL time.Duration
	now      func() time.Time
}

// memberRange names the unused members prefix+n, n in from..to, of a lease.
type memberRange struct {
	prefix   string
	from, to int
}

func (m memberRange) slots() int64 { return int64(m.to - m.from + 1) }

// windowLease is a lease of g members, prefix+"L"+1..g, added when the
// window held count-g entries, whose oldest leaves at oldest.
type windowLease struct {
	limit  int
	prefix string
	g      int
	count  int
	oldest time.Time
}

// result decides the i-th leased request as if the lease's requests had
// been counted one after another.
func (l *windowLease) result(i int, now time.Time) Decision {
	return decide(true, l.limit, l.count-l.g+i+1, l.oldest.Sub(now), l.oldest.Sub(now))
}

func (l *windowLease) unused(from, n int) memberRange {
	return memberRange{prefix: l.prefix + "L", from: from + 1, to: n}
}

func (w *windowScript) key(clientID string) string {
	// The hash tag keeps a client's log on one slot should Redis be a cluster.
	return w.prefix + "ratelimit:{" + clientID + "}"
}

// call runs the script once for the runs (limit, n), the lease wanted and
// the leases given back.
func (w *windowScript) call(ctx context.Context, clientID string, runs []run[int], want int, gbs []memberRange) (outcome[Decision, memberRange], error) {
	prefix := w.instance + strconv.FormatUint(w.seq.Add(1), 36) + "."
	args := make([]any, 0, 5+3*len(gbs)+2*len(runs))
	args = append(args, Window.Microseconds(), prefix, want, w.leaseTTL.Microseconds(), len(gbs))
	for _, gb := range gbs {
		args = append(args, gb.prefix, gb.from, gb.to)
	}
	for _, r := range runs {
		args = append(args, r.param, r.n)
	}
	res, err := w.script.Run(ctx, w.rdb, []string{w.key(clientID)}, args...).Int64Slice()
	if err == nil && len(res) != 2+4*len(runs) {
		err = errors.New("malformed script reply")
	}
	if err != nil {
		return outcome[Decision, memberRange]{}, fmt.Errorf("admission: rate limit %s: %w", clientID, err)
	}
	out := outcome[Decision, memberRange]{gaveBack: true}
	redisNow, window := res[0], Window.Microseconds()
	for r, run := range runs {
		before, admitted, oldest, blocker := int(res[2+4*r]), int(res[3+4*r]), res[4+4*r], res[5+4*r]
		untilOldest := time.Duration(oldest+window-redisNow) * time.Microsecond
		untilFree := time.Duration(blocker+window-redisNow) * time.Microsecond
		for j := range run.n {
			if j < admitted {
				out.results = append(out.results, decide(true, run.param, before+j+1, untilOldest, untilFree))
			} else {
				out.results = append(out.results, decide(false, run.param, before+admitted, untilOldest, untilFree))
			}
		}
		if r == len(runs)-1 {
			if g := int(res[1]); g > 0 {
				// The lease's members were added after the last run: the window
				// holds that run's count plus g, and its oldest entry is the run's.
				out.lease = &windowLease{limit: run.param, prefix: prefix, g: g, count: before + admitted + g, oldest: w.now().Add(untilOldest)}
				out.leaseN = g
			}
		}
	}
	return out, nil
}

// giveBack removes unused lease members from the window. On failure they
// stay until they age out: the count is then high, never low.
func (w *windowScript) giveBack(ctx context.Context, clientID string, gbs []memberRange) error {
	_, err := w.call(ctx, clientID, nil, 0, gbs)
	return err
}

// leaseCap: no lease for a limit below leaseMinHeadroom (the script caps
// the lease by the headroom it finds in the window).
func (w *windowScript) leaseCap(limit int, _ int64, _ bool, _, size int) int {
	if limit < leaseMinHeadroom {
		return 0
	}
	return size
}
