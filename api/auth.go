package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
)

// principal is the authenticated caller of one request.
type principal struct {
	Client    *domain.Client
	Key       *domain.APIKey
	Admission Admission
}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey).(*principal)
	return p
}

// authMiddleware runs the checks in the documented order (DESIGN §3):
// 401 key → 403 client suspended/expired → 429 rate limit → 429 quota. The
// parameter checks (400), the market-in-tier check (403) and 404 follow in
// the operation. Only a request admitted here counts against the quota.
func (s *Server) authMiddleware(ctx huma.Context, next func(huma.Context)) {
	key := ctx.Header("X-API-Key")
	fail := func(status int, msg string) {
		_ = huma.WriteErr(s.humaAPI, ctx, status, msg)
	}
	if key == "" {
		fail(http.StatusUnauthorized, "missing X-API-Key header")
		return
	}
	if !domain.CheckKeyFormat(key) {
		fail(http.StatusUnauthorized, "invalid API key: not a key issued by this service (format or checksum)")
		return
	}
	client, apiKey, err := s.auth.Authenticate(ctx.Context(), domain.HashKey(key))
	if err != nil {
		switch {
		case errors.Is(err, domain.ErrNotFound):
			fail(http.StatusUnauthorized, "invalid API key: unknown key")
			return
		}
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.EUNAUTHORIZED {
			fail(http.StatusUnauthorized, de.Message)
			return
		}
		s.writeError(ctx, err)
		return
	}
	if apiKey.RevokedAt != nil {
		fail(http.StatusUnauthorized, "invalid API key: the key has been revoked")
		return
	}
	now := s.cfg.Now()
	infoFrom(ctx.Context()).ClientID = client.ID
	switch client.EffectiveStatus(now) {
	case domain.StatusSuspended:
		fail(http.StatusForbidden, "client suspended; contact support")
		return
	case domain.StatusExpired:
		fail(http.StatusForbidden, "contract expired at "+client.ContractExpiresAt.Format(time.RFC3339)+"; contact sales to renew")
		return
	}
	adm, err := s.limiter.Admit(ctx.Context(), client, now)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	setRateLimitHeaders(ctx, adm)
	if !adm.Allowed {
		ctx.SetHeader("Retry-After", retryAfterSeconds(adm.RetryAfter))
		if adm.Refusal == domain.EQUOTA {
			fail(http.StatusTooManyRequests, msgQuotaExceeded)
		} else {
			fail(http.StatusTooManyRequests, msgRateLimited)
		}
		return
	}
	next(huma.WithValue(ctx, principalKey, &principal{Client: client, Key: apiKey, Admission: adm}))
}

// setRateLimitHeaders writes the IETF draft headers on every authenticated
// response: the policy (minute window and, when limited, month window) and
// what is left of the minute window.
func setRateLimitHeaders(ctx huma.Context, adm Admission) {
	// Built with strconv rather than fmt: this runs on every request.
	b := make([]byte, 0, 96)
	b = append(b, `"minute";q=`...)
	b = strconv.AppendInt(b, int64(adm.RateLimit), 10)
	b = append(b, ";w=60"...)
	if adm.Quota != nil {
		b = append(b, `, "month";q=`...)
		b = strconv.AppendInt(b, *adm.Quota, 10)
		b = append(b, ";w=2592000"...)
	}
	policy := len(b)
	reset := int64((adm.RateReset + time.Second - 1) / time.Second)
	b = append(b, `"minute";r=`...)
	b = strconv.AppendInt(b, int64(max(adm.RateRemaining, 0)), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, max(reset, 0), 10)
	s := string(b)
	ctx.SetHeader("RateLimit-Policy", s[:policy])
	ctx.SetHeader("RateLimit", s[policy:])
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
