package worker_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/worker"
)

// monitor serves the asynqmon UI of a Redis database holding one queued
// task, and returns a function telling whether that queue is paused.
func monitor(t *testing.T, o worker.MonitorOptions) (base string, paused func() bool) {
	t.Helper()
	url := redistest.LeaseDB(t)
	opt, err := asynq.ParseRedisURI(url)
	if err != nil {
		t.Fatal(err)
	}
	c := asynq.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	if _, err := c.Enqueue(asynq.NewTask("noop", nil), asynq.Queue(worker.QueueDefault)); err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { ins.Close() })
	h, closeMon, err := worker.Monitor(url, "/asynqmon", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeMon)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/asynqmon", func() bool {
		info, err := ins.GetQueueInfo(worker.QueueDefault)
		if err != nil {
			t.Fatal(err)
		}
		return info.Paused
	}
}

func do(t *testing.T, method, url string, header http.Header) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestMonitorReadOnlyByDefault: the default asynqmon shows queues but
// refuses a write (a queue pause), whoever asks.
func TestMonitorReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	base, paused := monitor(t, worker.MonitorOptions{})
	if code := do(t, http.MethodGet, base+"/api/queues", nil); code != http.StatusOK {
		t.Fatalf("GET queues: %d", code)
	}
	pause := base + "/api/queues/" + worker.QueueDefault + ":pause"
	if code := do(t, http.MethodPost, pause, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST pause on a read-only asynqmon: %d, want 405", code)
	}
	if paused() {
		t.Fatal("a read-only asynqmon paused the queue")
	}
}

// TestMonitorWritableNeedsToken: writable, every request needs the token
// (basic-auth password or bearer), and a cross-site write is refused even
// with it.
func TestMonitorWritableNeedsToken(t *testing.T) {
	t.Parallel()
	if _, _, err := worker.Monitor("redis://127.0.0.1:6379/0", "/asynqmon", worker.MonitorOptions{Writable: true}); err == nil {
		t.Fatal("a writable asynqmon without a token was accepted")
	}
	const token = "0123456789abcdef-operator"
	base, paused := monitor(t, worker.MonitorOptions{Writable: true, Token: token})
	pause := base + "/api/queues/" + worker.QueueDefault + ":pause"
	basic := func(pw string) http.Header {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.SetBasicAuth("operator", pw)
		return r.Header
	}
	for name, h := range map[string]http.Header{
		"no token":    nil,
		"wrong token": basic(strings.Repeat("x", len(token))),
		"prefix":      {"Authorization": {"Bearer " + token[:8]}},
	} {
		if code := do(t, http.MethodPost, pause, h); code != http.StatusUnauthorized {
			t.Errorf("POST pause with %s: %d, want 401", name, code)
		}
		if code := do(t, http.MethodGet, base+"/api/queues", h); code != http.StatusUnauthorized {
			t.Errorf("GET queues with %s: %d, want 401", name, code)
		}
	}
	if paused() {
		t.Fatal("paused without the token")
	}
	crossSite := basic(token)
	crossSite.Set("Sec-Fetch-Site", "cross-site")
	if code := do(t, http.MethodPost, pause, crossSite); code != http.StatusForbidden {
		t.Errorf("cross-site POST pause with the token: %d, want 403", code)
	}
	if paused() {
		t.Fatal("paused by a cross-site request")
	}
	if code := do(t, http.MethodPost, pause, basic(token)); code/100 != 2 {
		t.Fatalf("POST pause with the token: %d", code)
	}
	if !paused() {
		t.Fatal("POST pause with the token did not pause the queue")
	}
	if code := do(t, http.MethodGet, base+"/api/queues", http.Header{"Authorization": {"Bearer " + token}}); code != http.StatusOK {
		t.Fatalf("GET queues with the bearer token: %d", code)
	}
}
