package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/webhook"
)

// WebhookData is what the webhook operations read and write. Every call is
// scoped by the calling client's id: another client's subscription is not
// found.
type WebhookData interface {
	CreateWebhook(ctx context.Context, box *domain.SecretBox, clientID, callbackURL string, market *domain.Market) (domain.Webhook, string, error)
	Webhooks(ctx context.Context, clientID string) ([]domain.Webhook, error)
	DeleteWebhook(ctx context.Context, clientID, id string) error
	EnableWebhook(ctx context.Context, clientID, id string) (domain.Webhook, error)
	RotateWebhookSecret(ctx context.Context, box *domain.SecretBox, clientID, id string) (domain.Webhook, string, error)
	WebhookTarget(ctx context.Context, box *domain.SecretBox, clientID, id string) (store.WebhookTarget, error)
	WebhookDeliveries(ctx context.Context, clientID, webhookID string, limit int) ([]domain.WebhookDelivery, error)
	Redeliver(ctx context.Context, clientID, webhookID string, deliveryID int64) (domain.WebhookDelivery, error)
}

const exampleHookID = "5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"

// Subscription is a webhook subscription as listed.
type Subscription struct {
	ID                  string            `json:"id" format:"uuid" doc:"Identifier, used in the /webhooks/{id} paths" example:"5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"`
	CallbackURL         string            `json:"callback_url" doc:"Where verdict_changed events are POSTed" example:"https://hooks.example.com/market"`
	Market              *domain.Market    `json:"market" nullable:"true" doc:"Market of the events; null means every market your tier allows at delivery time" example:"crypto"`
	Status              webhookStatus     `json:"status" doc:"disabled after 10 consecutive failed deliveries (its pending deliveries are dropped); re-enable with POST /webhooks/{id}/enable" example:"active"`
	ConsecutiveFailures int               `json:"consecutive_failures" doc:"Failed delivery attempts since the last success (each attempt counts once)" example:"0"`
	LastDeliveryAt      *time.Time        `json:"last_delivery_at" nullable:"true" doc:"Last delivery attempt, successful or not (RFC 3339 UTC)" example:"2026-11-22T10:16:05Z"`
	LastSuccessAt       *time.Time        `json:"last_success_at" nullable:"true" doc:"Last delivery answered with a 2xx" example:"2026-11-22T10:16:05Z"`
	LastError           *string           `json:"last_error" nullable:"true" doc:"Category of the last failed attempt, with the HTTP status for http_status (for example \"timeout\" or \"http_status 503\")" example:"http_status 503"`
	LastErrorCategory   *deliveryErrorCat `json:"last_error_category" nullable:"true" doc:"Category of the last failed attempt" example:"http_status"`
	LastErrorStatus     *int              `json:"last_error_status" nullable:"true" doc:"HTTP status of the last failed attempt when its category is http_status" example:"503"`
	LastErrorAt         *time.Time        `json:"last_error_at" nullable:"true" doc:"When the last attempt failed" example:"2026-11-22T09:58:00Z"`
	PreviousSecretUntil *time.Time        `json:"previous_secret_valid_until" nullable:"true" doc:"After a secret rotation: until when deliveries also carry a signature with the previous secret" example:"2026-11-23T10:15:00Z"`
	CreatedAt           time.Time         `json:"created_at" example:"2026-11-22T10:15:00Z"`
}

// NewSubscription is the creation response: the subscription and its
// signing secret, shown this once.
type NewSubscription struct {
	Subscription
	Secret string `json:"secret" doc:"Signing secret (Standard Webhooks form: whsec_ + base64 of 32 bytes). Shown only in this response: store it now" example:"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw8n9/0I9yK9Q="`
}

type createWebhookInput struct {
	Body struct {
		CallbackURL string        `json:"callback_url" maxLength:"2048" doc:"https:// URL of your endpoint, on port 443 (the default) or 1024-65535; private and internal addresses are refused" example:"https://hooks.example.com/market"`
		Market      domain.Market `json:"market,omitempty" doc:"Only this market's events; omitted means every market your tier allows" example:"crypto"`
	}
}

// noStore keeps webhook answers (secrets among them) out of caches.
const noStore = "no-store"

type createWebhookOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         NewSubscription
}

type listWebhooksOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         []Subscription
}

type webhookOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         Subscription
}

type webhookIDInput struct {
	ID string `path:"id" format:"uuid" doc:"Subscription id" example:"5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"`
}

