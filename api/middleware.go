package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/admission"
)

type ctxKey int

const requestInfoKey ctxKey = iota

// requestInfo is shared by the outer HTTP middleware and the huma
// middlewares of one request (filled in as the request goes through auth):
// one allocation per request carries the id, the start time and the
// admitted caller. It is also the request's context (the server's, with
// itself as the value of requestInfoKey), so no context.WithValue is
// allocated per request.
type requestInfo struct {
	context.Context // the request's context from net/http
	ID              string
	ClientID        string
	Start           time.Time
	// caller is set once the gate admitted the request.
	caller principal
	// rec wraps the response writer, and the arrays back the values of the
	// headers every response carries (here to save allocations).
	rec         statusRecorder
	idHeader    [1]string
	gateHeaders [3]string
	// budget is the request's deadline context (deadlineMiddleware);
	// fastBudget the fast path's (the same deadline, a context of its own).
	budget      budgetCtx
	fastBudget  budgetCtx
	dataHeaders [5]string // the fast path's ETag, Last-Modified, Cache-Control, X-Unknown-Symbols, Content-Length
	// gated is set when the fast path (fastpath.go) asked the gate and then
	// handed the request to huma: authMiddleware uses gateOut and gateErr
	// instead of asking again (a request is admitted and counted once).
	gated   bool
	gateOut admission.Outcome
	gateErr error
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

// statusRecorder captures the status for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
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
		rec.ResponseWriter = w
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
		if s.fast != nil && s.serveFast(ri, rec, r, ri) {
			return
		}
		next.ServeHTTP(rec, r.WithContext(ri))
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

// readinessMiddleware answers 503 with Retry-After until the process is
// ready (Postgres reachable, schema at the expected version).
func (s *Server) readinessMiddleware(ctx huma.Context, next func(huma.Context)) {
	if !s.cfg.Ready() {
		ctx.SetHeader("Retry-After", "5")
		_ = huma.WriteErr(s.humaAPI, ctx, http.StatusServiceUnavailable,
			"the data service is not initialised yet (starting up or its database is unreachable); retry later")
		return
	}
	next(ctx)
}
