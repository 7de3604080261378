package admission

import "time"

// Window is the rolling window of the rate limit: at most N admitted
// requests in any 60-second interval.
const Window = 60 * time.Second

// Decision is the answer of a rate limiter for one request, with what the
// api needs for the RateLimit and Retry-After headers.
type Decision struct {
	Allowed bool
	// Limit is the N the decision was taken with.
	Limit int
	// Remaining is how many more requests the window admits right now.
	Remaining int
	// RetryAfter is 0 when allowed; otherwise the whole seconds (at least
	// one, rounded up) until the entry that blocks this request leaves the
	// window, so a client that waits exactly that long is admitted.
	RetryAfter time.Duration
	// Reset is the whole seconds (rounded up) until Remaining next grows,
	// i.e. until the oldest counted request leaves the window; 0 when the
	// window is empty. It is the t= of the RateLimit header.
	Reset time.Duration
}

// ceilSeconds rounds d up to whole seconds, at least one second when d > 0.
func ceilSeconds(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// decide turns the state of a sliding log into a Decision.
//
// count is the number of entries in the window after the request was (or
// was not) added; untilOldest is the time until the oldest entry leaves
// the window; untilFree is the time until enough entries leave for one more
// request to fit (the same entry as untilOldest unless the limit was
// lowered below the entries already in the window).
func decide(allowed bool, limit, count int, untilOldest, untilFree time.Duration) Decision {
	d := Decision{Allowed: allowed, Limit: limit, Remaining: max(limit-count, 0)}
	if count > 0 {
		d.Reset = max(ceilSeconds(untilOldest), time.Second)
	}
	if !allowed {
		d.RetryAfter = max(ceilSeconds(untilFree), time.Second)
	}
	return d
}
