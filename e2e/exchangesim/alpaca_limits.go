package exchangesim

import (
	"sync"
	"time"
)

// keyLimiter keeps one Alpaca API's budget per key: at most limit
// requests in a window ("200 requests per minute, per account",
// alpaca.markets/support/usage-limit-api-calls; 10,000 on the paid data
// plan, [docs-md] market-data/_index.md). Every page of a paged response
// is a request of its own ([forum] 16502).
//
// Alpaca documents X-RateLimit-Reset as "the UNIX epoch when the
// remaining quota changes" ([docs-ref] stockbarsingle-1) and staff
// describe it as when "the rate counter will reset" ([forum] 12029); the
// simulator keeps a fixed window per key that opens with the key's first
// request after the previous one ended (chosen), so Reset is that
// window's end, rounded up to the second.
type keyLimiter struct {
	limit  int
	window time.Duration

	mu            sync.Mutex
	keys          map[string]*keyWindow
	peak          int
	requests      int64
	refused       int64
	sentDuring429 int64
	mark          limitMark // since the last Sim.Mark (n429: refused)
}

type keyWindow struct {
	start   time.Time
	used    int
	refused bool // a 429 was answered in this window
}

// limitDecision is the limiter's answer and the three headers' values.
type limitDecision struct {
	ok               bool
	limit, remaining int
	reset            int64 // unix seconds
}

func newKeyLimiter(limit int, window time.Duration) *keyLimiter {
	return &keyLimiter{limit: limit, window: window, keys: map[string]*keyWindow{}}
}

func (l *keyLimiter) admit(key string, now time.Time) limitDecision {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	w := l.keys[key]
	if w == nil || !now.Before(w.start.Add(l.window)) {
		w = &keyWindow{start: now}
		l.keys[key] = w
	}
	end := w.start.Add(l.window)
	reset := end.Unix()
	if end.Nanosecond() != 0 {
		reset++
	}
	if w.used >= l.limit {
		l.refused++
		if w.refused {
			l.sentDuring429++
		}
		w.refused = true
		return limitDecision{limit: l.limit, reset: reset}
	}
	w.used++
	l.peak = max(l.peak, w.used)
	l.mark.peak = max(l.mark.peak, w.used)
	return limitDecision{ok: true, limit: l.limit, remaining: l.limit - w.used, reset: reset}
}

// markNow starts the figures since a mark: the keys' windows open at now
// count with what they hold already.
func (l *keyLimiter) markNow(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mark = limitMark{reqs: l.requests, n429: l.refused, sentDuring429: l.sentDuring429}
	for _, w := range l.keys {
		if now.Before(w.start.Add(l.window)) {
			l.mark.peak = max(l.mark.peak, w.used)
		}
	}
}

func (l *keyLimiter) stats() AlpacaLimitStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return AlpacaLimitStats{Limit: l.limit, WindowMS: l.window.Milliseconds(), PeakRequests: l.peak,
		Requests: l.requests, Refused429: l.refused, SentDuring429: l.sentDuring429,
		SinceMark: AlpacaLimitMark{PeakRequests: l.mark.peak, Requests: l.requests - l.mark.reqs,
			Refused429: l.refused - l.mark.n429, SentDuring429: l.sentDuring429 - l.mark.sentDuring429}}
}
