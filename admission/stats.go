package admission

import (
	"net/http"

	"github.com/marketscreener/market/obs"
)

// reasonOf is the metrics reason of a gate answer (obs.Reasons).
func reasonOf(o Outcome, err error) string {
	if err != nil {
		return obs.ReasonUnavailable
	}
	switch o.Status {
	case http.StatusOK:
		return obs.ReasonOK
	case http.StatusUnauthorized:
		if o.Detail == msgMissingKey {
			return obs.ReasonMissingKey
		}
		return obs.ReasonInvalidKey
	case http.StatusForbidden:
		if o.Detail == msgSuspended {
			return obs.ReasonSuspended
		}
		return obs.ReasonExpired
	case http.StatusTooManyRequests:
		switch o.Detail {
		case msgThrottled:
			return obs.ReasonThrottled
		case QuotaExceededDetail:
			return obs.ReasonQuotaExceeded
		}
		return obs.ReasonRateLimited
	}
	return obs.ReasonUnavailable
}

// Stats are the gate's counters since it started, for the metrics.
type Stats struct {
	// Lease slots taken ahead and given back, of the rolling window
	// (Redis) and of the monthly quota ledger (Postgres).
	WindowLeased, WindowReturned int64
	QuotaLeased, QuotaReturned   int64
	// QuotaReturnsPending are unused quota slots whose give-back to
	// Postgres has not succeeded yet (they count against clients until it
	// does): a ledger lagging behind.
	QuotaReturnsPending int64
	// RateLimiterDegraded: limits are per replica (Redis unreachable).
	RateLimiterDegraded bool
	// KeysCached is how many keys the cache holds.
	KeysCached int
}

// Stats reads the gate's counters.
func (g *Gate) Stats() Stats {
	var s Stats
	s.WindowLeased, s.WindowReturned = g.window.eng.leaseStats()
	s.QuotaLeased, s.QuotaReturned = g.quota.eng.leaseStats()
	s.QuotaReturnsPending = g.quota.eng.pendingReturns()
	s.RateLimiterDegraded = g.rate.Degraded()
	s.KeysCached = g.keys.Len()
	return s
}

// pendingReturns counts the slots still to be given back.
func (e *engine[K, P, R, G]) pendingReturns() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
	for _, gbs := range e.returns {
		for _, gb := range gbs {
			n += gb.slots()
		}
	}
	return n
}
