package admission

import (
	"hash/maphash"
	"sync"
	"time"
)

// LocalLimiter is the same exact sliding log as RollingWindowLimiter, kept
// in this process. It limits each replica on its own, so with R replicas a
// client may get up to R*N requests a minute: it is the fallback while
// Redis is down, not a replacement.
type LocalLimiter struct {
	now    func() time.Time
	base   time.Time
	seed   maphash.Seed
	shards [64]localShard
}

type localShard struct {
	mu      sync.Mutex
	logs    map[string]*timeLog
	sweepAt int64
}

// timeLog is a ring buffer of admission times in nanoseconds since base,
// oldest first.
type timeLog struct {
	buf        []int64
	head, size int
}

// NewLocalLimiter returns an empty limiter reading time from now (time.Now
// in production, a fake clock in tests).
func NewLocalLimiter(now func() time.Time) *LocalLimiter {
	l := &LocalLimiter{now: now, base: now(), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].logs = make(map[string]*timeLog)
	}
	return l
}

// Allow records one request of clientID if fewer than limit requests were
// admitted by this limiter in the last 60 seconds.
func (l *LocalLimiter) Allow(clientID string, limit int) Decision {
	return l.record(clientID, max(limit, 1), false, l.now())
}

// Observe records a request another limiter already admitted, without
// checking the limit, so that when the fallback takes over it knows what
// this replica admitted in the last minute.
func (l *LocalLimiter) Observe(clientID string, limit int) {
	l.record(clientID, max(limit, 1), true, l.now())
}

func (l *LocalLimiter) record(clientID string, limit int, force bool, at time.Time) Decision {
	now := at.Sub(l.base).Nanoseconds()
	cutoff := now - Window.Nanoseconds()
	s := &l.shards[maphash.String(l.seed, clientID)%uint64(len(l.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now >= s.sweepAt {
		s.sweep(cutoff)
		s.sweepAt = now + Window.Nanoseconds()
	}
	log := s.logs[clientID]
	if log == nil {
		log = &timeLog{}
		s.logs[clientID] = log
	}
	log.dropUpTo(cutoff)
	allowed := log.size < limit
	if allowed || force {
		log.push(now)
	}
	count := log.size
	var untilOldest, untilFree time.Duration
	if count > 0 {
		untilOldest = time.Duration(log.at(0) - cutoff)
		untilFree = untilOldest
		if count >= limit {
			untilFree = time.Duration(log.at(count-limit) - cutoff)
		}
	}
	d := decide(allowed, limit, count, untilOldest, untilFree)
	// Observed requests beyond a lowered limit keep memory bounded by limit.
	for force && log.size > limit {
		log.pop()
	}
	return d
}

// sweep forgets clients idle for a whole window, so memory follows the
// clients active in the last minute rather than every client ever seen.
func (s *localShard) sweep(cutoff int64) {
	for id, log := range s.logs {
		if log.size == 0 || log.at(log.size-1) <= cutoff {
			delete(s.logs, id)
		}
	}
}

func (r *timeLog) at(i int) int64 { return r.buf[(r.head+i)%len(r.buf)] }

func (r *timeLog) pop() {
	r.head = (r.head + 1) % len(r.buf)
	r.size--
}

func (r *timeLog) dropUpTo(cutoff int64) {
	for r.size > 0 && r.at(0) <= cutoff {
		r.pop()
	}
}

func (r *timeLog) push(t int64) {
	if r.size == len(r.buf) {
		grown := make([]int64, max(2*len(r.buf), 8))
		for i := 0; i < r.size; i++ {
			grown[i] = r.at(i)
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = t
	r.size++
}
