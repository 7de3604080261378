package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/store/storetest"
)

// testEnv is the environment of one test's marketd: its own schema, its own
// Redis DB, ports chosen by the kernel.
func testEnv(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"MARKET_DATABASE_URL": storetest.URLWithSchema(storetest.CreateSchema(t)),
		"MARKET_REDIS_URL":    "redis://127.0.0.1:6379/15",
		"MARKET_HTTP_ADDR":    "127.0.0.1:0",
		"MARKET_OPS_ADDR":     "127.0.0.1:0",
		"MARKET_LOG_LEVEL":    "warn",
	}
}

// run runs one CLI command to completion.
func run(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: &out, Stderr: &errb}
	code = m.Run(context.Background(), args)
	return out.String(), errb.String(), code
}

func mustRun(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, errs, code := run(t, env, args...)
	if code != 0 {
		t.Fatalf("marketd %v: exit %d: %s", args, code, errs)
	}
	return strings.TrimSpace(out)
}

// startServer runs a serving role in the background until the test ends.
func startServer(t *testing.T, env map[string]string, role string) *app.Main {
	t.Helper()
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: &safeBuffer{}}
	startRole(t, m, role)
	return m
}

// startRole runs m's serving role until the test ends; m.Stderr must be a
// safeBuffer (its contents explain a failure).
func startRole(t *testing.T, m *app.Main, role string) {
	t.Helper()
	errb := m.Stderr.(*safeBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{role}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("marketd %s exited %d: %s", role, code, errb.String())
			}
		case <-time.After(30 * time.Second):
			// The worker gives in-flight tasks 20 s (asynq's ShutdownTimeout)
			// before it requeues them; a loaded machine may need all of it.
			t.Errorf("marketd %s did not stop within 30 s", role)
		}
	})
	select {
	case <-m.Listening():
	case code := <-done:
		t.Fatalf("marketd %s exited %d before listening: %s", role, code, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("marketd %s did not listen within 10 s", role)
	}
}

type safeBuffer struct {
	once sync.Once
	mu   chan struct{}
	buf  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.lock()
	defer b.unlock()
	return b.buf.Write(p)
}
func (b *safeBuffer) String() string { b.lock(); defer b.unlock(); return b.buf.String() }
func (b *safeBuffer) lock() {
	b.once.Do(func() { b.mu = make(chan struct{}, 1) })
	b.mu <- struct{}{}
}
func (b *safeBuffer) unlock() { <-b.mu }

// waitReady polls /readyz until the process reports ready.
func waitReady(t *testing.T, m *app.Main) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + m.OpsAddr() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("not ready within 10 s")
}

type response struct {
	status int
	header http.Header
	body   map[string]any
}

