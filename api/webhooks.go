package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
)

// WebhookData is what the webhook operations read and write.
type WebhookData interface {
	CreateWebhook(ctx context.Context, box *domain.SecretBox, clientID, callbackURL string, market *domain.Market) (domain.Webhook, string, error)
	Webhooks(ctx context.Context, clientID string) ([]domain.Webhook, error)
	DeleteWebhook(ctx context.Context, clientID, id string) error
}

// Subscription is a webhook subscription as listed.
type Subscription struct {
	ID                  string     `json:"id" format:"uuid" doc:"Identifier, used in DELETE /webhooks/{id}" example:"5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"`
	CallbackURL         string     `json:"callback_url" doc:"Where verdict_changed events are POSTed" example:"https://hooks.example.com/market"`
	Market              *string    `json:"market" nullable:"true" enum:"crypto,forex,stocks" doc:"Market of the events; null means every market your tier allows at delivery time" example:"crypto"`
	Status              string     `json:"status" enum:"active,disabled" doc:"disabled after 10 consecutive failed deliveries; ask support to re-enable" example:"active"`
	ConsecutiveFailures int        `json:"consecutive_failures" doc:"Failed deliveries since the last success" example:"0"`
	LastDeliveryAt      *time.Time `json:"last_delivery_at" nullable:"true" doc:"Last delivery attempt (RFC 3339 UTC)"`
	LastError           *string    `json:"last_error" nullable:"true" doc:"What went wrong with the last failed delivery"`
	CreatedAt           time.Time  `json:"created_at" example:"2026-11-22T10:15:00Z"`
}

// NewSubscription is the creation response: the subscription and its
// signing secret, shown this once.
type NewSubscription struct {
	Subscription
	Secret string `json:"secret" doc:"HMAC-SHA256 key of X-Webhook-Signature. Shown only in this response: store it now" example:"whsec_3q2-7wEXAMPLEexampleEXAMPLEexampleEXAMPLEexa"`
}

type createWebhookInput struct {
	Body struct {
		CallbackURL string `json:"callback_url" maxLength:"2048" doc:"https:// URL of your endpoint; private and internal addresses are refused" example:"https://hooks.example.com/market"`
		Market      string `json:"market,omitempty" enum:"crypto,forex,stocks" doc:"Only this market's events; omitted means every market your tier allows"`
	}
}

type createWebhookOutput struct{ Body NewSubscription }

type listWebhooksOutput struct{ Body []Subscription }

type deleteWebhookInput struct {
	ID string `path:"id" maxLength:"64" doc:"Subscription id"`
}

func subscription(w domain.Webhook) Subscription {
	s := Subscription{ID: w.ID, CallbackURL: w.CallbackURL, Status: w.Status, ConsecutiveFailures: w.ConsecutiveFailures,
		LastDeliveryAt: w.LastDeliveryAt, CreatedAt: w.CreatedAt}
	if w.Market != nil {
		m := string(*w.Market)
		s.Market = &m
	}
	if w.LastError != "" {
		e := w.LastError
		s.LastError = &e
	}
	return s
}

func (s *Server) registerWebhooks() {
	tags := []string{"Webhooks"}
	huma.Register(s.humaAPI, huma.Operation{
		OperationID: "create-webhook", Method: http.MethodPost, Path: "/webhooks", DefaultStatus: http.StatusCreated,
		Summary: "Subscribe to verdict changes",
		Description: "Creates a subscription: every `verdict_changed` event of the market (or of every market of your tier) is POSTed to `callback_url` " +
			"with `X-Webhook-Signature` (lower-case hex HMAC-SHA256 of the exact body under `secret`), `X-Webhook-Id` (the event id, the same on every retry) and `X-Webhook-Timestamp` (unix seconds). " +
			"A 2xx answer within 10 s is a success; anything else (including a redirect) is retried after 10 s, 30 s, 1 min, 5 min, 15 min and then hourly. " +
			"10 consecutive failures disable the subscription. At most 10 subscriptions per client (409 beyond).",
		Tags: tags, Errors: errorResponses(http.StatusConflict),
	}, s.createWebhook)
	huma.Register(s.humaAPI, huma.Operation{
		OperationID: "list-webhooks", Method: http.MethodGet, Path: "/webhooks",
		Summary: "Your webhook subscriptions", Description: "Every subscription of your organisation, oldest first, without secrets.",
		Tags: tags, Errors: errorResponses(),
	}, s.listWebhooks)
	huma.Register(s.humaAPI, huma.Operation{
		OperationID: "delete-webhook", Method: http.MethodDelete, Path: "/webhooks/{id}", DefaultStatus: http.StatusNoContent,
		Summary: "Cancel a subscription", Description: "Deletes the subscription and its pending deliveries. 404 for an unknown id.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
	}, s.deleteWebhook)
}

func (s *Server) createWebhook(ctx context.Context, in *createWebhookInput) (*createWebhookOutput, error) {
	if _, err := domain.ValidateCallbackURL(in.Body.CallbackURL, s.cfg.WebhookAllowPrivate); err != nil {
		return nil, s.problem(ctx, err)
	}
	var market *domain.Market
	if in.Body.Market != "" {
		m := domain.Market(in.Body.Market)
		if err := requireMarket(ctx, m); err != nil {
			return nil, err
		}
		market = &m
	}
	if s.cfg.SecretBox == nil {
		return nil, s.problem(ctx, domain.Errorf(domain.EUNAVAILABLE, "webhooks are not enabled on this deployment; contact support"))
	}
	p := principalFrom(ctx)
	w, secret, err := s.webhooks.CreateWebhook(ctx, s.cfg.SecretBox, p.Client.ID, in.Body.CallbackURL, market)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &createWebhookOutput{Body: NewSubscription{Subscription: subscription(w), Secret: secret}}, nil
}

func (s *Server) listWebhooks(ctx context.Context, _ *struct{}) (*listWebhooksOutput, error) {
	ws, err := s.webhooks.Webhooks(ctx, principalFrom(ctx).Client.ID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	out := make([]Subscription, len(ws))
	for i, w := range ws {
		out[i] = subscription(w)
	}
	return &listWebhooksOutput{Body: out}, nil
}

func (s *Server) deleteWebhook(ctx context.Context, in *deleteWebhookInput) (*struct{}, error) {
	if err := s.webhooks.DeleteWebhook(ctx, principalFrom(ctx).Client.ID, in.ID); err != nil {
		return nil, s.problem(ctx, err)
	}
	return nil, nil
}
