package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/marketscreener/market/rediskeys"
	"github.com/redis/go-redis/v9"
)

// DefaultSlotTTL is how long a stream's slot outlives its last refresh: a
// replica that crashed gives its clients' slots back within this time.
const DefaultSlotTTL = 30 * time.Second

// Slots counts each client's open streams across every api replica: a
// Redis sorted set per client whose members are the open streams, scored
// by the end of their lease. A lease not refreshed (its replica died) runs
// out, and the next call for the client sweeps it.
//
// Each replica refreshes its streams' leases every third of the TTL, one
// call per client, oldest stream first. A refresh extends a lease that is
// there and never adds one over the cap: a stream whose lease is gone
// (Redis lost its state, or was down and the lease ran out) takes a free
// slot again if there is one, else it has lost its place and its Lost
// channel closes (the stream ends). An acquire first re-registers the
// replica's own streams of the client the same way, so on one replica a
// client never holds more streams than its cap, Redis state or not; across
// replicas, a stream admitted elsewhere after a loss of state is counted
// against the older ones at their next refresh (within a third of the TTL).
//
// With Redis unreachable the Redis-backed counters' outage policy holds
// (rediskeys.Outage): each replica counts its own streams of a client
// against the same cap (so with R replicas a client may hold up to R×N
// meanwhile), without asking Redis until the policy's probe sees it
// answer; the next refresh then registers them under the cap and the
// youngest beyond it lose their place.
type Slots struct {
	rdb    *redis.Client
	prefix string
	ttl    time.Duration
	logger *slog.Logger

	// locks serialise each client's calls to Redis (a stripe per client),
	// so a release's removal never races a refresh that would add the
	// released stream back.
	locks [64]sync.Mutex
	seed  maphash.Seed

	mu      sync.Mutex
	clients map[string]*clientSlots // guarded by mu; their fields by locks
	running bool                    // the refresh loop runs

	outage *rediskeys.Outage
}

// clientSlots is one client's streams on this replica.
type clientSlots struct {
	max  int     // the cap the client's latest acquire asked for (its tier)
	held []*Slot // oldest first
}

// Slot is one stream's place under its client's cap.
type Slot struct {
	slots    *Slots
	clientID string
	member   string
	lost     chan struct{}
	gone     bool // released or lost; guarded by the client's lock
	max      int  // the cap the slot was last held under; guarded by the client's lock
	once     sync.Once
}

