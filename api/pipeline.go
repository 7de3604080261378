package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
)

// The request pipeline: every public request goes through it once, in
// this order, before its operation.
//
//  1. requestMiddleware (the whole listener): the request id, panic
//     recovery, the access log.
//  2. the ServeMux, the only router: a route's pattern (routes.go), else 404.
//  3. boundRoute.ServeHTTP: the request budget, readiness, the gate (key,
//     client status, rate limit, quota) and the key-kind check, the
//     operation, the metrics.
//
// The operation's inputs are decoded by huma (validation: 400), or for a
// hot GET by its hand-written decoder when it takes them as they are
// (routes.go); huma encodes, or the hot route's encoder writes the same
// bytes. huma's own middleware chain is not used.

// DefaultRequestTimeout is the time budget of a public request
// (MARKET_REQUEST_TIMEOUT): a request whose dependency (Postgres, Redis)
// is slow, frozen or broken gets its 503 with Retry-After within it,
// rather than hanging until a driver time-out and then answering 500.
const DefaultRequestTimeout = 4 * time.Second

type ctxKey int

const requestInfoKey ctxKey = iota

// requestInfo is one request's state through the pipeline, in one
// allocation: its id, start time and admitted caller, the response
// recorder, and the arrays backing the values of the headers most
// responses carry. It is also the request's context (the server's, with
// itself as the value of requestInfoKey), so no context.WithValue is
// allocated per request.
type requestInfo struct {
	context.Context // the request's context from net/http
	ID              string
	ClientID        string
	Start           time.Time
	// caller is set once the gate admitted the request.
	caller      principal
	rec         statusRecorder
	idHeader    [1]string
	gateHeaders [3]string
	dataHeaders [8]string // a hot route's ETag, Last-Modified, Cache-Control, X-Unknown-Symbols, Content-Length, X-Market-*
	// budget is the request's context with its deadline, when it has one.
	budget budgetCtx
}

// Value is the request's requestInfo for requestInfoKey, else the parent's value.
func (ri *requestInfo) Value(k any) any {
	if k, ok := k.(ctxKey); ok && k == requestInfoKey {
		return ri
	}
	return ri.Context.Value(k)
}

