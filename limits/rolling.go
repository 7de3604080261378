package limits

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
const MaxRateLease = 20_000

const (
	// leaseSpan is how much of a client's measured request rate one lease
	// covers, leaseTTL how long it may be used.
	leaseSpan = 100 * time.Millisecond
	leaseTTL  = 250 * time.Millisecond
	// leaseMinRateWindow is the shortest measurement a lease is sized
	// from: a short burst never gets one.
	leaseMinRateWindow = 100 * time.Millisecond
	// leaseMin is the smallest lease worth asking for, leaseMax the largest.
	// A lease of leaseSpan's traffic must be at least this large, i.e. the
	// client sends ≈ 2 500 requests/s or more to this process: below that
	// the batched path costs little, and a burst that a loaded machine
	// stretches past leaseMinRateWindow still gets no lease.
	leaseMin = 256
	leaseMax = MaxRateLease
	// leaseMinHeadroom: no lease unless the window stays at least this far
	// from the limit (a client near its limit is decided request by request).
	leaseMinHeadroom = 10_000
)

// batchTimeout bounds one batch's script call when the Redis client has no
// read timeout of its own; RedisOptions sets much shorter ones.
const batchTimeout = 5 * time.Second

// RollingWindowLimiter admits at most N requests per client in any rolling
// 60-second window, across every api replica sharing one Redis. It keeps a
// sliding log (a sorted set of admission times per client), so unlike a
// token bucket or GCRA it never admits more than N in a window, while
// still letting a client burst up to N at once. Memory is O(N) per active
// client and a request costs O(log N) in Redis.
//
// Concurrent Allow calls of one client are batched like the quota
// ledger's group commit: while a client's script call is in Redis, its
// next requests queue up, and as soon as the call returns one flusher
// goroutine sends all of them as ONE script call that decides them in
// arrival order. At low load a batch is a single request and waits for
// nothing; under load a client costs one round trip per batch instead of
// one per request. The script is atomic and the window lives in Redis, so
// the limit stays exact across replicas.
type RollingWindowLimiter struct {
	rdb    redis.Scripter
	prefix string
	script *redis.Script
	// instance and seq make every log member unique across replicas, so two
	// requests stamped in the same microsecond are both counted.
	instance string
	seq      atomic.Uint64

	mu     sync.Mutex
	queues map[string]*allowQueue
	leases map[string]*rateLease
	leased int64 // slots granted by leases, for LeaseStats

	// LeaseMin overrides the smallest lease (default 256, i.e. a client
	// sending ≈ 2 500 requests/s to this replica); tests lower it so that
	// a loaded machine still exercises leases. Set before first use.
	LeaseMin int
}

func (l *RollingWindowLimiter) minLease() int {
	if l.LeaseMin > 0 {
		return l.LeaseMin
	}
	return leaseMin
}

// LeaseStats reports how many request slots leases have taken ahead in
// Redis since the limiter started.
func (l *RollingWindowLimiter) LeaseStats() (leased int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leased
}

// allowQueue exists in RollingWindowLimiter.queues exactly while its
// flusher runs.
type allowQueue struct {
	pending []*allowWaiter
	spare   []*allowWaiter // the previous batch's slice, reused
}

type allowWaiter struct {
	ctx   context.Context
	limit int
	done  chan allowResult // buffered: the flusher never blocks on a waiter that left
}

type allowResult struct {
	d   Decision
	err error
}

var waiterPool = sync.Pool{New: func() any { return &allowWaiter{done: make(chan allowResult, 1)} }}

