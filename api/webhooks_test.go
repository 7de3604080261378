package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
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
	for _, id := range []string{created.ID, "not-a-uuid", "00000000-0000-4000-8000-000000000000"} {
		if status, _ := a.do(t, http.MethodDelete, "/webhooks/"+id, ""); status != http.StatusNotFound {
			t.Errorf("delete %s: %d, want 404", id, status)
		}
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
