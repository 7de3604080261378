package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/api"
)

// /readyz lists what is still warming up without changing the status,
// and stops asking once everything is warm.
func TestReadyzWarmingUp(t *testing.T) {
	t.Parallel()
	r := api.NewReadiness(api.Check{Name: "postgres", Required: true, Probe: func(context.Context) error { return nil }})
	calls := 0
	cold := []string{"forex/swing", "stocks/swing"}
	r.Warmup = func(context.Context) ([]string, error) {
		calls++
		return cold, nil
	}
	h := api.OpsHandler(r, nil, nil)
	readyz := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return rec.Code, body
	}
	r.ProbeOnce(context.Background())
	code, body := readyz()
	if code != http.StatusOK || body["status"] != "ready" || !cmp.Equal(body["warming_up"], []any{"forex/swing", "stocks/swing"}) {
		t.Fatalf("readyz while warming up = %d %v, want 200 ready listing forex/swing and stocks/swing", code, body)
	}
	cold = nil
	r.ProbeOnce(context.Background())
	r.ProbeOnce(context.Background())
	if code, body = readyz(); code != http.StatusOK || body["warming_up"] != nil {
		t.Fatalf("readyz once warm = %d %v, want no warming_up", code, body)
	}
	if calls != 2 {
		t.Errorf("warm-up asked %d times, want 2 (not again once warm)", calls)
	}
}

// /readyz adds the Info fields to its body, and they cannot replace the
// status or the checks.
func TestReadyzInfo(t *testing.T) {
	t.Parallel()
	r := api.NewReadiness(api.Check{Name: "postgres", Required: true, Probe: func(context.Context) error { return nil }})
	r.Info = func() map[string]any {
		return map[string]any{"schema": map[string]any{"version": 16, "binary": 15}, "status": "hijacked"}
	}
	r.ProbeOnce(context.Background())
	rec := httptest.NewRecorder()
	api.OpsHandler(r, nil, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"status": "ready", "checks": map[string]any{"postgres": "ok"},
		"schema": map[string]any{"version": 16.0, "binary": 15.0}}
	if rec.Code != http.StatusOK || !cmp.Equal(body, want) {
		t.Fatalf("readyz = %d %v, want 200 %v", rec.Code, body, want)
	}
}