// Delivery is one entry of a subscription's delivery log.
type Delivery struct {
	ID             int64             `json:"id" doc:"Delivery id, used in POST /webhooks/{id}/deliveries/{delivery_id}/redeliver" example:"1842"`
	EventID        string            `json:"event_id" doc:"Event id: the body's id and the webhook-id / X-Webhook-Id header, the same on every attempt" example:"90211"`
	Event          deliveryEventName `json:"event" doc:"The event's kind: verdict_changed or alert.triggered" example:"verdict_changed"`
	Market         domain.Market     `json:"market" example:"crypto"`
	Symbol         string            `json:"symbol" example:"BTC_USDT"`
	Attempt        int               `json:"attempt" doc:"Attempts made so far (a redelivery goes on counting)" example:"2"`
	State          deliveryState     `json:"state" doc:"pending: waiting for its next attempt; delivered: answered 2xx; dropped: will not be sent (see drop_reason)" example:"delivered"`
	ResponseStatus *int              `json:"response_status" nullable:"true" doc:"HTTP status of the last answer; null when there was none" example:"200"`
	ErrorCategory  *deliveryErrorCat `json:"error_category" nullable:"true" doc:"Why the last attempt failed; null when it succeeded or none was made" example:"timeout"`
	LatencyMS      *int              `json:"latency_ms" nullable:"true" doc:"Duration of the last attempt in milliseconds" example:"184"`
	LastAttemptAt  *time.Time        `json:"last_attempt_at" nullable:"true" example:"2026-11-22T10:16:05Z"`
	NextAttemptAt  *time.Time        `json:"next_attempt_at" nullable:"true" doc:"When a pending delivery is tried next" example:"2026-11-22T10:16:35Z"`
	DeliveredAt    *time.Time        `json:"delivered_at" nullable:"true" example:"2026-11-22T10:16:05Z"`
	DropReason     *dropReason       `json:"drop_reason" nullable:"true" doc:"Why a dropped delivery will not be sent" example:"subscription_disabled"`
	CreatedAt      time.Time         `json:"created_at" doc:"When the event was queued for this subscription" example:"2026-11-22T10:16:04Z"`
}

