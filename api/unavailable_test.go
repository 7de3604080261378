package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// TestDatabaseDownIs503: when Postgres goes away after start-up, requests
// get 503 with Retry-After (not a 500), and the cause stays in the logs.
func TestDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	db, err := store.Open(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	srv := httptest.NewServer(api.New(api.Config{Region: "global"}, db, storeGate{db}).Handler())
	t.Cleanup(srv.Close)
	key, _ := domain.NewKey()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/public/usage", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("database down: %d Retry-After=%q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
