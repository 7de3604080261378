package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// Message is one signed request: the event id (the same on every retry),
// the body, and the secrets that sign it.
type Message struct {
	ID   string
	Body []byte
	// Secret signs X-Webhook-Signature and the first webhook-signature.
	Secret string
	// PreviousSecret, when set (within a day of a rotation), adds a second
	// webhook-signature.
	PreviousSecret string
}

// Result is the outcome of one attempt.
type Result struct {
	// Err is the zero value on a 2xx answer.
	Err domain.DeliveryError
	// Status is the answer's HTTP status (0 without an answer).
	Status  int
	Latency time.Duration
	// Connected: a TLS connection to the receiver was established and the
	// request went out on it.
	Connected bool
	// spokeTLS: short of a connection, a TLS server answered the
	// handshake (with a certificate it refused, or an alert).
	spokeTLS bool
}

// ForClient is what a test ping may tell the client (POST
// /webhooks/{id}/test): the result itself once a TLS server answered, and
// otherwise one category, domain.ErrUnreachable, without a latency,
// whatever stopped it (no address, refused, filtered, reset, not TLS):
// anyone can subscribe any public host and port, so a finer answer, or
// the time it took, would tell closed ports from filtered and open ones.
// Our own refusals (address_not_allowed, internal_error) say themselves.
func (r Result) ForClient() Result {
	if r.Err.OK() || r.Connected || r.spokeTLS {
		return r
	}
	switch r.Err.Category {
	case domain.ErrAddressRefused, domain.ErrInternal:
		return Result{Err: r.Err}
	}
	return Result{Err: domain.DeliveryError{Category: domain.ErrUnreachable}}
}

// Sender signs and sends messages.
type Sender struct {
	Client *http.Client
	// Now stamps webhook-timestamp and X-Webhook-Timestamp (time.Now if nil).
	Now func() time.Time
}

// Host is the part of a callback URL that logs may carry (never the path
// or the query, where clients put tokens).
func Host(callbackURL string) string {
	u, err := url.Parse(callbackURL)
	if err != nil {
		return "(unparsable)"
	}
	return u.Host
}

// Send POSTs msg to callbackURL and reports the outcome. It gives up after
// Timeout, or earlier when ctx ends.
func (s *Sender) Send(ctx context.Context, callbackURL string, msg Message) Result {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, callbackURL, bytes.NewReader(msg.Body))
	if err != nil {
		return Result{Err: domain.DeliveryError{Category: domain.ErrConnect}}
	}
	headers, err := Sign(msg, now().Unix())
	if err != nil {
		return Result{Err: domain.DeliveryError{Category: domain.ErrInternal}}
	}
	for k, v := range headers {
		req.Header[k] = v
	}
	var connected atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaders: func() { connected.Store(true) },
	}))
	start := time.Now()
	resp, err := s.Client.Do(req)
	if err != nil {
		return Result{Err: classify(err), Latency: time.Since(start), Connected: connected.Load(), spokeTLS: serverSpokeTLS(err)}
	}
	// Only the status counts: a 2xx whose body is cut short still
	// answered, the receiver has the event.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
	resp.Body.Close()
	res := Result{Status: resp.StatusCode, Latency: time.Since(start), Connected: true}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		res.Err = domain.DeliveryError{Category: domain.ErrHTTPStatus, Status: resp.StatusCode}
	}
	return res
}

// Sign returns the headers of a message sent at timestamp (unix seconds):
// the contract's X-Webhook-Signature (hex HMAC-SHA256 of the body, keyed
// with the whole secret string), X-Webhook-Id and X-Webhook-Timestamp, and
// the Standard Webhooks webhook-id, webhook-timestamp and webhook-signature
// ("v1,<base64 HMAC-SHA256 of id.timestamp.body>", keyed with the bytes
// the secret's base64 part encodes; one per valid secret, space-separated).
func Sign(msg Message, timestamp int64) (http.Header, error) {
	key, err := domain.StandardWebhookKey(msg.Secret)
	if err != nil {
		return nil, err
	}
	sigs := []string{domain.SignStandardWebhook(key, msg.ID, timestamp, msg.Body)}
	if msg.PreviousSecret != "" {
		if prev, err := domain.StandardWebhookKey(msg.PreviousSecret); err == nil {
			sigs = append(sigs, domain.SignStandardWebhook(prev, msg.ID, timestamp, msg.Body))
		}
	}
	ts := strconv.FormatInt(timestamp, 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "marketscreener-webhooks/1")
	h.Set("X-Webhook-Signature", domain.SignWebhook(msg.Secret, msg.Body))
	h.Set("X-Webhook-Id", msg.ID)
	h.Set("X-Webhook-Timestamp", ts)
	h.Set("Webhook-Id", msg.ID)
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", strings.Join(sigs, " "))
	return h, nil
}

