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

// Stats reads the gate's counters (for the metrics).
func (g *Gate) Stats() obs.GateStats {
	var s obs.GateStats
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