func infoFrom(ctx context.Context) *requestInfo {
	if ri, ok := ctx.(*requestInfo); ok {
		return ri
	}
	if ri, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

// now is the time of the request of ctx: the arrival the request
// middleware read, when the server runs on the real clock (one clock read
// serves the gate, the operation and the metrics), else the configured
// clock's reading.
func (s *Server) now(ctx context.Context) time.Time {
	if s.realClock {
		if ri, ok := ctx.(*requestInfo); ok {
			return ri.Start
		}
		if ri, ok := ctx.Value(requestInfoKey).(*requestInfo); ok && !ri.Start.IsZero() {
			return ri.Start
		}
	}
	return s.cfg.Now()
}

// newRequestID is 16 hex digits from the runtime's per-thread ChaCha8
// generator: unique enough to find a request in the logs, and no system
// call per request (it is not a secret).
func newRequestID() string {
	var b [8]byte
	n := rand.Uint64()
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// statusRecorder captures the status for the access log and the metrics,
// and carries the request's requestInfo to its route: the mux passes the
// writer on as it is, so the route needs no request copy to find it.
type statusRecorder struct {
	http.ResponseWriter
	status int
	ri     *requestInfo
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// requestMiddleware gives every request an id (X-Request-Id, echoed when the
// client sent a sane one), recovers panics into a 500 problem and writes one
// structured access-log line. The API key is never logged.
func (s *Server) requestMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var id string
		if v := r.Header["X-Request-Id"]; len(v) > 0 {
			id = v[0]
		}
		if len(id) == 0 || len(id) > 64 || !printableASCII(id) {
			id = newRequestID()
		}
		ri := &requestInfo{Context: r.Context(), ID: id, Start: start}
		ri.idHeader[0] = id
		w.Header()["X-Request-Id"] = ri.idHeader[:] // canonical already: no Set
		rec := &ri.rec
		rec.ResponseWriter, rec.ri = w, ri
		defer func() {
			if v := recover(); v != nil {
				s.cfg.Logger.Error("panic", "request_id", id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeProblem(rec, newProblem(http.StatusInternalServerError, "internal error ("+id+")"))
				}
			}
			// Checked first so that above info level (the usual production
			// setting under load) a request builds no log attributes.
			if s.cfg.Logger.Enabled(r.Context(), slog.LevelInfo) {
				s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
					slog.String("request_id", id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
					slog.Int("status", rec.status), slog.String("client_id", ri.ClientID),
					slog.Duration("duration", time.Since(start)))
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// boundRoute is a route of one server: its operation as huma registered
// it, huma's handler of it, and its metric series.
type boundRoute struct {
	route
	s      *Server
	op     *huma.Operation
	huma   func(huma.Context)
	series routeSeries
}

// ServeHTTP runs the rest of the pipeline: budget, readiness, gate,
// key kind, the operation, metrics.
func (b *boundRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec, ok := w.(*statusRecorder)
	if !ok || rec.ri == nil { // not through requestMiddleware
		ri := &requestInfo{Context: r.Context(), Start: time.Now()}
		ri.rec = statusRecorder{ResponseWriter: w, ri: ri}
		rec = &ri.rec
	}
	ri := rec.ri
	var ctx context.Context = ri
	// What the operation and the gate wait for (Postgres, the quota
	// ledger) ends with the budget, counted from the request's arrival,
	// and the error becomes a 503 with Retry-After (toProblem).
	if budget := b.budgetOf(b.s.cfg.RequestTimeout); budget > 0 {
		bc := &ri.budget
		bc.Context, bc.deadline = ri, ri.Start.Add(budget)
		defer bc.stop()
		ctx = bc
	}
	b.serve(ctx, rec, r, ri)
	b.s.metrics.observeRoute(&b.series, b.id, rec.status, time.Since(ri.Start))
}

func (b *boundRoute) serve(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	s := b.s
	if !s.cfg.Ready() {
		hctx := b.humaContext(ctx, w, r)
		hctx.SetHeader("Retry-After", "5")
		_ = huma.WriteErr(s.humaAPI, hctx, http.StatusServiceUnavailable,
			"the data service is not initialised yet (starting up or its database is unreachable); retry later")
		return
	}
	// The gate (package admission) answers first: the parameter checks
	// (400), the market-in-tier check (403) and 404 follow in the operation.
	out, err := s.admit(ctx, r)
	if err != nil {
		s.writeError(b.humaContext(ctx, w, r), err)
		return
	}
	if out.Client != nil {
		ri.ClientID = out.Client.ID
	}
	setGateHeaders(w.Header(), out, &ri.gateHeaders)
	if !out.Admitted() {
		_ = huma.WriteErr(s.humaAPI, b.humaContext(ctx, w, r), out.Status, out.Detail)
		return
	}
	if msg := s.keyKindMismatch(out.Key); msg != "" {
		_ = huma.WriteErr(s.humaAPI, b.humaContext(ctx, w, r), http.StatusForbidden, msg)
		return
	}
	ri.caller = principal{Client: out.Client, Key: out.Key, Used: out.Used}
	if b.hot != nil && !s.noHot {
		if served, err := b.hot(s, ctx, w, r, ri); served {
			if err != nil {
				s.writeError(b.humaContext(ctx, w, r), err)
			}
			return
		}
	}
	b.huma(b.humaContext(ctx, w, r))
}

// admit asks the gate about r.
func (s *Server) admit(ctx context.Context, r *http.Request) (admission.Outcome, error) {
	var key string
	if v := r.Header["X-Api-Key"]; len(v) > 0 { // the server canonicalised it: no Get
		key = v[0]
	}
	req := admission.Request{Key: key, RemoteAddr: r.RemoteAddr}
	if s.realClock {
		req.Now = s.now(ctx)
	}
	return s.gate.Admit(ctx, req)
}

// setGateHeaders writes the gate's headers under their canonical names,
// their values backed by vals (this runs on every request).
func setGateHeaders(h http.Header, out admission.Outcome, vals *[3]string) {
	if out.RateLimitPolicy == "" && out.RetryAfter == "" {
		return
	}
	*vals = [3]string{out.RateLimitPolicy, out.RateLimit, out.RetryAfter}
	s := vals[:]
	if out.RateLimitPolicy != "" {
		h["Ratelimit-Policy"] = s[0:1:1]
		h["Ratelimit"] = s[1:2:2]
	}
	if out.RetryAfter != "" {
		h["Retry-After"] = s[2:3:3]
	}
}

// keyKindMismatch is the refusal of a key on the other kind of server
// (SandboxRouter never sends one there; this makes the separation hold
// even if it did).
func (s *Server) keyKindMismatch(k *domain.APIKey) string {
	if k == nil || k.Sandbox() == s.cfg.Sandbox {
		return ""
	}
	if s.cfg.Sandbox {
		return "a live key cannot use the sandbox"
	}
	return "a sandbox key cannot reach live data"
}

// principal is the admitted caller of one request.
type principal struct {
	Client *domain.Client
	Key    *domain.APIKey
	// Used is the month's count including this request.
	Used int64
}

// principalFrom is the caller the gate admitted, or nil.
func principalFrom(ctx context.Context) *principal {
	ri := infoFrom(ctx)
	if ri.caller.Client == nil {
		return nil
	}
	return &ri.caller
}

// requireMarket is the 403 check that follows parameter validation: the
// market must be in the client's tier.
func requireMarket(ctx context.Context, m domain.Market) error {
	p := principalFrom(ctx)
	if p == nil || !p.Client.AllowsMarket(m) {
		return huma.Error403Forbidden(fmt.Sprintf("the market %s is not included in your tier (allowed: %v)", m, allowedList(p)))
	}
	return nil
}

func allowedList(p *principal) []string {
	if p == nil {
		return nil
	}
	return domain.MarketNames(p.Client.Markets)
}

// budgetOf is the route's budget under the configured one (none when ≤ 0).
func (rt *route) budgetOf(configured time.Duration) time.Duration {
	if configured == 0 {
		configured = DefaultRequestTimeout
	}
	switch {
	case rt.budget < 0:
		return 0
	case rt.budget > 0:
		return max(configured, rt.budget)
	}
	return configured
}

// humaContext is huma's view of the request, with ctx as its context.
func (b *boundRoute) humaContext(ctx context.Context, w http.ResponseWriter, r *http.Request) huma.Context {
	if r.Context() != ctx {
		r = r.WithContext(ctx)
	}
	return humago.NewContext(b.op, r, w)
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