// NewSlots returns the slot counter (ttl DefaultSlotTTL when 0).
func NewSlots(rdb *redis.Client, prefix string, ttl time.Duration, logger *slog.Logger) *Slots {
	if ttl <= 0 {
		ttl = DefaultSlotTTL
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Slots{rdb: rdb, prefix: prefix, ttl: ttl, logger: logger, seed: maphash.MakeSeed(),
		clients: make(map[string]*clientSlots),
		outage:  rediskeys.NewOutage(rediskeys.CounterStreamSlots, "streams counted per replica", logger, rdb, nil)}
}

// registerScript sweeps expired leases, then goes through the members
// (ARGV[3..], oldest first): a member that is there has its lease
// extended; one that is not is added while the set holds fewer than
// ARGV[2], else it is refused. It returns 1 (held) or 0 (refused) per
// member. Redis's clock decides expiry, so replicas' clocks need not agree.
var registerScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
local out = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
    out[#out + 1] = 1
  elseif n < limit then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
    n = n + 1
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
return out
`)

func (s *Slots) key(clientID string) string { return rediskeys.Space(s.prefix).StreamSlots(clientID) }

func (s *Slots) lock(clientID string) *sync.Mutex {
	return &s.locks[maphash.String(s.seed, clientID)%uint64(len(s.locks))]
}

// Acquire takes one of the client's max slots. It returns ok false when
// they are all taken; otherwise the slot, whose Release must be called
// when the stream ends, and whose Lost channel closes if the stream loses
// its place (see Slots).
func (s *Slots) Acquire(ctx context.Context, clientID string, max int) (*Slot, bool) {
	slot := &Slot{slots: s, clientID: clientID, member: newMember(), lost: make(chan struct{}), max: max}
	l := s.lock(clientID)
	l.Lock()
	defer l.Unlock()
	cs := s.entry(clientID)
	cs.max = max
	candidates := append(slices.Clone(cs.held), slot)
	held, err := s.register(ctx, clientID, candidates, max)
	if err != nil {
		// Redis away: count this replica's streams of the client.
		s.outage.Fallback()
		held = nil
		if len(cs.held) < max {
			held = append(slices.Repeat([]bool{true}, len(cs.held)), true)
		}
	}
	if held == nil || !held[len(held)-1] {
		s.settle(cs, candidates[:len(candidates)-1], held)
		s.forgetIfEmpty(clientID, cs)
		return nil, false
	}
	s.settle(cs, candidates, held)
	s.mu.Lock()
	if !s.running {
		s.running = true
		go s.refreshLoop()
	}
	s.mu.Unlock()
	return slot, true
}

// newMember names a stream in its client's set: the time it was admitted
// (fixed-width hex nanoseconds, so members sort in admission order across
// replicas, clocks' skew aside), then random bytes.
func newMember() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x", time.Now().UnixNano()) + hex.EncodeToString(b[:])
}

// fitScript keeps ARGV[2] in the set if it is among the ARGV[1] oldest
// members (by name: admission order) once expired leases are swept, and
// removes it otherwise. It returns 1 (kept, or not in the set: the next
// refresh registers it under the cap) or 0 (removed).
var fitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return 1
end
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local rank = 0
for _, m in ipairs(members) do
  if m < ARGV[2] then
    rank = rank + 1
  end
end
if rank < tonumber(ARGV[1]) then
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[2])
return 0
`)

// Fit puts the slot under a new cap of its client (its tier changed): a
// lower cap keeps the client's max oldest streams, over every replica,
// and Fit returns false for the others, whose slots are given back (the
// stream must end; Release is still to be called). Every stream of the
// client calls it when it sees the new tier (each decides for itself, by
// the same order, so together they keep exactly the oldest max). With
// Redis unreachable the replica's own streams of the client are ranked
// instead. A higher cap only becomes the client's. Nil slot: true.
func (sl *Slot) Fit(ctx context.Context, max int) bool {
	if sl == nil {
		return true
	}
	s := sl.slots
	l := s.lock(sl.clientID)
	l.Lock()
	defer l.Unlock()
	if sl.gone || sl.max == max {
		return true // a lost slot's stream ends by Lost
	}
	lower := max < sl.max
	sl.max = max
	s.mu.Lock()
	cs := s.clients[sl.clientID]
	s.mu.Unlock()
	if cs != nil {
		cs.max = max // refreshes re-register under the new cap
	}
	if !lower {
		return true
	}
	keep := false
	if s.outage.Ask() {
		rctx := context.WithoutCancel(ctx)
		kept, err := fitScript.Run(rctx, s.rdb, []string{s.key(sl.clientID)}, max, sl.member).Int()
		keep = kept == 1
		if !s.outage.Done(rctx, err) {
			keep = cs == nil || slices.Index(cs.held, sl) < max
		}
	} else {
		s.outage.Fallback()
		keep = cs == nil || slices.Index(cs.held, sl) < max
	}
	if keep {
		return true
	}
	if cs != nil {
		cs.held = slices.DeleteFunc(cs.held, func(c *Slot) bool { return c == sl })
		s.forgetIfEmpty(sl.clientID, cs)
	}
	return false
}

// register runs registerScript for the candidates; held[i] tells whether
// candidates[i] holds a slot. An error is an outage (logged once).
func (s *Slots) register(ctx context.Context, clientID string, candidates []*Slot, max int) (held []bool, err error) {
	if !s.outage.Ask() {
		return nil, errOutage
	}
	ctx = context.WithoutCancel(ctx)
	args := make([]any, 0, 2+len(candidates))
	args = append(args, s.ttl.Milliseconds(), max)
	for _, c := range candidates {
		args = append(args, c.member)
	}
	res, err := registerScript.Run(ctx, s.rdb, []string{s.key(clientID)}, args...).Int64Slice()
	if !s.outage.Done(ctx, err) {
		return nil, err
	}
	held = make([]bool, len(candidates))
	for i := range held {
		held[i] = i < len(res) && res[i] == 1
	}
	return held, nil
}

// settle keeps the candidates that hold a slot (held nil: none of them
// was answered, keep them all) and tells the others they lost their place.
// The caller holds the client's lock.
func (s *Slots) settle(cs *clientSlots, candidates []*Slot, held []bool) {
	if held == nil {
		return
	}
	cs.held = cs.held[:0]
	for i, c := range candidates {
		if held[i] {
			cs.held = append(cs.held, c)
		} else if !c.gone {
			c.gone = true
			close(c.lost)
		}
	}
}

// entry returns the client's entry, created when missing. The caller
// holds the client's lock.
func (s *Slots) entry(clientID string) *clientSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.clients[clientID]
	if cs == nil {
		cs = &clientSlots{}
		s.clients[clientID] = cs
	}
	return cs
}

