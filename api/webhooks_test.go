package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/webhook"
)

type hookClient struct {
	srv *httptest.Server
	key string
}

func (c hookClient) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, c.srv.URL+"/api/v1/public"+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", c.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	box, _ := domain.NewSecretBox(bytes.Repeat([]byte{3}, 32))
	srv := httptest.NewServer(api.New(api.Config{Region: "global", SecretBox: box}, db, storeGate{db}).Handler())
	t.Cleanup(srv.Close)
	newClient := func(tier domain.Tier, markets ...domain.Market) hookClient {
		c := &domain.Client{OrgName: "Hooks", Tier: tier, Markets: markets}
		if err := db.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
		key, _, err := db.IssueKey(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return hookClient{srv: srv, key: key}
	}
	a := newClient(domain.Business, domain.Markets...)
	b := newClient(domain.Starter, domain.Crypto)

	status, body := a.do(t, http.MethodPost, "/webhooks", `{"callback_url":"https://hooks.example.com/market","market":"crypto"}`)
	var created api.NewSubscription
	if status != http.StatusCreated || json.Unmarshal(body, &created) != nil || !strings.HasPrefix(created.Secret, "whsec_") ||
		created.Status != "active" || created.Market == nil || *created.Market != "crypto" || created.ID == "" {
		t.Fatalf("create: %d %s", status, body)
	}
	// The secret is stored sealed, never in clear.
	var sealed []byte
	if err := db.Pool.QueryRow(ctx, `SELECT secret_sealed FROM webhooks WHERE id = $1`, created.ID).Scan(&sealed); err != nil ||
		bytes.Contains(sealed, []byte(created.Secret)) {
		t.Fatalf("stored secret: %v (in clear: %v)", err, bytes.Contains(sealed, []byte(created.Secret)))
	}
	status, body = a.do(t, http.MethodGet, "/webhooks", "")
	if status != http.StatusOK || strings.Contains(string(body), "whsec_") || !strings.Contains(string(body), created.ID) ||
		!strings.Contains(string(body), `"consecutive_failures":0`) {
		t.Fatalf("list: %d %s (must not show the secret)", status, body)
	}
	// Another client sees none of it and cannot delete it.
	if status, body := b.do(t, http.MethodGet, "/webhooks", ""); status != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("other client's list: %d %s", status, body)
	}
	if status, _ := b.do(t, http.MethodDelete, "/webhooks/"+created.ID, ""); status != http.StatusNotFound {
		t.Errorf("other client's delete: %d, want 404", status)
	}

	for _, tc := range []struct {
		client hookClient
		body   string
		status int
		want   string
	}{
		{a, `{"callback_url":"http://hooks.example.com/x"}`, 400, "https://"},
		{a, `{"callback_url":"https://127.0.0.1/x"}`, 400, "callback_url"},
		{a, `{"callback_url":"https://169.254.169.254/latest"}`, 400, "callback_url"},
		{a, `{"callback_url":"https://localhost:8443/x"}`, 400, "callback_url"},
		{a, `{"callback_url":"https://hooks.example.com/x","market":"bonds"}`, 400, "market"},
		{a, `{"market":"crypto"}`, 400, "callback_url"},
		{a, `{"callback_url":"https://hooks.example.com/x","extra":1}`, 400, "extra"},
		{b, `{"callback_url":"https://hooks.example.com/x","market":"forex"}`, 403, "forex"},
	} {
		status, body := tc.client.do(t, http.MethodPost, "/webhooks", tc.body)
		if status != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("POST %s: %d %s, want %d naming %s", tc.body, status, body, tc.status, tc.want)
		}
	}

	// At most 10 per client.
	for i := 2; i <= 10; i++ {
		if status, body := a.do(t, http.MethodPost, "/webhooks", fmt.Sprintf(`{"callback_url":"https://hooks.example.com/%d"}`, i)); status != http.StatusCreated {
			t.Fatalf("subscription %d: %d %s", i, status, body)
		}
	}
	if status, body := a.do(t, http.MethodPost, "/webhooks", `{"callback_url":"https://hooks.example.com/11"}`); status != http.StatusConflict ||
		!strings.Contains(string(body), "at most 10") {
		t.Errorf("11th subscription: %d %s, want 409", status, body)
	}

	if status, body := a.do(t, http.MethodDelete, "/webhooks/"+created.ID, ""); status != http.StatusNoContent || len(body) != 0 {
		t.Errorf("delete: %d %s, want 204", status, body)
	}
	for _, id := range []string{created.ID, "00000000-0000-4000-8000-000000000000"} {
		if status, _ := a.do(t, http.MethodDelete, "/webhooks/"+id, ""); status != http.StatusNotFound {
			t.Errorf("delete %s: %d, want 404", id, status)
		}
	}
	if status, body := a.do(t, http.MethodDelete, "/webhooks/not-a-uuid", ""); status != http.StatusBadRequest || !strings.Contains(string(body), "path.id") {
		t.Errorf("delete not-a-uuid: %d %s, want 400 naming path.id", status, body)
	}
}

