package api

import (
	"context"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/webhook"
)

// DefaultRequestTimeout is the time budget of a public request
// (MARKET_REQUEST_TIMEOUT): a request whose dependency (Postgres, Redis)
// is slow, frozen or broken gets its 503 with Retry-After within it,
// rather than hanging until a driver time-out and then answering 500.
const DefaultRequestTimeout = 4 * time.Second

// MetaRequestTimeout is the operation metadata key (a time.Duration)
// overriding the request budget of one operation; a zero or negative
// duration means no budget (long-lived responses, e.g. streams).
const MetaRequestTimeout = "request_timeout"

// longOperations need more than the budget by design: a test ping waits
// for the subscriber's answer (webhook.Timeout).
var longOperations = map[string]time.Duration{
	"test-webhook": webhook.Timeout + DefaultRequestTimeout,
}

// deadlineMiddleware bounds every operation by its budget, counted from the
// request's arrival. What the operation and the gate wait for (Postgres,
// the quota ledger) ends with the budget, and the error becomes a 503
// with Retry-After (toProblem).
func (s *Server) deadlineMiddleware(ctx huma.Context, next func(huma.Context)) {
	budget := s.cfg.RequestTimeout
	if budget == 0 {
		budget = DefaultRequestTimeout
	}
	op := ctx.Operation()
	if d, ok := longOperations[op.OperationID]; ok {
		budget = max(budget, d)
	}
	if d, ok := op.Metadata[MetaRequestTimeout].(time.Duration); ok {
		budget = d
	}
	if budget <= 0 {
		next(ctx)
		return
	}
	start := infoFrom(ctx.Context()).Start
	if start.IsZero() {
		start = time.Now()
	}
	c, cancel := context.WithDeadline(ctx.Context(), start.Add(budget))
	defer cancel()
	next(huma.WithContext(ctx, c))
}