// VerdictChanged is the body of a verdict_changed delivery: the contract's
// fields and the event id. Its doc tags describe it in the API's OpenAPI
// document (webhooks), from which the clients' types are generated.
type VerdictChanged struct {
	ID           string            `json:"id" doc:"The event id (a decimal string), the same on every attempt: de-duplicate on it" example:"4211"`
	Event        string            `json:"event" doc:"Always verdict_changed" example:"verdict_changed"`
	Market       domain.Market     `json:"market" doc:"The asset's market" example:"crypto"`
	Symbol       string            `json:"symbol" doc:"The asset" example:"BTC_USDT"`
	OldVerdict   analytics.Verdict `json:"old_verdict" doc:"The verdict before the change" example:"neutral"`
	NewVerdict   analytics.Verdict `json:"new_verdict" doc:"The new verdict" example:"growth"`
	OverallScore int               `json:"overall_score" doc:"The overall score that made the new verdict, -100 to 100" example:"27"`
	Timestamp    string            `json:"timestamp" doc:"When the verdict changed (RFC 3339 UTC)" example:"2026-11-22T10:15:00Z"`
	// ModelVersion is the version of the scoring method that made the new
	// verdict (GET /analytics/methodology).
	ModelVersion string `json:"model_version" doc:"The scoring method that made the new verdict (GET /analytics/methodology)" example:"v1"`
	// Sandbox marks an event pushed with a sandbox key (absent otherwise).
	Sandbox bool `json:"sandbox,omitempty" doc:"true on an event pushed with a sandbox key (POST /sandbox/verdict-change); absent otherwise"`
}

// SandboxVerdictBody encodes the body of a sandbox push's delivery: a
// verdict_changed body with "sandbox": true.
func SandboxVerdictBody(id int64, market domain.Market, symbol, oldVerdict, newVerdict string, score int, at time.Time, modelVersion string) []byte {
	b, _ := json.Marshal(VerdictChanged{ID: EventID(id), Event: "verdict_changed", Market: market, Symbol: symbol,
		OldVerdict: analytics.Verdict(oldVerdict), NewVerdict: analytics.Verdict(newVerdict), OverallScore: score, Timestamp: at.UTC().Format(time.RFC3339),
		ModelVersion: modelVersion, Sandbox: true})
	return b
}

// Ping is the body of a test delivery (POST /webhooks/{id}/test).
type Ping struct {
	ID        string `json:"id" doc:"The test delivery's id" example:"ping_5b0d0c5e"`
	Event     string `json:"event" doc:"Always ping" example:"ping"`
	Timestamp string `json:"timestamp" doc:"When it was sent (RFC 3339 UTC)" example:"2026-11-22T10:15:00Z"`
}

// EventID is the id a verdict event carries on the wire (webhook-id,
// X-Webhook-Id, the body's id): its decimal number.
func EventID(id int64) string { return strconv.FormatInt(id, 10) }

// VerdictBody encodes a verdict_changed body.
func VerdictBody(id int64, market domain.Market, symbol, oldVerdict, newVerdict string, score int, at time.Time, modelVersion string) []byte {
	b, _ := json.Marshal(VerdictChanged{ID: EventID(id), Event: "verdict_changed", Market: market, Symbol: symbol,
		OldVerdict: analytics.Verdict(oldVerdict), NewVerdict: analytics.Verdict(newVerdict), OverallScore: score, Timestamp: at.UTC().Format(time.RFC3339),
		ModelVersion: modelVersion})
	return b
}

// AlertTriggered is the body of an alert.triggered delivery, and the data
// of the event stream's alert event: the alert, the asset, the instant of
// the rescoring that made the condition true, and the value of every
// variable the condition read.
type AlertTriggered struct {
	ID        string         `json:"id" doc:"The event id (a decimal string), the same on every attempt and on the event stream: de-duplicate on it" example:"4212"`
	Event     string         `json:"event" doc:"Always alert.triggered" example:"alert.triggered"`
	AlertID   string         `json:"alert_id" format:"uuid" doc:"The alert that fired (GET /alerts/{id})" example:"0b7e5a59-61c4-4a4c-9f0c-2f3c3a0d9e11"`
	AlertName string         `json:"alert_name" doc:"The alert's name" example:"oversold growth"`
	Market    domain.Market  `json:"market" doc:"The asset's market" example:"crypto"`
	Symbol    string         `json:"symbol" doc:"The asset" example:"BTC_USDT"`
	Timestamp string         `json:"timestamp" doc:"The instant of the rescoring that made the condition true (RFC 3339 UTC); a verdict_changed event of the same rescoring carries the same timestamp" example:"2026-11-22T10:15:00Z"`
	Values    map[string]any `json:"values" doc:"The value of every variable the condition read, by its name in the condition (for example swing.verdict)" example:"{\"verdict\":\"growth\",\"overall_score\":27}"`
	// Sandbox marks an event fired by a sandbox push (absent otherwise).
	Sandbox bool `json:"sandbox,omitempty" doc:"true on an event fired by a sandbox push (POST /sandbox/verdict-change); absent otherwise"`
}

// AlertBody encodes an alert.triggered body.
func AlertBody(id int64, alertID, alertName string, market domain.Market, symbol string, at time.Time, values map[string]any, sandbox bool) []byte {
	if values == nil {
		values = map[string]any{}
	}
	b, _ := json.Marshal(AlertTriggered{ID: EventID(id), Event: domain.EventAlertTriggered, AlertID: alertID, AlertName: alertName,
		Market: market, Symbol: symbol, Timestamp: at.UTC().Format(time.RFC3339), Values: values, Sandbox: sandbox})
	return b
}