// The self-service operations: delivery log, test ping (sent now through
// the delivery client and signer), redelivery, enable and secret rotation;
// each scoped to the calling client (404 for another's ids), each bad
// parameter a 400 naming it, answers never cached.
func TestWebhookSelfServiceEndpoints(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	box, _ := domain.NewSecretBox(bytes.Repeat([]byte{3}, 32))
	var (
		mu     sync.Mutex
		pings  []*http.Request
		bodies [][]byte
		status = http.StatusOK
	)
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		pings, bodies = append(pings, r), append(bodies, b)
		st := status
		mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(rcv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw})
	const pingFloor = 300 * time.Millisecond
	srv := httptest.NewServer(api.New(api.Config{Region: "global", SecretBox: box, WebhookAllowPrivate: true,
		WebhookClient:    webhook.NewClient(webhook.ClientConfig{AllowPrivate: true, ExtraRootsPEM: ca}),
		WebhookPingFloor: pingFloor}, db, storeGate{db}).Handler())
	t.Cleanup(srv.Close)
	newClient := func(markets ...domain.Market) (hookClient, string) {
		c := &domain.Client{OrgName: "Hooks", Tier: domain.Business, Markets: markets}
		if err := db.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
		key, _, err := db.IssueKey(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return hookClient{srv: srv, key: key}, c.ID
	}
	a, _ := newClient(domain.Markets...)
	b, _ := newClient(domain.Markets...)
	status0, body := a.do(t, http.MethodPost, "/webhooks", `{"callback_url":"`+rcv.URL+`/hook?token=x"}`)
	var sub api.NewSubscription
	if status0 != http.StatusCreated || json.Unmarshal(body, &sub) != nil {
		t.Fatalf("create: %d %s", status0, body)
	}
	hook := "/webhooks/" + sub.ID

	// Another client's ids are not found, whatever the operation.
	for _, op := range [][2]string{{"GET", hook + "/deliveries"}, {"POST", hook + "/test"}, {"POST", hook + "/enable"},
		{"POST", hook + "/rotate-secret"}, {"POST", hook + "/deliveries/1/redeliver"}} {
		if st, body := b.do(t, op[0], op[1], ""); st != http.StatusNotFound {
			t.Errorf("another client's %s %s: %d %s, want 404", op[0], op[1], st, body)
		}
	}
	// Bad parameters are 400 naming them.
	for path, name := range map[string]string{
		hook + "/deliveries?limit=0": "limit", hook + "/deliveries?limit=101": "limit", hook + "/deliveries?limit=x": "limit",
		"/webhooks/x/deliveries": "path.id",
	} {
		if st, body := a.do(t, http.MethodGet, path, ""); st != http.StatusBadRequest || !strings.Contains(string(body), name) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, st, body, name)
		}
	}
	if st, body := a.do(t, http.MethodPost, hook+"/deliveries/abc/redeliver", ""); st != http.StatusBadRequest || !strings.Contains(string(body), "delivery_id") {
		t.Errorf("redeliver abc: %d %s, want 400 naming delivery_id", st, body)
	}

	// A test ping goes out now, signed like a delivery.
	st, body := a.do(t, http.MethodPost, hook+"/test", "")
	var res api.TestResult
	if st != http.StatusOK || json.Unmarshal(body, &res) != nil || !res.Delivered || res.ResponseStatus == nil || *res.ResponseStatus != 200 ||
		res.ErrorCategory != nil || !strings.HasPrefix(res.EventID, "ping_") {
		t.Fatalf("test ping: %d %s", st, body)
	}
	mu.Lock()
	wh, _ := standardwebhooks.NewWebhook(sub.Secret)
	if len(pings) != 1 || wh.Verify(bodies[0], pings[0].Header) != nil || pings[0].Header.Get("webhook-id") != res.EventID ||
		!strings.Contains(string(bodies[0]), `"event":"ping"`) || pings[0].Header.Get("X-Webhook-Signature") != domain.SignWebhook(sub.Secret, bodies[0]) {
		t.Errorf("the ping as received: %d requests, %s", len(pings), bodies)
	}
	status = http.StatusServiceUnavailable
	mu.Unlock()
	st, body = a.do(t, http.MethodPost, hook+"/test", "")
	if st != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Delivered || res.ErrorCategory == nil || *res.ErrorCategory != "http_status" ||
		*res.ResponseStatus != 503 {
		t.Errorf("failing ping: %d %s", st, body)
	}
	var hooks []api.Subscription
	if st, body := a.do(t, http.MethodGet, "/webhooks", ""); json.Unmarshal(body, &hooks) != nil || hooks[0].ConsecutiveFailures != 0 {
		t.Errorf("a ping counted as a failure: %d %s", st, body)
	}

	// A ping cannot scan ports: a port nobody listens on answers only
	// "unreachable", without a latency; a privileged port other than 443
	// cannot be subscribed at all.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "https://" + ln.Addr().String() + "/hook"
	ln.Close()
	if st, body := a.do(t, http.MethodPost, "/webhooks", `{"callback_url":"https://hooks.example.com:22/hook"}`); st != http.StatusBadRequest ||
		!strings.Contains(string(body), "callback_url") || !strings.Contains(string(body), "port") {
		t.Errorf("a callback on port 22: %d %s, want 400 naming callback_url and the port", st, body)
	}
	var closedSub api.NewSubscription
	if st, body := a.do(t, http.MethodPost, "/webhooks", `{"callback_url":"`+closedURL+`"}`); st != http.StatusCreated ||
		json.Unmarshal(body, &closedSub) != nil {
		t.Fatalf("create on a closed port: %d %s", st, body)
	}
	start := time.Now()
	st, body = a.do(t, http.MethodPost, "/webhooks/"+closedSub.ID+"/test", "")
	took := time.Since(start)
	var raw map[string]any
	if st != http.StatusOK || json.Unmarshal(body, &raw) != nil || raw["error_category"] != domain.ErrUnreachable || raw["latency_ms"] != nil ||
		raw["response_status"] != nil || raw["delivered"] != false {
		t.Errorf("ping of a closed port: %d %s, want unreachable with no latency", st, body)
	}
	// The refusal comes at once; the answer waits for the floor that a
	// filtered port's time-out would reach too (a bound the code holds,
	// not a measure of speed).
	if took < pingFloor {
		t.Errorf("the closed port's ping answered after %s, before the %s every unreachable ping waits", took, pingFloor)
	}
	if st, body := a.do(t, http.MethodDelete, "/webhooks/"+closedSub.ID, ""); st != http.StatusNoContent {
		t.Fatalf("delete: %d %s", st, body)
	}

	// Delivery log and redelivery.
	var ev int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', 'BTC_USDT', 'neutral', 'growth', 30, now()) RETURNING id`).Scan(&ev); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FanOut(ctx, 10); err != nil {
		t.Fatal(err)
	}
	var log []api.Delivery
	if st, body := a.do(t, http.MethodGet, hook+"/deliveries?limit=5", ""); st != 200 || json.Unmarshal(body, &log) != nil || len(log) != 1 ||
		log[0].EventID != strconv.FormatInt(ev, 10) || log[0].State != "pending" || log[0].NextAttemptAt == nil || log[0].Symbol != "BTC_USDT" {
		t.Fatalf("deliveries: %d %s", st, body)
	}
	if st, body := a.do(t, http.MethodPost, fmt.Sprintf("%s/deliveries/%d/redeliver", hook, log[0].ID), ""); st != http.StatusAccepted ||
		!strings.Contains(string(body), `"state":"pending"`) {
		t.Errorf("redeliver: %d %s", st, body)
	}
	if st, _ := a.do(t, http.MethodPost, fmt.Sprintf("%s/deliveries/%d/redeliver", hook, log[0].ID+99), ""); st != http.StatusNotFound {
		t.Errorf("redeliver an unknown delivery: %d, want 404", st)
	}

	// Enable a disabled subscription.
	if _, err := db.Pool.Exec(ctx, `UPDATE webhooks SET status = 'disabled', consecutive_failures = 10`); err != nil {
		t.Fatal(err)
	}
	if st, body := a.do(t, http.MethodPost, fmt.Sprintf("%s/deliveries/%d/redeliver", hook, log[0].ID), ""); st != http.StatusConflict {
		t.Errorf("redeliver while disabled: %d %s, want 409", st, body)
	}
	var enabled api.Subscription
	if st, body := a.do(t, http.MethodPost, hook+"/enable", ""); st != 200 || json.Unmarshal(body, &enabled) != nil ||
		enabled.Status != "active" || enabled.ConsecutiveFailures != 0 {
		t.Errorf("enable: %d %s", st, body)
	}

	// Rotation: a new secret, the old one signs too for 24 h.
	var rot api.RotatedSecret
	if st, body := a.do(t, http.MethodPost, hook+"/rotate-secret", ""); st != 200 || json.Unmarshal(body, &rot) != nil ||
		rot.Secret == sub.Secret || !strings.HasPrefix(rot.Secret, "whsec_") || time.Until(rot.PreviousSecretUntil) < 23*time.Hour {
		t.Fatalf("rotate: %d %s", st, body)
	}
	mu.Lock()
	status = http.StatusOK
	mu.Unlock()
	if st, body := a.do(t, http.MethodPost, hook+"/test", ""); st != 200 {
		t.Fatalf("ping after rotation: %d %s", st, body)
	}
	mu.Lock()
	last, lastBody := pings[len(pings)-1], bodies[len(bodies)-1]
	mu.Unlock()
	for _, s := range []string{sub.Secret, rot.Secret} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.Verify(lastBody, last.Header); err != nil {
			t.Errorf("after rotation, secret %s… does not verify: %v", s[:10], err)
		}
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/public/webhooks", nil)
	req.Header.Set("X-API-Key", a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET /webhooks Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
}

// Without MARKET_SECRET_KEY the api refuses new subscriptions with 503
// rather than storing a secret it could not protect.
func TestWebhookWithoutSecretKey(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	status, body := hookClient{srv: f.srv, key: f.key}.do(t, http.MethodPost, "/webhooks", `{"callback_url":"https://hooks.example.com/x"}`)
	if status != http.StatusServiceUnavailable {
		t.Errorf("no secret key: %d %s, want 503", status, body)
	}
}