type deliveriesInput struct {
	ID    string `path:"id" format:"uuid" doc:"Subscription id" example:"5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"`
	Limit int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"How many deliveries, newest first (1..100)" example:"20"`
}

type deliveriesOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         []Delivery
}

type redeliverInput struct {
	ID         string `path:"id" format:"uuid" doc:"Subscription id" example:"5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"`
	DeliveryID int64  `path:"delivery_id" minimum:"1" doc:"Delivery id from GET /webhooks/{id}/deliveries" example:"1842"`
}

type deliveryOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         Delivery
}

// TestResult is the outcome of a test ping.
type TestResult struct {
	EventID        string        `json:"event_id" doc:"The ping's id (body id and webhook-id header)" example:"ping_6f1d0c3b9a2e4f58"`
	Delivered      bool          `json:"delivered" doc:"Whether your endpoint answered 2xx within 10 s" example:"true"`
	ResponseStatus *int          `json:"response_status" nullable:"true" doc:"HTTP status of the answer; null when there was none" example:"200"`
	ErrorCategory  *pingErrorCat `json:"error_category" nullable:"true" doc:"Why it failed; null on success. unreachable: no TLS server answered (no address, refused, filtered, reset, not TLS), one category for all so that a ping cannot scan ports; address_not_allowed: the host resolves only to internal addresses, or the port is not allowed" example:"tls_error"`
	LatencyMS      *int          `json:"latency_ms" nullable:"true" doc:"Duration of the attempt in milliseconds; null when no TLS server answered" example:"143"`
}

type testOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         TestResult
}

// RotatedSecret is the answer of a secret rotation.
type RotatedSecret struct {
	ID                  string    `json:"id" format:"uuid" example:"5f0c6c1e-8a8e-4d5c-9a55-6e1f3f0b2a7d"`
	Secret              string    `json:"secret" doc:"The new signing secret. Shown only in this response: store it now" example:"whsec_T0p8rUeE3cAKXw1mV7p0c3dX1h2s5Yc0eY2v6b9n8Q4="`
	PreviousSecretUntil time.Time `json:"previous_secret_valid_until" doc:"Until then every delivery carries a second webhook-signature made with the previous secret; X-Webhook-Signature uses the new secret at once" example:"2026-11-23T10:15:00Z"`
}

type rotateOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         RotatedSecret
}

func subscription(w domain.Webhook) Subscription {
	s := Subscription{ID: w.ID, CallbackURL: w.CallbackURL, Status: webhookStatus(w.Status), ConsecutiveFailures: w.ConsecutiveFailures,
		LastDeliveryAt: w.LastDeliveryAt, LastSuccessAt: w.LastSuccessAt, LastErrorAt: w.LastErrorAt,
		PreviousSecretUntil: w.PreviousSecretUntil, CreatedAt: w.CreatedAt}
	if w.Market != nil {
		m := *w.Market
		s.Market = &m
	}
	if !w.LastError.OK() {
		text, category := w.LastError.String(), deliveryErrorCat(w.LastError.Category)
		s.LastError, s.LastErrorCategory = &text, &category
		if w.LastError.Status != 0 {
			st := w.LastError.Status
			s.LastErrorStatus = &st
		}
	}
	return s
}

func delivery(d domain.WebhookDelivery) Delivery {
	out := Delivery{ID: d.ID, EventID: webhook.EventID(d.EventID), Event: deliveryEventName(d.Event), Market: d.Market, Symbol: d.Symbol,
		Attempt: d.Attempts, State: deliveryState(d.Status), ResponseStatus: d.ResponseStatus, LatencyMS: d.LatencyMS,
		LastAttemptAt: d.LastAttemptAt, NextAttemptAt: d.NextAttemptAt, DeliveredAt: d.DeliveredAt, CreatedAt: d.CreatedAt}
	if !d.LastError.OK() {
		c := deliveryErrorCat(d.LastError.Category)
		out.ErrorCategory = &c
	}
	if d.DropReason != "" {
		r := dropReason(d.DropReason)
		out.DropReason = &r
	}
	return out
}

const webhookHeaders = "`X-Webhook-Signature` (lower-case hex HMAC-SHA256 of the exact body, keyed with the whole secret string), " +
	"`X-Webhook-Id` (the event id, the same on every retry) and `X-Webhook-Timestamp` (unix seconds), and the Standard Webhooks headers " +
	"`webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the bytes the " +
	"secret's base64 part encodes), which the Standard Webhooks libraries verify, rejecting replays older than 5 minutes."

func (s *Server) registerWebhooks() {
	tags := []string{tagWebhooks}
	register(s, huma.Operation{
		OperationID: "create-webhook", DefaultStatus: http.StatusCreated,
		Summary: "Subscribe to verdict changes",
		Description: "Creates a subscription: every `verdict_changed` event of the market (or of every market of your tier) is POSTed to `callback_url` " +
			"as `{id, event, market, symbol, old_verdict, new_verdict, overall_score, timestamp, model_version}` with " + webhookHeaders + " " +
			"(`model_version`: the scoring method that made the new verdict, see GET /analytics/methodology). " +
			"A 2xx answer within 10 s is a success; anything else (including a redirect) is retried after 10 s, 30 s, 1 min, 5 min, 15 min and then hourly. " +
			"One delivery per subscription is in flight at a time, in event order. " +
			"10 consecutive failed attempts disable the subscription. At most 10 subscriptions per client (409 beyond).",
		Tags: tags, Errors: errorResponses(http.StatusConflict),
	}, s.createWebhook)
	register(s, huma.Operation{
		OperationID: "list-webhooks",
		Summary:     "Your webhook subscriptions",
		Description: "Every subscription of your organisation, oldest first, without secrets: status, consecutive failures, " +
			"last attempt, last success and the category of the last error.",
		Tags: tags, Errors: errorResponses(),
	}, s.listWebhooks)
	register(s, huma.Operation{
		OperationID: "delete-webhook", DefaultStatus: http.StatusNoContent,
		Summary: "Cancel a subscription", Description: "Deletes the subscription and its pending deliveries. 404 for an unknown id.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
	}, s.deleteWebhook)
	register(s, huma.Operation{
		OperationID: "list-webhook-deliveries",
		Summary:     "Delivery log of a subscription",
		Description: "The subscription's deliveries, newest first: event, attempts, state, the last answer's HTTP status or the error's category, " +
			"latency, and the next attempt of a pending one. Errors are categories only (`dns_failure`, `address_not_allowed`, `connect_failed`, " +
			"`tls_error`, `timeout`, `http_status` with `response_status`, `invalid_response`, `internal_error`).",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
	}, s.listDeliveries)
	register(s, huma.Operation{
		OperationID:   "redeliver-webhook",
		DefaultStatus: http.StatusAccepted,
		Summary:       "Send a delivery again",
		Description: "Queues the delivery again, due now (a pending one is made due now); it keeps its event id, so a receiver that de-duplicates " +
			"on it sees the same event. It goes out in event order with the subscription's other pending deliveries, within a few seconds. " +
			"409 when the subscription is disabled (enable it first); 403 when the event's market has left your tier.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound, http.StatusConflict),
	}, s.redeliver)
	register(s, huma.Operation{
		OperationID: "test-webhook",
		Summary:     "Send a test ping now",
		Description: "Sends `{id, event: \"ping\", timestamp}` to the callback URL now, signed and sent exactly like a delivery (same headers, " +
			"same client and address checks; works on a disabled subscription too), and answers the outcome within 15 s: " +
			"HTTP status, latency, or the error's category. A ping does not count towards the consecutive failures and is not in the delivery log. " +
			"Every failure before a TLS server answers is `unreachable`, without a latency, answered 10 s after the ping started: a ping " +
			"tells an HTTPS receiver's answer, never whether a port is closed, filtered or open.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
	}, s.testWebhook)
	register(s, huma.Operation{
		OperationID: "enable-webhook",
		Summary:     "Re-enable a subscription",
		Description: "Makes a disabled subscription active again and resets its consecutive failures. Deliveries dropped when it was disabled " +
			"stay dropped (redeliver them one by one); new events reach it again.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
	}, s.enableWebhook)
	register(s, huma.Operation{
		OperationID: "rotate-webhook-secret",
		Summary:     "Rotate the signing secret",
		Description: "Issues a new secret, shown only in this response. For 24 h every delivery carries two Standard Webhooks signatures " +
			"(`webhook-signature: v1,<new> v1,<previous>`), so receivers can switch without losing a delivery; `X-Webhook-Signature` " +
			"uses the new secret at once. Rotating again within the 24 h retires the older secret at once.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
	}, s.rotateSecret)
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
	box, err := s.secretBox(ctx)
	if err != nil {
		return nil, err
	}
	w, secret, err := s.webhooks.CreateWebhook(ctx, box, principalFrom(ctx).Client.ID, in.Body.CallbackURL, market)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &createWebhookOutput{CacheControl: noStore, Body: NewSubscription{Subscription: subscription(w), Secret: secret}}, nil
}

func (s *Server) secretBox(ctx context.Context) (*domain.SecretBox, error) {
	if s.cfg.SecretBox == nil {
		return nil, s.problem(ctx, domain.Errorf(domain.EUNAVAILABLE, "webhooks are not enabled on this deployment; contact support"))
	}
	return s.cfg.SecretBox, nil
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
	return &listWebhooksOutput{CacheControl: noStore, Body: out}, nil
}

func (s *Server) deleteWebhook(ctx context.Context, in *webhookIDInput) (*struct{}, error) {
	if err := s.webhooks.DeleteWebhook(ctx, principalFrom(ctx).Client.ID, in.ID); err != nil {
		return nil, s.problem(ctx, err)
	}
	return nil, nil
}

func (s *Server) listDeliveries(ctx context.Context, in *deliveriesInput) (*deliveriesOutput, error) {
	ds, err := s.webhooks.WebhookDeliveries(ctx, principalFrom(ctx).Client.ID, in.ID, in.Limit)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	out := make([]Delivery, len(ds))
	for i, d := range ds {
		out[i] = delivery(d)
	}
	return &deliveriesOutput{CacheControl: noStore, Body: out}, nil
}

func (s *Server) redeliver(ctx context.Context, in *redeliverInput) (*deliveryOutput, error) {
	d, err := s.webhooks.Redeliver(ctx, principalFrom(ctx).Client.ID, in.ID, in.DeliveryID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &deliveryOutput{CacheControl: noStore, Body: delivery(d)}, nil
}

func (s *Server) enableWebhook(ctx context.Context, in *webhookIDInput) (*webhookOutput, error) {
	w, err := s.webhooks.EnableWebhook(ctx, principalFrom(ctx).Client.ID, in.ID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &webhookOutput{CacheControl: noStore, Body: subscription(w)}, nil
}

func (s *Server) rotateSecret(ctx context.Context, in *webhookIDInput) (*rotateOutput, error) {
	box, err := s.secretBox(ctx)
	if err != nil {
		return nil, err
	}
	w, secret, err := s.webhooks.RotateWebhookSecret(ctx, box, principalFrom(ctx).Client.ID, in.ID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	out := RotatedSecret{ID: w.ID, Secret: secret}
	if w.PreviousSecretUntil != nil {
		out.PreviousSecretUntil = *w.PreviousSecretUntil
	}
	return &rotateOutput{CacheControl: noStore, Body: out}, nil
}

// testWebhook sends a ping from this process, through the same client and
// signer as the worker's deliveries. The api makes no other outbound call;
// this one is synchronous by contract (the outcome within 15 s), which a
// queued ping could not promise behind a busy queue or a stopped worker.
func (s *Server) testWebhook(ctx context.Context, in *webhookIDInput) (*testOutput, error) {
	box, err := s.secretBox(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.webhooks.WebhookTarget(ctx, box, principalFrom(ctx).Client.ID, in.ID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := "ping_" + hex.EncodeToString(b[:])
	body, _ := json.Marshal(webhook.Ping{ID: id, Event: "ping", Timestamp: s.cfg.Now().UTC().Format(time.RFC3339)})
	sender := webhook.Sender{Client: s.webhookClient, Now: s.cfg.Now}
	start := time.Now()
	full := sender.Send(ctx, t.Webhook.CallbackURL, webhook.Message{ID: id, Body: body, Secret: t.Secret, PreviousSecret: t.PreviousSecret})
	s.cfg.Logger.Info("webhook test ping", "request_id", infoFrom(ctx).ID, "webhook_id", t.Webhook.ID,
		"host", webhook.Host(t.Webhook.CallbackURL), "outcome", outcomeText(full), "latency_ms", full.Latency.Milliseconds())
	res := full.ForClient()
	if res.Err.Category == domain.ErrUnreachable {
		// Every unreachable ping answers at the same moment, whatever
		// stopped it (WebhookPingFloor).
		wait := time.NewTimer(time.Until(start.Add(s.cfg.WebhookPingFloor)))
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
		}
	}
	out := TestResult{EventID: id, Delivered: res.Err.OK()}
	if res.Latency > 0 {
		ms := int(res.Latency.Milliseconds())
		out.LatencyMS = &ms
	}
	if res.Status != 0 {
		st := res.Status
		out.ResponseStatus = &st
	}
	if !res.Err.OK() {
		c := pingErrorCat(res.Err.Category)
		out.ErrorCategory = &c
	}
	return &testOutput{CacheControl: noStore, Body: out}, nil
}

func outcomeText(r webhook.Result) string {
	if r.Err.OK() {
		return "delivered"
	}
	return r.Err.String()
}

// documentWebhookPayloads describes what a subscription's callback
// receives in the document's webhooks (OpenAPI 3.1): the verdict_changed
// delivery and the test ping, their bodies and signature headers, so a
// generated client has their types.
func (s *Server) documentWebhookPayloads() {
	oa := s.humaAPI.OpenAPI()
	reg := oa.Components.Schemas
	str := &huma.Schema{Type: "string"}
	headers := []*huma.Param{
		{Name: "webhook-id", In: "header", Required: true, Schema: str, Description: "Standard Webhooks: the message id (the event id, the same on every attempt)"},
		{Name: "webhook-timestamp", In: "header", Required: true, Schema: str, Description: "Standard Webhooks: unix seconds of this attempt"},
		{Name: "webhook-signature", In: "header", Required: true, Schema: str, Description: "Standard Webhooks: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the bytes the secret's base64 part encodes; during a rotation's grace period a second signature follows, space-separated"},
		{Name: "X-Webhook-Id", In: "header", Required: true, Schema: str, Description: "The event id, as in the body"},
		{Name: "X-Webhook-Timestamp", In: "header", Required: true, Schema: str, Description: "Unix seconds of this attempt"},
		{Name: "X-Webhook-Signature", In: "header", Required: true, Schema: str, Description: "Lower-case hex HMAC-SHA256 of the exact body, keyed with the whole secret string"},
	}
	received := map[string]*huma.Response{
		"200": {Description: "Received. Any 2xx within 10 s is a success; anything else, a redirect included, is retried (a ping is not)"},
	}
	// The schemas are named after the types: VerdictChanged, Ping.
	payload := func(v any) *huma.RequestBody {
		return &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"application/json": {Schema: reg.Schema(reflect.TypeOf(v), true, "")},
		}}
	}
	noKey := []map[string][]string{} // the callback is called by us, with no API key
	oa.Webhooks = map[string]*huma.PathItem{
		"verdict_changed": {Post: &huma.Operation{
			OperationID: "verdict-changed", Tags: []string{tagWebhooks}, Security: noKey,
			Summary:     "A verdict changed (sent to your callback_url)",
			Description: "POSTed to the `callback_url` of each subscription of the market when an asset's verdict in the default style changes. " + webhookHeaders,
			Parameters:  headers, RequestBody: payload(webhook.VerdictChanged{}), Responses: received,
		}},
		"ping": {Post: &huma.Operation{
			OperationID: "webhook-ping", Tags: []string{tagWebhooks}, Security: noKey,
			Summary:     "A test delivery (sent to your callback_url)",
			Description: "POSTed once by `POST /webhooks/{id}/test`, signed like an event, to check an endpoint; it is not retried.",
			Parameters:  headers, RequestBody: payload(webhook.Ping{}), Responses: received,
		}},
	}
}
