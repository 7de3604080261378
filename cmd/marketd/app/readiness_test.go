package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/cmd/marketd/app"
)

// TestNotReadyUntilMigrated: before the schema has the binary's migrations,
// public requests get 503 with Retry-After and /readyz says what is
// missing; after marketd migrate the same process becomes ready.
func TestNotReadyUntilMigrated(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	srv := startServer(t, env, "api")
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"

	r := get(t, base+"/usage", "msk_whatever")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("unmigrated: %d Retry-After=%q %v", r.status, r.header.Get("Retry-After"), r.body)
	}
	var (
		ready struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}
		resp *http.Response
	)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if resp, err = http.Get("http://" + srv.OpsAddr() + "/readyz"); err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if ready.Checks["postgres"] != "" { // probed at least once
			break
		}
	}
	if resp.StatusCode != http.StatusServiceUnavailable || ready.Status != "not_ready" || !strings.Contains(ready.Checks["postgres"], "marketd migrate") {
		t.Fatalf("readyz = %d %+v, want 503 naming the missing migration", resp.StatusCode, ready)
	}

	mustRun(t, env, "migrate")
	waitReady(t, srv)
	id := mustRun(t, env, "clients", "create", "--org", "Late", "--tier", "business")
	key := mustRun(t, env, "keys", "issue", "--client", id)
	if r := get(t, base+"/usage", key); r.status != http.StatusOK {
		t.Fatalf("after migrate: %d %v", r.status, r.body)
	}
}

// TestLogsCarryRequestIDNeverKeys: every request is logged once as JSON
// with its request id (echoed in X-Request-Id), and the key never appears.
func TestLogsCarryRequestIDNeverKeys(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["MARKET_LOG_LEVEL"] = "info"
	mustRun(t, env, "migrate")
	id := mustRun(t, env, "clients", "create", "--org", "Logged", "--tier", "business")
	key := mustRun(t, env, "keys", "issue", "--client", id)

	ctx, cancel := context.WithCancel(context.Background())
	var logs safeBuffer
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: &logs}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"api"}) }()
	<-m.Listening()
	waitReady(t, m)
	r := get(t, "http://"+m.HTTPAddr()+"/api/v1/public/usage", key)
	bad := get(t, "http://"+m.HTTPAddr()+"/api/v1/public/usage", key[:len(key)-2]+"xx")
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("api did not stop")
	}
	reqID := r.header.Get("X-Request-Id")
	if r.status != 200 || reqID == "" || bad.status != 401 {
		t.Fatalf("requests: %d %q, %d", r.status, reqID, bad.status)
	}
	out := logs.String()
	if strings.Contains(out, key) || strings.Contains(out, key[4:20]) {
		t.Fatal("a key (or part of it) was logged")
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "request" && rec["request_id"] == reqID && rec["client_id"] == id && rec["status"] == 200.0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no access-log line with request_id %s and client_id %s in:\n%s", reqID, id, out)
	}
}
