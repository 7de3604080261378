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

// What a test ping tells the client cannot scan ports: a closed port, an
// open one whose server does not speak TLS and an open one that never
// answers all read the same, unreachable and without a latency; a port
// callbacks may not use is refused before any dial. Once a TLS server
// answers, the client learns what it needs to fix (its certificate, its
// status).
func TestPingResultCannotScanPorts(t *testing.T) {
	t.Parallel()
	listen := func(serve func(net.Conn)) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go serve(c)
			}
		}()
		return "https://" + ln.Addr().String() + "/hook"
	}
	notTLS := listen(func(c net.Conn) {
		defer c.Close()
		_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
		buf := make([]byte, 512)
		_, _ = c.Read(buf)
	})
	silent := listen(func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	resets := listen(func(c net.Conn) { c.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String() + "/hook" // nothing listens once closed
	ln.Close()
	ok := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	refusing := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) })
	trusted := webhook.NewClient(webhook.ClientConfig{AllowPrivate: true, ExtraRootsPEM: caPEM(ok)})
	untrusted := webhook.NewClient(webhook.ClientConfig{AllowPrivate: true})
	ping := func(client *http.Client, url string) webhook.Result {
		t.Helper()
		// A silent port would hold the send for its whole time-out: the
		// ping's context ends it sooner, as a client's request would.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		s := webhook.Sender{Client: client}
		return s.Send(ctx, url, webhook.Message{ID: "ping_1", Body: []byte(`{}`), Secret: testSecret(t)}).ForClient()
	}
	unreachable := webhook.Result{Err: domain.DeliveryError{Category: domain.ErrUnreachable}}
	for name, url := range map[string]string{"closed": closed, "not TLS": notTLS, "silent": silent, "closing at once": resets} {
		if got := ping(trusted, url); got != unreachable {
			t.Errorf("%s port: %+v, want %+v", name, got, unreachable)
		}
	}
	if got := ping(trusted, "https://127.0.0.1:25/hook"); got.Err.Category != domain.ErrAddressRefused || got.Latency != 0 {
		t.Errorf("port 25: %+v, want address_not_allowed without a latency", got)
	}
	if got := ping(untrusted, ok.URL); got.Err.Category != domain.ErrTLS {
		t.Errorf("untrusted certificate: %+v, want tls_error", got)
	}
	if got := ping(trusted, refusing.URL); got.Err.Category != domain.ErrHTTPStatus || got.Status != 403 || !got.Connected || got.Latency <= 0 {
		t.Errorf("a 403: %+v, want http_status 403 with its latency", got)
	}
	if got := ping(trusted, ok.URL); !got.Err.OK() || got.Status != 204 || got.Latency <= 0 {
		t.Errorf("a 204: %+v, want delivered with its latency", got)
	}
}
