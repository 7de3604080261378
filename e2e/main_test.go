package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store/storetest"
)

// TestMain starts Postgres and Redis containers when Docker is available
// and points the test helpers at them; otherwise the local services are used.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	if dockerAvailable(ctx) {
		pg, err := tcpostgres.Run(ctx, "postgres:16-alpine", tcpostgres.WithDatabase("test"),
			tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"), tcpostgres.BasicWaitStrategies())
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: postgres container:", err)
			return 1
		}
		defer func() { _ = pg.Terminate(ctx) }()
		rd, err := tcredis.Run(ctx, "redis:7-alpine")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: redis container:", err)
			return 1
		}
		defer func() { _ = rd.Terminate(ctx) }()
		dbURL, _ := pg.ConnectionString(ctx, "sslmode=disable")
		redisURL, _ := rd.ConnectionString(ctx)
		os.Setenv("MARKET_TEST_DATABASE_URL", dbURL)
		os.Setenv("MARKET_TEST_REDIS_URL", strings.TrimRight(redisURL, "/")+"/15")
		fmt.Fprintln(os.Stderr, "e2e: using testcontainers Postgres and Redis")
	}
	return m.Run()
}

// dockerAvailable reports whether a Docker engine answers (not just a client).
func dockerAvailable(ctx context.Context) bool {
	if os.Getenv("MARKET_E2E_NO_DOCKER") != "" {
		return false
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return p.Health(ctx) == nil
}

// deployment is one marketd environment: its own schema and Redis database.
type deployment struct {
	t   *testing.T
	env map[string]string
}

func newDeployment(t *testing.T, extra map[string]string) *deployment {
	t.Helper()
	env := map[string]string{
		"MARKET_DATABASE_URL":    storetest.URLWithSchema(storetest.CreateSchema(t)),
		"MARKET_REDIS_URL":       redistest.LeaseDB(t),
		"MARKET_HTTP_ADDR":       "127.0.0.1:0",
		"MARKET_OPS_ADDR":        "127.0.0.1:0",
		"MARKET_LOG_LEVEL":       "warn",
		"MARKET_TICKER_INTERVAL": "2s",
		"MARKET_CANDLE_INTERVAL": "30s",
		"MARKET_SCORE_INTERVAL":  "5s",
		// The statistics backtest replays the scorer over every asset's
		// daily history: seconds of CPU, minutes under -race. It is tested
		// in worker and api; the deployments here leave it off.
		"MARKET_STATS_INTERVAL": "0",
	}
	for k, v := range extra {
		env[k] = v
	}
	d := &deployment{t: t, env: env}
	d.cli("migrate")
	return d
}

func (d *deployment) cli(args ...string) string {
	d.t.Helper()
	var out, errb bytes.Buffer
	m := &app.Main{Getenv: func(k string) string { return d.env[k] }, Stdout: &out, Stderr: &errb}
	if code := m.Run(context.Background(), args); code != 0 {
		d.t.Fatalf("marketd %v: exit %d: %s", args, code, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// start runs a serving role until the test ends and returns its public base URL.
func (d *deployment) start(role string) (base, ops string) {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var errb lockedBuffer
	m := &app.Main{Getenv: func(k string) string { return d.env[k] }, Stdout: io.Discard, Stderr: &errb}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{role}) }()
	d.t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				d.t.Errorf("marketd %s exited %d: %s", role, code, errb.String())
			}
		case <-time.After(30 * time.Second):
			d.t.Errorf("marketd %s did not stop within 30 s", role)
		}
	})
	select {
	case <-m.Listening():
	case code := <-done:
		d.t.Fatalf("marketd %s exited %d: %s", role, code, errb.String())
	}
	ops = "http://" + m.OpsAddr()
	poll(d.t, 15*time.Second, func() string {
		resp, err := http.Get(ops + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "readyz: " + resp.Status
		}
		return ""
	})
	if m.HTTPAddr() == "" {
		return "", ops
	}
	return "http://" + m.HTTPAddr() + "/api/v1/public", ops
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// getJSON GETs url with key and decodes the body into out (if non-nil).
func getJSON(t *testing.T, url, key string, out any) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var problem map[string]any
		_ = json.Unmarshal(body, &problem)
		return resp.StatusCode, problem
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %q", url, err, body)
		}
	}
	return resp.StatusCode, nil
}

// poll retries f every 100 ms until it returns "" or the timeout passes,
// and fails with f's last complaint.
func poll(t *testing.T, timeout time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