// NewRollingWindowLimiter returns a limiter keeping its logs under
// prefix+"ratelimit:{<client id>}". Build rdb with RedisOptions so a dead
// Redis fails fast instead of stalling requests.
func NewRollingWindowLimiter(rdb redis.Scripter, prefix string) *RollingWindowLimiter {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &RollingWindowLimiter{
		rdb:      rdb,
		prefix:   prefix,
		script:   redis.NewScript(strings.Replace(slidingLogScript, "LEASE_MIN_HEADROOM", strconv.Itoa(leaseMinHeadroom), 1)),
		instance: base64.RawURLEncoding.EncodeToString(b[:]),
		queues:   make(map[string]*allowQueue),
		leases:   make(map[string]*rateLease),
	}
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
	if limit < 1 {
		return Decision{}, fmt.Errorf("limits: rate limit must be positive, got %d", limit)
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	now := time.Now()
	l.mu.Lock()
	lease := l.leases[clientID]
	if lease == nil {
		lease = &rateLease{since: now}
		l.leases[clientID] = lease
	}
	lease.hits++
	if d, ok := lease.take(limit, now); ok {
		refill := lease.needsRefill()
		l.mu.Unlock()
		if refill {
			go l.refill(clientID, lease, limit)
		}
		return d, nil
	}
	w := waiterPool.Get().(*allowWaiter)
	w.ctx, w.limit = ctx, limit
	q := l.queues[clientID]
	if q == nil {
		q = &allowQueue{}
		l.queues[clientID] = q
		go l.flush(clientID, q)
	}
	q.pending = append(q.pending, w)
	l.mu.Unlock()

	select {
	case r := <-w.done:
		w.ctx = nil
		waiterPool.Put(w) // answered: the flusher holds it no more
		return r.d, r.err
	case <-ctx.Done():
		// The flusher may still answer into w.done: w is not reused.
		return Decision{}, ctx.Err()
	}
}

// flush sends q's batches one after the other until q is empty.
func (l *RollingWindowLimiter) flush(clientID string, q *allowQueue) {
	for {
		l.mu.Lock()
		batch := q.pending
		q.pending, q.spare = q.spare[:0], nil
		if len(batch) == 0 {
			delete(l.queues, clientID)
			l.mu.Unlock()
			return
		}
		full := batch
		lease := l.leases[clientID]
		// Requests that queued while the previous call was in Redis are
		// served from the lease it brought, as far as it goes; the rest
		// need a call, which gives back the unused slots of leases they
		// cannot use and may bring a new lease.
		var gbs []leaseReturn
		want := 0
		if batch = lease.serve(batch, time.Now()); len(batch) > 0 {
			limit := batch[len(batch)-1].limit
			gbs = lease.giveBackUnusable(limit, time.Now())
			want = lease.size(limit, l.minLease())
		}
		l.mu.Unlock()
		if len(batch) > 0 {
			l.decideBatch(clientID, batch, lease, gbs, want)
		}
		clear(full)
		l.mu.Lock()
		q.spare = full[:0]
		l.mu.Unlock()
	}
}

func (l *RollingWindowLimiter) key(clientID string) string {
	// The hash tag keeps a client's log on one slot should Redis be a cluster.
	return l.prefix + "ratelimit:{" + clientID + "}"
}

// RedisOptions parses a redis:// URL and applies the time-outs the limiter
// needs: a dead or unreachable Redis must fail a request within ~200 ms
// (the fallback limiter then answers) instead of stalling it for the
// go-redis defaults of seconds, and a failed script is not retried, since a
// retry after a lost reply could record the request twice.
func RedisOptions(url string) (*redis.Options, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("limits: parse redis url: %w", err)
	}
	opts.DialTimeout = 200 * time.Millisecond
	opts.ReadTimeout = 150 * time.Millisecond
	opts.WriteTimeout = 150 * time.Millisecond
	// Waiting for a pooled connection is load, not an outage: a large pool
	// and a long wait keep a burst from being mistaken for a dead Redis
	// (which would loosen the limit to per replica).
	opts.PoolSize = max(64, 10*runtime.GOMAXPROCS(0))
	opts.PoolTimeout = 2 * time.Second
	opts.MaxRetries = -1
	return opts, nil
}
