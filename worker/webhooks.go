package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// TypeWebhookDispatch fans verdict events out to subscriptions and sends
// the deliveries that are due.
const TypeWebhookDispatch = "webhooks:dispatch"

// Delivery limits (DESIGN §3).
const (
	deliveryTimeout  = 10 * time.Second
	maxResponseBytes = 64 << 10
	deliveryLease    = 2 * deliveryTimeout // a delivery is claimed this long
	parallelSends    = 16
	claimBatch       = 100
)

// NewWebhookDispatchTask builds the dispatch task of one scheduler tick.
func NewWebhookDispatchTask(tick time.Time) *asynq.Task {
	return newTask(TypeWebhookDispatch, struct {
		Tick time.Time `json:"tick"`
	}{tick.UTC()})
}

// WebhookStore is what the dispatcher reads and writes.
type WebhookStore interface {
	FanOut(ctx context.Context, limit int) (int, error)
	ClaimDeliveries(ctx context.Context, box *domain.SecretBox, limit int, lease time.Duration) ([]store.Delivery, error)
	RecordDelivery(ctx context.Context, d store.Delivery, errMsg string, retryAt time.Time) (bool, error)
}

// WebhookPayload is the body of a verdict_changed delivery.
type WebhookPayload struct {
	Event        string `json:"event"`
	Market       string `json:"market"`
	Symbol       string `json:"symbol"`
	OldVerdict   string `json:"old_verdict"`
	NewVerdict   string `json:"new_verdict"`
	OverallScore int    `json:"overall_score"`
	Timestamp    string `json:"timestamp"`
}

// Dispatcher delivers webhooks. Postgres is the queue: the fan-out turns
// outbox events into deliveries in one transaction, deliveries are claimed
// with a lease (so two workers never send one at once, and a dead worker's
// claims come back), and every outcome is recorded before the next
// attempt. The asynq task only says "now"; if Redis loses it, the next
// tick sends what is due.
type Dispatcher struct {
	Store  WebhookStore
	Box    *domain.SecretBox
	Client *http.Client
	Logger *slog.Logger
	Now    func() time.Time
	// Backoff is the wait before attempt n+1 after n failures (default
	// RetryBackoff).
	Backoff func(failures int) time.Duration
}

// RetryBackoff is the retry schedule of a failed delivery: 10 s, 30 s,
// 1 min, 5 min, 15 min, then every hour, until it succeeds or the
// subscription is disabled.
func RetryBackoff(failures int) time.Duration {
	steps := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute}
	if failures-1 < len(steps) {
		return steps[max(failures-1, 0)]
	}
	return time.Hour
}

// Register adds the dispatch handler to a worker.
func (d *Dispatcher) Register(w *Worker) {
	w.Handle(TypeWebhookDispatch, asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		_, err := d.Dispatch(ctx)
		return err
	}))
}

