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

	"github.com/marketscreener/market/rediskeys"
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
// Leases. A lease is ONE member of its own sorted set, KEYS[2], stamped
// now + ARGV[4] (a time in the future) and weighing g requests (its
// weight is in the hash KEYS[3], by member): the window's count is
// ZCARD(KEYS[1]) plus the weights of the leases in the window. A lease used
// to be g members of the log itself; at tens of thousands of requests a
// second from one client that made every lease call a ZADD of thousands of
// members into a sorted set of millions, which held Redis for milliseconds
// at a time (every other client's call waited behind it). Now a lease
// costs Redis one member, whatever its size.
//
// Before the runs, the script gives back the unused slots of the replica's
// earlier leases (ARGV[5] how many; per lease three arguments: its member
// and the first and last unused slot, 1-based): the lease's weight becomes
// at most first-1, the slots it used (a lease that used none leaves). A
// give-back sets the weight, it does not subtract, so one that is sent
// again after a lost reply changes nothing. After the runs, when ARGV[3] >
// 0 and the last run's limit is still at least leaseMinHeadroom away, it
// adds a lease: g = min(ARGV[3], headroom/64) slots stamped now + ARGV[4].
// The replica admits up to g requests from memory until (its own clock)
// the moment it SENT this call plus ARGV[4]; every such request happens at
// or before its slot's stamp. The window stays exact: for any two admitted
// requests less than a window apart, the one decided (or leased) later saw
// the other's slot, whose stamp is at or after that request and so still
// in the window. Unused slots only make the window count high (never low)
// until they are given back or age out. The reply's second element is g.
//
// Order. "Oldest" and "blocker" are positions in the window's entries in
// time order, where a lease stands for weight entries at its stamp: the
// blocker, the entry at position count-limit, is found by walking the
// leases (few: one per lease call in the last minute) and counting the
// single entries before each with ZCOUNT.
//
// KEYS[1] the client's log of single entries, KEYS[2] its leases, KEYS[3]
// their weights; ARGV[1] window in microseconds; ARGV[2] a member prefix
// unique to this batch; ARGV[3] lease wanted; ARGV[4] lease lifetime in
// microseconds; ARGV[5] G, the number of leases to give back, and 3G
// arguments naming them; then the runs as limit, k pairs.
const slidingLogScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local prefix = ARGV[2]
local key, lkey, wkey = KEYS[1], KEYS[2], KEYS[3]
local gives = tonumber(ARGV[5])
for j = 0, gives - 1 do
  local m, from = ARGV[6 + 3 * j], tonumber(ARGV[7 + 3 * j])
  local w = tonumber(redis.call('HGET', wkey, m))
  if w then
    local nw = math.min(w, from - 1)
    if nw <= 0 then
      redis.call('ZREM', lkey, m)
      redis.call('HDEL', wkey, m)
    elseif nw < w then
      redis.call('HSET', wkey, m, nw)
    end
  end
end
local cutoff = now - window
redis.call('ZREMRANGEBYSCORE', key, '-inf', cutoff)
local gone = redis.call('ZRANGEBYSCORE', lkey, '-inf', cutoff)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', lkey, '-inf', cutoff)
  redis.call('HDEL', wkey, unpack(gone))
end
local leased = 0
local weights = redis.call('HVALS', wkey)
for i = 1, #weights do
  leased = leased + tonumber(weights[i])
end
local count = redis.call('ZCARD', key) + leased
-- oldest() is the stamp of the oldest entry, at(p) of the entry at
-- position p (0-based, time order; only asked on a refusal).
local function oldest()
  local s = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  local l = redis.call('ZRANGE', lkey, 0, 0, 'WITHSCORES')[2]
  if s and l then
    return math.min(tonumber(s), tonumber(l))
  end
  return tonumber(s or l)
end
local function at(p)
  local before = 0
  if leased > 0 then
    local ls = redis.call('ZRANGE', lkey, 0, -1, 'WITHSCORES')
    for i = 1, #ls, 2 do
      local stamp = tonumber(ls[i + 1])
      local u = redis.call('ZCOUNT', key, '-inf', '(' .. ls[i + 1])
      if p < u + before then
        break
      end
      local w = tonumber(redis.call('HGET', wkey, ls[i])) or 0
      if p < u + before + w then
        return stamp
      end
      before = before + w
    end
  end
  return tonumber(redis.call('ZRANGE', key, p - before, p - before, 'WITHSCORES')[2])
end
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
  local first = now
  local blocker = now
  if count > 0 then
    first = oldest()
    blocker = first
    if count >= limit then
      blocker = at(count - limit)
    end
  end
  out[#out + 1] = before
  out[#out + 1] = a
  out[#out + 1] = first
  out[#out + 1] = blocker
end
local want = tonumber(ARGV[3])
if want > 0 and last - count >= LEASE_MIN_HEADROOM then
  local g = math.min(want, math.floor((last - count) / 64))
  redis.call('ZADD', lkey, now + tonumber(ARGV[4]), prefix .. 'L')
  redis.call('HSET', wkey, prefix .. 'L', g)
  out[2] = g
  seq = seq + g
end
if seq > 0 then
  local ttl = math.ceil(window / 1000) + math.ceil(tonumber(ARGV[4]) / 1000)
  redis.call('PEXPIRE', key, ttl)
  if leased > 0 or out[2] > 0 then
    redis.call('PEXPIRE', lkey, ttl)
    redis.call('PEXPIRE', wkey, ttl)
  end
end
return out
`

// MaxRateLease is the most slots one lease takes ahead in a client's
// window, and so the most requests the RateLimit header's remaining count
// can be low by while a lease is out.
const MaxRateLease = leaseMax

// batchTimeout bounds one script call when the Redis client has no read
// timeout of its own; rediskeys.ClientOptions sets much shorter ones.
const batchTimeout = 5 * time.Second

// RollingWindowLimiter admits at most N requests per client in any rolling
// 60-second window, across every api replica sharing one Redis. It keeps a
// sliding log (a sorted set of admission times per client), so unlike a
// token bucket or GCRA it never admits more than N in a window, while
// still letting a client burst up to N at once. Memory is one entry per
// request decided in Redis and one per lease (a lease stands for up to
// leaseMax requests), and a call costs O(log N) in Redis per request it
// decides, O(1) per lease.
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
// prefix+"ratelimit:{<client id>}" (and the client's leases under that
// key + ":leases" and ":weights"). Build rdb with rediskeys.ClientOptions so a dead
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

// memberRange names the unused slots from..to (1-based) of the lease
// whose member (in the client's set of leases) is prefix.
type memberRange struct {
	prefix   string
	from, to int
}

func (m memberRange) slots() int64 { return int64(m.to - m.from + 1) }

// windowLease is a lease of g slots, the member prefix+"L" of the
// client's leases, added when the window held count-g entries, whose
// oldest leaves at oldest.
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

// keys are the client's log of single entries, its leases and their
// weights. The hash tag keeps them on one slot should Redis be a cluster.
func (w *windowScript) keys(clientID string) []string {
	k := rediskeys.Space(w.prefix).RateLimit(clientID)
	return []string{k, k + ":leases", k + ":weights"}
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
	res, err := w.script.Run(ctx, w.rdb, w.keys(clientID), args...).Int64Slice()
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

// giveBack lowers the leases' weights to the slots they used. On failure
// the unused slots stay until they age out: the count is then high, never
// low.
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
