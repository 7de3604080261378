package api

import (
	"context"
	"sync"
	"sync/atomic"
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
	budget := s.requestBudget()
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
	ri := infoFrom(ctx.Context())
	start := ri.Start
	if start.IsZero() {
		start = time.Now()
	}
	b := &ri.budget
	b.Context, b.deadline = ctx.Context(), start.Add(budget)
	defer b.stop()
	next(huma.WithContext(ctx, b))
}

// budgetCtx is a request's context with its budget as deadline. It starts
// a timer only when something waits on it (Done: a database query, the
// gate's ledger), so requests answered from memory (cached reads, leased
// admissions) pay no timer; it lives in the request's requestInfo, so it
// costs no allocation of its own.
type budgetCtx struct {
	context.Context // the request's context
	deadline        time.Time

	once    sync.Once
	started atomic.Bool
	timed   context.Context // with the deadline, once started
	cancel  context.CancelFunc
}

func (c *budgetCtx) start() {
	c.timed, c.cancel = context.WithDeadline(c.Context, c.deadline)
	c.started.Store(true)
}

// Deadline is the budget's end, or the parent's if earlier.
func (c *budgetCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done is closed when the budget ends or the request's context is done.
func (c *budgetCtx) Done() <-chan struct{} {
	c.once.Do(c.start)
	return c.timed.Done()
}

// Err is context.DeadlineExceeded once the budget is spent, the parent's
// error if it ended first.
func (c *budgetCtx) Err() error {
	if c.started.Load() {
		return c.timed.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if time.Until(c.deadline) <= 0 { // the monotonic clock only
		return context.DeadlineExceeded
	}
	return nil
}

// stop releases the timer, if one was started.
func (c *budgetCtx) stop() {
	if c.started.Load() {
		c.cancel()
	}
}

// requestBudget is the configured budget of a request (none when ≤ 0).
func (s *Server) requestBudget() time.Duration {
	if s.cfg.RequestTimeout == 0 {
		return DefaultRequestTimeout
	}
	return s.cfg.RequestTimeout
}