// Dispatch fans out every new event and sends every due delivery, in
// batches, and returns how many deliveries it attempted.
func (d *Dispatcher) Dispatch(ctx context.Context) (int, error) {
	for {
		n, err := d.Store.FanOut(ctx, 500)
		if err != nil {
			return 0, err
		}
		if n < 500 {
			break
		}
	}
	sent := 0
	for {
		batch, err := d.Store.ClaimDeliveries(ctx, d.Box, claimBatch, deliveryLease)
		if err != nil {
			return sent, err
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, parallelSends)
		errs := make(chan error, len(batch))
		for _, dl := range batch {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errs <- d.deliver(ctx, dl)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return sent, err
			}
		}
		sent += len(batch)
		if len(batch) < claimBatch {
			return sent, nil
		}
	}
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// deliver sends one delivery and records the outcome; only a failure to
// record is returned (a failed send is an outcome).
func (d *Dispatcher) deliver(ctx context.Context, dl store.Delivery) error {
	body, err := json.Marshal(WebhookPayload{Event: "verdict_changed", Market: string(dl.Event.Market), Symbol: dl.Event.Symbol,
		OldVerdict: string(dl.Event.OldVerdict), NewVerdict: string(dl.Event.NewVerdict), OverallScore: dl.Event.OverallScore,
		Timestamp: dl.Event.At.UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	errMsg := d.send(ctx, dl, body)
	backoff := d.Backoff
	if backoff == nil {
		backoff = RetryBackoff
	}
	disabled, err := d.Store.RecordDelivery(context.WithoutCancel(ctx), dl, errMsg, d.Now().Add(backoff(dl.Attempt)))
	if err != nil {
		return err
	}
	// The URL may carry a client's token in its path: log the id only.
	switch {
	case disabled:
		d.logger().Warn("webhook disabled after repeated failures", "webhook_id", dl.WebhookID, "err", errMsg)
	case errMsg != "":
		d.logger().Info("webhook delivery failed", "webhook_id", dl.WebhookID, "event_id", dl.EventID, "attempt", dl.Attempt, "err", errMsg)
	}
	return nil
}

// send POSTs body and returns "" on a 2xx answer, else what went wrong.
func (d *Dispatcher) send(ctx context.Context, dl store.Delivery, body []byte) string {
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dl.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return "bad callback URL: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "marketscreener-webhooks/1")
	req.Header.Set("X-Webhook-Signature", domain.SignWebhook(dl.Secret, body))
	req.Header.Set("X-Webhook-Id", strconv.FormatInt(dl.EventID, 10))
	req.Header.Set("X-Webhook-Timestamp", strconv.FormatInt(d.Now().Unix(), 10))
	resp, err := d.Client.Do(req)
	if err != nil {
		var fe *forbiddenAddrError
		if errors.As(err, &fe) {
			return fe.Error()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return "timed out after 10s"
		}
		return "request failed: " + err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Sprintf("answered %d (2xx expected; redirects are not followed)", resp.StatusCode)
	}
	return ""
}

// forbiddenAddrError refuses a dial to an internal address.
type forbiddenAddrError struct{ host, addr string }

func (e *forbiddenAddrError) Error() string {
	return fmt.Sprintf("refused to connect: %s resolves to %s, a private or internal address", e.host, e.addr)
}

// WebhookClientConfig configures the delivery HTTP client.
type WebhookClientConfig struct {
	// AllowPrivate lets deliveries reach loopback and private addresses
	// (tests only: MARKET_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// ExtraRootsPEM are CA certificates trusted besides the system roots
	// (a test CA: MARKET_WEBHOOK_CA_FILE).
	ExtraRootsPEM []byte
	// Resolver resolves callback hosts (nil: the system resolver).
	Resolver *net.Resolver
}

// NewWebhookClient returns the delivery client: TLS only (the URLs are
// https), redirects not followed, no proxy, a 10 s time-out, and a dialer
// that checks every address a host resolves to at dial time (so DNS
// rebinding cannot reach an internal address) and connects to a checked
// one.
func NewWebhookClient(cfg WebhookClientConfig) *http.Client {
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		var lastErr error
		for _, ip := range ips {
			if !cfg.AllowPrivate && domain.ForbiddenIP(ip) {
				lastErr = &forbiddenAddrError{host: host, addr: ip.String()}
				continue
			}
			conn, err := dialer.DialContext(ctx, network, netip.AddrPortFrom(ip, mustPort(port)).String())
			if err == nil {
				return conn, nil
			}
			lastErr = err
		}
		if lastErr == nil {
			lastErr = fmt.Errorf("%s has no address", host)
		}
		return nil, lastErr
	}
	var roots *x509.CertPool // nil: the system roots
	if len(cfg.ExtraRootsPEM) > 0 {
		if sys, err := x509.SystemCertPool(); err == nil && sys != nil {
			roots = sys
		} else {
			roots = x509.NewCertPool()
		}
		roots.AppendCertsFromPEM(cfg.ExtraRootsPEM)
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: deliveryTimeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   deliveryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func mustPort(p string) uint16 {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 443
	}
	return uint16(n)
}
