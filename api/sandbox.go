package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/webhook"
)

// Sandbox keys (msk_test_…) are served by a server of their own: the same
// operations, paths and shapes, over the sandbox's database, which a
// worker fills from the synthetic feed. SandboxRouter sends each request
// to the live or the sandbox server by its key's prefix; each server then
// refuses the other kind of key. Neither server holds a handle on the
// other's market data, so a live key cannot reach sandbox data, nor a
// sandbox key live data, whatever an operation does.

// SandboxStore is what a sandbox server reads: market data and analytics
// from the sandbox's database, the client's webhooks from the service's
// (they are the client's configuration, not market data).
type SandboxStore struct {
	MarketData
	AnalyticsData
	WebhookData
	AlertData
}

// SandboxPusher is what a sandbox server writes (store.SandboxPusher): it
// stores sandbox pushes (in the service's database for the webhook
// fan-out, in the sandbox's stream log for the sandbox's streams; that
// commit wakes every replica's sandbox hub, Postgres NOTIFY) and reads the
// client's monthly count for GET /usage (a sandbox request is not counted,
// so the gate does not know it).
type SandboxPusher interface {
	InsertSandboxVerdictEvent(ctx context.Context, clientID string, m domain.Market, symbol, oldVerdict, newVerdict string, score int) (domain.VerdictChange, error)
	UsedThisMonth(ctx context.Context, clientID string, now time.Time) (int64, error)
}

// usedThisMonth is the used_this_month of GET /usage: the gate's count,
// which includes the request, or for a sandbox key (never counted) the
// ledger as it stands.
func (s *Server) usedThisMonth(ctx context.Context, p *principal) (int64, error) {
	if !p.Key.Sandbox() || s.cfg.SandboxPusher == nil {
		return p.Used, nil
	}
	return s.cfg.SandboxPusher.UsedThisMonth(ctx, p.Client.ID, s.cfg.Now())
}

// SandboxRouter serves sandbox keys with sandbox (nil: 503, the sandbox is
// not set up) and every other request with live.
func SandboxRouter(live, sandbox *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header["X-Api-Key"]; len(v) > 0 && strings.HasPrefix(v[0], domain.SandboxKeyPrefix) {
			if sandbox == nil {
				w.Header().Set("Retry-After", "60")
				writeProblem(w, newProblem(http.StatusServiceUnavailable, "the sandbox is not set up on this deployment; use a live key or ask your contact"))
				return
			}
			sandbox.Handler().ServeHTTP(w, r)
			return
		}
		live.Handler().ServeHTTP(w, r)
	})
}

// SandboxPush is the body of POST /sandbox/verdict-change.
type SandboxPush struct {
	Market       domain.Market      `json:"market" doc:"Market of the event; must be in your tier" example:"crypto"`
	Symbol       string             `json:"symbol" maxLength:"40" doc:"Symbol of the event, in any accepted form (BTC_USDT, BTC/USDT)" example:"BTC_USDT"`
	NewVerdict   analytics.Verdict  `json:"new_verdict" example:"growth"`
	OldVerdict   *analytics.Verdict `json:"old_verdict,omitempty" required:"false" doc:"Default: the sandbox's current verdict of the symbol when it differs from new_verdict, else neutral (growth when new_verdict is neutral)" example:"neutral"`
	OverallScore *int               `json:"overall_score,omitempty" required:"false" minimum:"-100" maximum:"100" doc:"Default: 35 for growth, -35 for decline, 0 for neutral" example:"35"`
}

type sandboxPushInput struct {
	Body SandboxPush
}

type sandboxPushOutput struct {
	Status int
	Body   StreamVerdictChanged
}

func (s *Server) registerSandbox() {
	register(s, huma.Operation{
		OperationID:   "post-sandbox-verdict-change",
		Summary:       "Sandbox: push a verdict_changed event to your own webhooks and streams",
		DefaultStatus: http.StatusAccepted,
		Description: "Sandbox keys (`msk_test_…`) only; a live key gets 403. Pushes a `verdict_changed` event, marked " +
			"`\"sandbox\": true`, through the real fan-out: every active webhook subscription of your organisation whose " +
			"market matches receives a signed delivery (within the dispatcher's period, 5 s by default), and your " +
			"sandbox keys' streams (GET /stream) receive it at once. No other client sees it. The answer is the event " +
			"as delivered. Like every sandbox request it counts against the rate limit, never against the monthly quota.",
		Tags:   []string{tagSandbox},
		Errors: errorResponses(http.StatusServiceUnavailable),
	}, s.postSandboxPush)
}

func (s *Server) postSandboxPush(ctx context.Context, in *sandboxPushInput) (*sandboxPushOutput, error) {
	p := principalFrom(ctx)
	if !s.cfg.Sandbox || !p.Key.Sandbox() {
		return nil, huma.Error403Forbidden("only sandbox keys (msk_test_…) may push sandbox events; ask your contact for one")
	}
	b := in.Body
	m, ok := domain.ParseMarket(string(b.Market))
	if !ok {
		return nil, s.problem(ctx, domain.Invalid("body.market", b.Market, "must be one of crypto, forex, stocks"))
	}
	sym, ok := domain.NormalizeSymbol(m, b.Symbol)
	if !ok {
		return nil, s.problem(ctx, domain.Invalid("body.symbol", b.Symbol, "not a %s symbol", m))
	}
	newV, ok := analytics.ParseVerdict(string(b.NewVerdict))
	if !ok {
		return nil, s.problem(ctx, domain.Invalid("body.new_verdict", b.NewVerdict, "must be one of growth, decline, neutral"))
	}
	var oldV analytics.Verdict
	if b.OldVerdict != nil {
		if oldV, ok = analytics.ParseVerdict(string(*b.OldVerdict)); !ok {
			return nil, s.problem(ctx, domain.Invalid("body.old_verdict", *b.OldVerdict, "must be one of growth, decline, neutral"))
		}
		if oldV == newV {
			return nil, s.problem(ctx, domain.Invalid("body.old_verdict", *b.OldVerdict, "must differ from new_verdict"))
		}
	}
	score := map[analytics.Verdict]int{analytics.VerdictGrowth: 35, analytics.VerdictDecline: -35}[newV]
	if b.OverallScore != nil {
		if *b.OverallScore < -100 || *b.OverallScore > 100 {
			return nil, s.problem(ctx, domain.Invalid("body.overall_score", *b.OverallScore, "must be within -100..100"))
		}
		score = *b.OverallScore
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	if s.cfg.SandboxPusher == nil {
		return nil, huma.Error503ServiceUnavailable("sandbox pushes are not available on this server")
	}
	if b.OldVerdict == nil {
		oldV = analytics.VerdictNeutral
		if newV == analytics.VerdictNeutral {
			oldV = analytics.VerdictGrowth
		}
		if rec, err := s.analytics.AnalyticsReport(ctx, m, sym, analytics.DefaultStyle); err == nil && rec.Verdict != newV {
			oldV = rec.Verdict
		}
	}
	v, err := s.cfg.SandboxPusher.InsertSandboxVerdictEvent(ctx, p.Client.ID, m, sym, string(oldV), string(newV), score)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &sandboxPushOutput{Status: http.StatusAccepted, Body: StreamVerdictChanged{ID: webhook.EventID(v.EventID),
		Event: domain.EventVerdictChanged, Market: m, Symbol: sym, OldVerdict: oldV, NewVerdict: newV,
		OverallScore: score, Timestamp: v.At.Format(time.RFC3339), ModelVersion: v.ModelVersion, Sandbox: true}}, nil
}