func get(t *testing.T, url, key string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header}
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			t.Fatalf("GET %s: body %q is not a JSON object: %v", url, b, err)
		}
	}
	return r
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ k, v string }{
		"database":         {"MARKET_DATABASE_URL", "mysql://x"},
		"redis":            {"MARKET_REDIS_URL", "http://x"},
		"http":             {"MARKET_HTTP_ADDR", "8080"},
		"region":           {"MARKET_REGION", "mars"},
		"secret":           {"MARKET_SECRET_KEY", "short"},
		"log":              {"MARKET_LOG_LEVEL", "loud"},
		"trigger":          {"MARKET_SCORE_TRIGGER", "sometimes"},
		"sandbox pipeline": {"MARKET_SANDBOX_PIPELINE", "maybe"},
		"sentinel addrs":   {"MARKET_REDIS_SENTINEL_ADDRS", "10.0.0.1"},
		"sentinel master":  {"MARKET_REDIS_SENTINEL_MASTER", "mymaster"}, // without the addresses
	} {
		env := map[string]string{tc.k: tc.v}
		_, errs, code := run(t, env, "api")
		if code == 0 || !strings.Contains(errs, tc.k) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q: want non-zero and one line naming %s", name, code, errs, tc.k)
		}
	}
	if _, _, code := run(t, nil, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

func TestUsageAndAuthOverHTTP(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	if out := mustRun(t, env, "migrate"); !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate: %q", out)
	}
	clientID := mustRun(t, env, "clients", "create", "--org", "Acme Capital", "--tier", "business", "--expires", "2030-06-30T00:00:00Z")
	key := mustRun(t, env, "keys", "issue", "--client", clientID)
	if strings.Count(key, "\n") != 0 || !strings.HasPrefix(key, "msk_") {
		t.Fatalf("keys issue printed %q", key)
	}
	srv := startServer(t, env, "api")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"

	for i := 1; i <= 2; i++ {
		r := get(t, base+"/usage", key)
		if r.status != 200 {
			t.Fatalf("usage: %d %v", r.status, r.body)
		}
		want := map[string]any{
			"org_name": "Acme Capital", "tier": "business", "status": "active",
			"allowed_markets": []any{"crypto", "forex", "stocks"}, "rate_limit": "120/minute",
			"monthly_quota": 150000.0, "used_this_month": float64(i), "contract_expires_at": "2030-06-30T00:00:00Z",
		}
		for k, v := range want {
			if got, _ := json.Marshal(r.body[k]); string(got) != mustJSON(v) {
				t.Errorf("usage %s = %s, want %s", k, got, mustJSON(v))
			}
		}
		if len(r.body) != len(want) {
			t.Errorf("usage has %d fields, want %d: %v", len(r.body), len(want), r.body)
		}
		if r.header.Get("RateLimit-Policy") == "" || r.header.Get("RateLimit") == "" {
			t.Errorf("missing RateLimit headers: %v", r.header)
		}
	}

	// The auth matrix: every refusal is a problem body with the right status.
	otherKey := mustRun(t, env, "keys", "issue", "--client", clientID)
	keys := strings.Fields(mustRun(t, env, "keys", "list", "--client", clientID))
	if len(keys) < 8 {
		t.Fatalf("keys list: %v", keys)
	}
	badChecksum := key[:len(key)-1] + string("ab"[boolIdx(key[len(key)-1] == 'a')])
	unknown := mustIssueUnknownKey(t)
	cases := []struct {
		name   string
		key    string
		status int
		detail string
	}{
		{"missing", "", 401, "missing X-API-Key"},
		{"malformed", "hello", 401, "invalid API key"},
		{"bad checksum", badChecksum, 401, "invalid API key"},
		{"unknown", unknown, 401, "unknown key"},
	}
	for _, c := range cases {
		r := get(t, base+"/usage", c.key)
		assertProblem(t, c.name, r, c.status, c.detail)
	}

	// Revocation takes effect on the next request; the other key still works.
	var listed []struct {
		ID     string `json:"id"`
		Prefix string `json:"prefix"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "keys", "list", "--client", clientID, "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	for _, k := range listed {
		if strings.HasPrefix(key, k.Prefix) {
			mustRun(t, env, "keys", "revoke", k.ID)
		}
	}
	assertProblem(t, "revoked", eventually(t, func() response { return get(t, base+"/usage", key) }, 401), 401, "revoked")
	if r := get(t, base+"/usage", otherKey); r.status != 200 {
		t.Fatalf("other key after revoke: %d", r.status)
	}

	mustRun(t, env, "clients", "suspend", clientID)
	assertProblem(t, "suspended", eventually(t, func() response { return get(t, base+"/usage", otherKey) }, 403), 403, "suspended")
	mustRun(t, env, "clients", "activate", clientID)
	if r := eventually(t, func() response { return get(t, base+"/usage", otherKey) }, 200); r.status != 200 {
		t.Fatalf("after activate: %d", r.status)
	}
	mustRun(t, env, "clients", "set-limits", clientID, "--expires", "2020-01-01T00:00:00Z")
	assertProblem(t, "expired", eventually(t, func() response { return get(t, base+"/usage", otherKey) }, 403), 403, "expired")

	// Unknown paths are problems too; docs and the OpenAPI document are served.
	assertProblem(t, "no route", get(t, base+"/nope", otherKey), 404, "no operation")
	if r := get(t, "http://"+srv.HTTPAddr()+"/openapi.json", ""); r.status != 200 || r.body["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json: %d %v", r.status, r.body["openapi"])
	}
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/docs/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("docs: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + srv.OpsAddr() + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %v %v", resp, err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `marketd_http_requests_total{operation="get-usage",status="200"}`) {
		t.Errorf("metrics lack the usage counter")
	}
}

func assertProblem(t *testing.T, name string, r response, status int, detail string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d (%v)", name, r.status, status, r.body)
		return
	}
	if r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: content type %q", name, r.header.Get("Content-Type"))
	}
	if r.body["status"] != float64(status) || r.body["title"] == "" || !strings.Contains(r.body["detail"].(string), detail) {
		t.Errorf("%s: problem %v, want detail containing %q", name, r.body, detail)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func boolIdx(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mustIssueUnknownKey returns a well-formed key that no database knows.
func mustIssueUnknownKey(t *testing.T) string {
	t.Helper()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id := mustRun(t, env, "clients", "create", "--org", "Elsewhere", "--tier", "enterprise")
	return mustRun(t, env, "keys", "issue", "--client", id)
}

// eventually polls f until it returns the wanted status or 1 s passes:
// revocation and suspension must reach the api within a second.
func eventually(t *testing.T, f func() response, status int) response {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		r := f()
		if r.status == status || time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}
