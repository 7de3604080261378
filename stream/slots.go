package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultSlotTTL is how long a stream's slot outlives its last refresh: a
// replica that crashed gives its clients' slots back within this time.
const DefaultSlotTTL = 30 * time.Second

// Slots counts each client's open streams across every api replica: a
// Redis sorted set per client whose members are the open streams, scored
// by the end of their lease. A stream refreshes its lease every third of
// the TTL while it is open and removes it when it ends; a lease not
// refreshed (its replica died) runs out, and the next acquire sweeps it.
// With Redis unreachable each replica counts its own streams against the
// same limit (so with R replicas a client may hold up to R×N meanwhile).
type Slots struct {
	rdb    *redis.Client
	prefix string
	ttl    time.Duration
	logger *slog.Logger

	mu    sync.Mutex
	local map[string]int // client → streams counted here while Redis was away
	// failing: Redis failed last time (logged once per outage).
	failing atomic.Bool
}

// NewSlots returns the slot counter (ttl DefaultSlotTTL when 0).
func NewSlots(rdb *redis.Client, prefix string, ttl time.Duration, logger *slog.Logger) *Slots {
	if ttl <= 0 {
		ttl = DefaultSlotTTL
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Slots{rdb: rdb, prefix: prefix, ttl: ttl, logger: logger, local: make(map[string]int)}
}

// acquireScript sweeps expired leases, then adds the member when it is
// already there or there is room (ARGV[2] < 0: no limit, a refresh).
// Redis's clock decides expiry, so replicas' clocks need not agree.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[2])
if limit >= 0 and not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`)

func (s *Slots) key(clientID string) string { return s.prefix + "marketd:streams:" + clientID }

// Acquire takes one of the client's max slots. It returns ok false when
// they are all taken; otherwise release, which must be called when the
// stream ends (it stops the lease's refresh and gives the slot back).
func (s *Slots) Acquire(ctx context.Context, clientID string, max int) (release func(), ok bool) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	member := hex.EncodeToString(b[:])
	key := s.key(clientID)
	ttlMS := s.ttl.Milliseconds()
	n, err := acquireScript.Run(ctx, s.rdb, []string{key}, member, max, ttlMS).Int()
	if err != nil {
		if !s.failing.Swap(true) {
			s.logger.Warn("stream: Redis unreachable, counting streams on this replica only", "err", err)
		}
		return s.acquireLocal(clientID, max)
	}
	if s.failing.Swap(false) {
		s.logger.Info("stream: counting streams in Redis again")
	}
	if n == 0 {
		return nil, false
	}
	refreshCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-refreshCtx.Done():
				return
			case <-t.C:
				_ = acquireScript.Run(refreshCtx, s.rdb, []string{key}, member, -1, ttlMS).Err()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			<-done
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = s.rdb.ZRem(ctx, key, member).Err()
		})
	}, true
}

func (s *Slots) acquireLocal(clientID string, max int) (func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local[clientID] >= max {
		return nil, false
	}
	s.local[clientID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.local[clientID]--; s.local[clientID] <= 0 {
				delete(s.local, clientID)
			}
		})
	}, true
}

// Open is how many of the client's streams hold a slot (for tests and
// operators).
func (s *Slots) Open(ctx context.Context, clientID string) (int64, error) {
	return s.rdb.ZCount(ctx, s.key(clientID), "("+nowMS(ctx, s.rdb), "+inf").Result()
}

func nowMS(ctx context.Context, rdb *redis.Client) string {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		t = time.Now()
	}
	return formatInt(t.UnixMilli())
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
