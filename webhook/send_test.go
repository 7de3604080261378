package webhook_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/webhook"
)

func caPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func tlsServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// Every way a send can fail ends in its category, and no category text
// carries an address or a host name.
func TestSendCategories(t *testing.T) {
	t.Parallel()
	ok := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	unavailable := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	redirect := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://example.com/", http.StatusFound)
	})
	bigHeaders := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", 20<<10))
		w.WriteHeader(http.StatusOK)
	})
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	ca := caPEM(ok)
	trusted := webhook.NewClient(webhook.ClientConfig{AllowPrivate: true, ExtraRootsPEM: ca})
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("resolver 10.9.8.7:53 unreachable")
	}}
	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
		want   domain.DeliveryError
		status int
	}{
		{"2xx", trusted, ok.URL + "/hook", domain.DeliveryError{}, 204},
		{"non-2xx", trusted, unavailable.URL, domain.DeliveryError{Category: domain.ErrHTTPStatus, Status: 503}, 503},
		{"redirect not followed", trusted, redirect.URL, domain.DeliveryError{Category: domain.ErrHTTPStatus, Status: 302}, 302},
		{"headers over 16 KiB", trusted, bigHeaders.URL, domain.DeliveryError{Category: domain.ErrBadResponse}, 0},
		{"untrusted certificate", webhook.NewClient(webhook.ClientConfig{AllowPrivate: true}), ok.URL, domain.DeliveryError{Category: domain.ErrTLS}, 0},
		{"loopback refused", webhook.NewClient(webhook.ClientConfig{ExtraRootsPEM: ca}), ok.URL, domain.DeliveryError{Category: domain.ErrAddressRefused}, 0},
		{"nothing listening", trusted, closedURL, domain.DeliveryError{Category: domain.ErrConnect}, 0},
		{"name does not resolve", webhook.NewClient(webhook.ClientConfig{Resolver: noDNS}), "https://hooks.example.com/x", domain.DeliveryError{Category: domain.ErrDNS}, 0},
	} {
		s := webhook.Sender{Client: tc.client}
		res := s.Send(context.Background(), tc.url, webhook.Message{ID: "1", Body: []byte(`{}`), Secret: testSecret(t)})
		if res.Err != tc.want || res.Status != tc.status {
			t.Errorf("%s: %+v (status %d), want %+v (status %d)", tc.name, res.Err, res.Status, tc.want, tc.status)
		}
		for _, leak := range []string{"127.0.0.1", "10.9.8.7", "example.com", "localhost"} {
			if strings.Contains(res.Err.String(), leak) {
				t.Errorf("%s: category %q leaks %s", tc.name, res.Err, leak)
			}
		}
	}
}

// A receiver that does not answer within 10 s is a timeout, and the send
// gives up then (it never outlives its time-out).
func TestSendTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	s := webhook.Sender{Client: webhook.NewClient(webhook.ClientConfig{AllowPrivate: true, ExtraRootsPEM: caPEM(srv)})}
	start := time.Now()
	res := s.Send(context.Background(), srv.URL, webhook.Message{ID: "1", Body: []byte(`{}`), Secret: testSecret(t)})
	if res.Err.Category != domain.ErrTimeout {
		t.Errorf("hanging receiver: %+v, want timeout", res.Err)
	}
	if took := time.Since(start); took > webhook.Timeout+2*time.Second {
		t.Errorf("the send took %s, past its %s time-out", took, webhook.Timeout)
	}
}

func testSecret(t *testing.T) string {
	t.Helper()
	s, err := domain.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The Standard Webhooks library verifies what Sign produces, with either
// secret during a rotation; the contract's hex signature uses the current
// secret; a tampered timestamp or body fails.
func TestSignVerifiedByStandardWebhooks(t *testing.T) {
	t.Parallel()
	cur, prev := testSecret(t), testSecret(t)
	body := []byte(`{"id":"42","event":"verdict_changed"}`)
	now := time.Now().Unix()
	h, err := webhook.Sign(webhook.Message{ID: "42", Body: body, Secret: cur, PreviousSecret: prev}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(h.Get("webhook-signature"), "v1,"); got != 2 {
		t.Fatalf("webhook-signature %q: %d signatures, want 2", h.Get("webhook-signature"), got)
	}
	for _, secret := range []string{cur, prev} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatalf("the library refuses our secret form %q: %v", secret[:10], err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("library verification: %v", err)
		}
	}
	if h.Get("X-Webhook-Signature") != domain.SignWebhook(cur, body) || h.Get("webhook-id") != "42" || h.Get("X-Webhook-Id") != "42" {
		t.Errorf("headers %v", h)
	}
	wh, _ := standardwebhooks.NewWebhook(cur)
	tampered := h.Clone()
	tampered.Set("webhook-timestamp", "1")
	if wh.VerifyIgnoringTimestamp(body, tampered) == nil {
		t.Error("a changed timestamp still verified")
	}
	if wh.Verify([]byte(`{"id":"43"}`), h) == nil {
		t.Error("a changed body still verified")
	}
	other, _ := standardwebhooks.NewWebhook(testSecret(t))
	if other.Verify(body, h) == nil {
		t.Error("another secret verified")
	}
}

// Logs may carry the host, never the path or the query.
func TestHost(t *testing.T) {
	t.Parallel()
	if got := webhook.Host("https://hooks.example.com:8443/path/tok?token=abc"); got != "hooks.example.com:8443" {
		t.Errorf("Host = %q", got)
	}
}