// forgetIfEmpty drops the client's entry when it holds no stream. The
// caller holds the client's lock.
func (s *Slots) forgetIfEmpty(clientID string, cs *clientSlots) {
	if len(cs.held) > 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, clientID)
}

// refreshLoop refreshes every client's leases every third of the TTL,
// while any stream holds a slot here.
func (s *Slots) refreshLoop() {
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	for range t.C {
		if !s.refreshAll() {
			return
		}
	}
}

// refreshAll refreshes every client's leases; false when no stream holds
// a slot (the loop then stops).
func (s *Slots) refreshAll() bool {
	s.mu.Lock()
	ids := make([]string, 0, len(s.clients))
	for id := range s.clients {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		s.running = false
	}
	s.mu.Unlock()
	for _, id := range ids {
		if s.refresh(id) != nil {
			break // Redis away: the next round tries again, without a wait per client
		}
	}
	return len(ids) > 0
}

// refresh extends the client's leases, re-registers those that are gone
// under the cap, and closes Lost of those that found no room. On a Redis
// error every stream keeps its place until the next refresh.
func (s *Slots) refresh(clientID string) error {
	l := s.lock(clientID)
	l.Lock()
	defer l.Unlock()
	s.mu.Lock()
	cs := s.clients[clientID]
	s.mu.Unlock()
	if cs == nil || len(cs.held) == 0 {
		return nil
	}
	candidates := slices.Clone(cs.held)
	held, err := s.register(context.Background(), clientID, candidates, cs.max)
	if err != nil {
		return err
	}
	s.settle(cs, candidates, held)
	s.forgetIfEmpty(clientID, cs)
	return nil
}

// Lost is closed when the stream lost its place under the cap (see
// Slots): the stream must end. Nil (never closed) on a nil slot.
func (sl *Slot) Lost() <-chan struct{} {
	if sl == nil {
		return nil
	}
	return sl.lost
}

// Release gives the slot back; calling it again, or on a nil slot, does
// nothing.
func (sl *Slot) Release() {
	if sl == nil {
		return
	}
	sl.once.Do(func() {
		s := sl.slots
		l := s.lock(sl.clientID)
		l.Lock()
		defer l.Unlock()
		s.mu.Lock()
		cs := s.clients[sl.clientID]
		s.mu.Unlock()
		if cs != nil {
			cs.held = slices.DeleteFunc(cs.held, func(c *Slot) bool { return c == sl })
			s.forgetIfEmpty(sl.clientID, cs)
		}
		if sl.gone {
			return // never registered since, or already removed
		}
		sl.gone = true
		if !s.outage.Ask() {
			return // the lease runs out within the TTL
		}
		ctx := context.Background()
		s.outage.Done(ctx, s.rdb.ZRem(ctx, s.key(sl.clientID), sl.member).Err())
	})
}

// Degraded reports whether an outage of Redis is in progress: streams
// are counted per replica until it ends.
func (s *Slots) Degraded() bool { return s.outage.Down() }

// Open is how many of the client's streams hold a slot in Redis (for
// tests and operators).
func (s *Slots) Open(ctx context.Context, clientID string) (int64, error) {
	return s.rdb.ZCount(ctx, s.key(clientID), "("+nowMS(ctx, s.rdb), "+inf").Result()
}

// errOutage: Redis is not asked during an outage (rediskeys.Outage).
var errOutage = errors.New("stream: redis outage in progress")

func nowMS(ctx context.Context, rdb *redis.Client) string {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		t = time.Now()
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}
