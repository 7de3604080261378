package exchangesim

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// limiter keeps one family's budget per IP as Binance documents it
// (rest-api.md, "LIMITS"): the weight of each request is counted in a
// fixed window; a request over the limit is refused 429 with the seconds
// to the window's end in Retry-After; an IP that sends during that back-off
// is banned, 418, for a time that doubles with each ban (2 minutes up to
// 3 days), Retry-After saying until when.
type limiter struct {
	window time.Duration
	limit  int
	cfg    Config

	mu   sync.Mutex
	ips  map[string]*ipState
	peak int
	reqs int64
	n429 int64
	n418 int64
	mark limitMark // since the last Sim.Mark
}

// limitMark is a limiter's figures since a mark (Sim.Mark): the peak of
// every window open at the mark or after it (a window open at the mark
// counts whole, so the peak never understates), and the counts at the
// mark.
type limitMark struct {
	peak                            int
	reqs, n429, n418, sentDuring429 int64 // sentDuring429: keyLimiter's
}

// The -1003 TOO_MANY_REQUESTS messages of binance-spot-api-docs errors.md.
const (
	msgTooMuch = "Too much request weight used; current limit is %d request weight per %s. Please use WebSocket Streams for live updates to avoid polling the API."
	msgBanned  = "Way too much request weight used; IP banned until %d. Please use WebSocket Streams for live updates to avoid bans."
)

type ipState struct {
	windowIdx    int64
	used         int
	backoffUntil time.Time // a 429's Retry-After
	bannedUntil  time.Time
	bans         int
}

func newLimiter(window time.Duration, limit int, cfg Config) *limiter {
	return &limiter{window: window, limit: limit, cfg: cfg, ips: map[string]*ipState{}}
}

// decision is the limiter's answer to one request.
type decision struct {
	status     int
	retryAfter time.Duration
	used       int // the IP's weight in the window after the request
	err        *apiError
}

func (l *limiter) admit(ip string, weight int) decision {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs++
	st := l.ips[ip]
	if st == nil {
		st = &ipState{}
		l.ips[ip] = st
	}
	idx := now.UnixNano() / int64(l.window)
	if idx != st.windowIdx {
		st.windowIdx, st.used = idx, 0
	}
	switch {
	case now.Before(st.bannedUntil):
		l.n418++
		return l.refuse(http.StatusTeapot, st.bannedUntil.Sub(now), st, msgBanned, st.bannedUntil.UnixMilli())
	case now.Before(st.backoffUntil):
		st.bans++
		ban := l.cfg.FirstBan << (st.bans - 1)
		if ban > l.cfg.MaxBan || ban <= 0 {
			ban = l.cfg.MaxBan
		}
		st.bannedUntil = now.Add(ban)
		l.n418++
		return l.refuse(http.StatusTeapot, ban, st, msgBanned, st.bannedUntil.UnixMilli())
	case st.used+weight > l.limit:
		end := time.Unix(0, (idx+1)*int64(l.window))
		st.backoffUntil = end
		l.n429++
		return l.refuse(http.StatusTooManyRequests, end.Sub(now), st, msgTooMuch, l.limit, l.window)
	}
	st.used += weight
	l.peak = max(l.peak, st.used)
	l.mark.peak = max(l.mark.peak, st.used)
	return decision{status: http.StatusOK, used: st.used}
}

// markNow starts the figures since a mark: the windows open now count
// with what they hold already.
func (l *limiter) markNow() {
	idx := l.cfg.Now().UnixNano() / int64(l.window)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mark = limitMark{reqs: l.reqs, n429: l.n429, n418: l.n418}
	for _, st := range l.ips {
		if st.windowIdx == idx {
			l.mark.peak = max(l.mark.peak, st.used)
		}
	}
}

func (l *limiter) refuse(status int, wait time.Duration, st *ipState, format string, args ...any) decision {
	secs := max(1, int((wait+time.Second-1)/time.Second)) // whole seconds, rounded up
	return decision{status: status, retryAfter: time.Duration(secs) * time.Second, used: st.used,
		err: &apiError{Code: -1003, Msg: fmt.Sprintf(format, args...)}}
}

func (l *limiter) stats() FamilyStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return FamilyStats{Limit: l.limit, WindowMS: l.window.Milliseconds(), PeakWeight: l.peak,
		Requests: l.reqs, Refused429: l.n429, Banned418: l.n418,
		SinceMark: FamilyMark{PeakWeight: l.mark.peak, Requests: l.reqs - l.mark.reqs,
			Refused429: l.n429 - l.mark.n429, Banned418: l.n418 - l.mark.n418}}
}

func itoa(n int) string { return strconv.Itoa(n) }
