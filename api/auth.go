package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
)

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

// authMiddleware asks the gate (package admission) whether the request
// may reach its operation, and writes what the gate says: its refusal as
// a problem, and its headers either way. The parameter checks (400), the
// market-in-tier check (403) and 404 follow in the operation.
func (s *Server) authMiddleware(ctx huma.Context, next func(huma.Context)) {
	r, w := humago.Unwrap(ctx)
	ri := infoFrom(r.Context())
	out, err := ri.gateOut, ri.gateErr
	if !ri.gated {
		out, err = s.admit(ctx.Context(), r)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if out.Client != nil {
		ri.ClientID = out.Client.ID
	}
	setGateHeaders(w.Header(), out, &ri.gateHeaders)
	if !out.Admitted() {
		_ = huma.WriteErr(s.humaAPI, ctx, out.Status, out.Detail)
		return
	}
	if msg := s.keyKindMismatch(out.Key); msg != "" {
		_ = huma.WriteErr(s.humaAPI, ctx, http.StatusForbidden, msg)
		return
	}
	ri.caller = principal{Client: out.Client, Key: out.Key, Used: out.Used}
	next(ctx)
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

func (s *Server) writeError(ctx huma.Context, err error) {
	perr := toProblem(s.cfg.Logger, infoFrom(ctx.Context()).ID, err)
	var he huma.HeadersError
	if errors.As(perr, &he) {
		for k, vs := range he.GetHeaders() {
			for _, v := range vs {
				ctx.AppendHeader(k, v)
			}
		}
	}
	var p huma.StatusError
	if !errors.As(perr, &p) {
		p = newProblem(http.StatusInternalServerError, "internal error")
	}
	_ = huma.WriteErr(s.humaAPI, ctx, p.GetStatus(), problemDetail(p), problemErrors(p)...)
}

func problemDetail(p huma.StatusError) string {
	if m, ok := p.(*huma.ErrorModel); ok {
		return m.Detail
	}
	return p.Error()
}

func problemErrors(p huma.StatusError) []error {
	m, ok := p.(*huma.ErrorModel)
	if !ok {
		return nil
	}
	out := make([]error, len(m.Errors))
	for i, d := range m.Errors {
		out[i] = d
	}
	return out
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
