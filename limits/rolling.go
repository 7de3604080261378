package limits

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// slidingLogScript is the whole decision in one round trip, atomic in Redis.
//
// Time comes from the Redis server (TIME), not from the caller: every
// replica then stamps and expires entries with one clock, so the window is
// exact whatever the skew between api hosts. A caller-supplied time would
// let a replica whose clock runs behind add entries that look older than
// they are and leave the window early, admitting more than N.
//
// Entries are microseconds since the epoch (exact in a double until 2255).
// An entry stamped t counts for the half-open window (now-60s, now], so in
// any 60-second interval at most N entries exist. The reply is
// {allowed, count, now, oldest, blocker}: blocker is the entry whose
// departure lets one more request in (the oldest, unless the limit was
// lowered below what the window already holds).
//
// KEYS[1] the client's sorted set; ARGV[1] limit; ARGV[2] window in
// microseconds; ARGV[3] a member unique to this request.
const slidingLogScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  count = count + 1
  allowed = 1
end
local oldest = now
local blocker = now
if count > 0 then
  oldest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
  blocker = oldest
  if count >= limit then
    blocker = tonumber(redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')[2])
  end
end
return {allowed, count, now, oldest, blocker}
`

// RollingWindowLimiter admits at most N requests per client in any rolling
// 60-second window, across every api replica sharing one Redis. It keeps a
// sliding log (a sorted set of admission times per client), so unlike a
// token bucket or GCRA it never admits more than N in a window, while
// still letting a client burst up to N at once. Memory is O(N) per active
// client and a request costs O(log N) in Redis.
type RollingWindowLimiter struct {
	rdb    redis.Scripter
	prefix string
	script *redis.Script
	// instance and seq make every log member unique across replicas, so two
	// requests stamped in the same microsecond are both counted.
	instance string
	seq      atomic.Uint64
}

// NewRollingWindowLimiter returns a limiter keeping its logs under
// prefix+"ratelimit:{<client id>}". Build rdb with RedisOptions so a dead
// Redis fails fast instead of stalling requests.
func NewRollingWindowLimiter(rdb redis.Scripter, prefix string) *RollingWindowLimiter {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &RollingWindowLimiter{
		rdb:      rdb,
		prefix:   prefix,
		script:   redis.NewScript(slidingLogScript),
		instance: base64.RawURLEncoding.EncodeToString(b[:]),
	}
}

// Allow records one request of clientID if fewer than limit requests were
// admitted in the last 60 seconds. limit is passed per call because it
// comes from the client's tier or contract, which may change at any time.
func (l *RollingWindowLimiter) Allow(ctx context.Context, clientID string, limit int) (Decision, error) {
	if limit < 1 {
		return Decision{}, fmt.Errorf("limits: rate limit must be positive, got %d", limit)
	}
	member := l.instance + strconv.FormatUint(l.seq.Add(1), 36)
	res, err := l.script.Run(ctx, l.rdb, []string{l.key(clientID)}, limit, Window.Microseconds(), member).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("limits: rate limit %s: %w", clientID, err)
	}
	if len(res) != 5 {
		return Decision{}, errors.New("limits: rate limit: malformed script reply")
	}
	allowed, count, now, oldest, blocker := res[0] == 1, int(res[1]), res[2], res[3], res[4]
	untilOldest := time.Duration(oldest+Window.Microseconds()-now) * time.Microsecond
	untilFree := time.Duration(blocker+Window.Microseconds()-now) * time.Microsecond
	return decide(allowed, limit, count, untilOldest, untilFree), nil
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
