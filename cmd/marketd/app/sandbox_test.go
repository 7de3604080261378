package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/store/storetest"
)

// The sandbox end to end through marketd: migrate creates and migrates the
// sandbox's schema, keys issue --sandbox prints a msk_test_ key, the api
// serves it from the sandbox's database, and a push and the sandbox's own
// events reach its stream.
func TestSandboxKeyThroughMarketd(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	sandboxSchema := storetest.NewSchemaName() // created by migrate
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), storetest.DatabaseURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+sandboxSchema+" CASCADE")
	})
	env["MARKET_SANDBOX_DATABASE_URL"] = storetest.URLWithSchema(sandboxSchema)
	env["MARKET_FEEDS"] = "okx" // the live data; the sandbox's is the synthetic feed's, every combination
	_, errs, code := run(t, env, "migrate")
	if code != 0 || !strings.Contains(errs, "sandbox: applied") {
		t.Fatalf("migrate: exit %d: %s", code, errs)
	}
	clientID := mustRun(t, env, "clients", "create", "--org", "Sandbox Co", "--tier", "business")
	live := mustRun(t, env, "keys", "issue", "--client", clientID)
	sandbox := mustRun(t, env, "keys", "issue", "--client", clientID, "--sandbox")
	if !strings.HasPrefix(sandbox, "msk_test_") || strings.HasPrefix(live, "msk_test_") {
		t.Fatalf("keys: live %q, sandbox %q", live, sandbox)
	}
	if out := mustRun(t, env, "keys", "list", "--client", clientID); !strings.Contains(out, "msk_test_") {
		t.Fatalf("keys list does not show the sandbox key's prefix: %s", out)
	}
	srv := startServer(t, env, "api")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"

	if r := get(t, base+"/usage", sandbox); r.status != 200 || r.body["used_this_month"] != 0.0 {
		t.Fatalf("sandbox usage: %d %v, want 200 and nothing counted", r.status, r.body)
	}
	// A combination the live feeds do not serve is a 404 for a live key;
	// the sandbox serves it (nothing ingested in this sandbox yet: 503).
	if r := get(t, base+"/screener/crypto/binance/spot", live); r.status != http.StatusNotFound ||
		!strings.Contains(fmt.Sprint(r.body["detail"]), "available for crypto: okx/spot, okx/perpetual") {
		t.Errorf("live key, unserved combination: %d %v, want 404 listing okx's", r.status, r.body)
	}
	if r := get(t, base+"/screener/crypto/binance/spot", sandbox); r.status != http.StatusServiceUnavailable {
		t.Errorf("sandbox key: %d %v, want 503 (served by the sandbox, nothing ingested)", r.status, r.body)
	}
	// Served by the sandbox server, over a sandbox with nothing scored yet
	// (no sandbox worker here), not the 503 of a deployment without one.
	if r := get(t, base+"/analytics/crypto/BTC_USDT", sandbox); r.status != http.StatusNotFound {
		t.Fatalf("sandbox report: %d %v, want 404 (nothing scored in the sandbox)", r.status, r.body)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/stream", nil)
	req.Header.Set("X-API-Key", sandbox)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("sandbox stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	push := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/sandbox/verdict-change",
			strings.NewReader(`{"market":"forex","symbol":"EUR_USD","new_verdict":"growth"}`))
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := push(live); status != http.StatusForbidden {
		t.Fatalf("live key push: %d, want 403", status)
	}
	if status := push(sandbox); status != http.StatusAccepted {
		t.Fatalf("sandbox push: %d, want 202", status)
	}
	await := func(what string, match func(line string) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatal("the stream ended")
				}
				if strings.HasPrefix(line, "data: ") && match(line) {
					return
				}
			case <-timeout:
				t.Fatalf("%s did not reach the sandbox stream within 10 s", what)
			}
		}
	}
	await("the push", func(line string) bool {
		return strings.Contains(line, `"symbol":"EUR_USD"`) && strings.Contains(line, `"sandbox":true`)
	})
	// A verdict change of the sandbox's own scorer (its schema's log) reaches
	// the sandbox key's stream too: the api runs a hub over the sandbox.
	conn, err := pgx.Connect(ctx, storetest.URLWithSchema(sandboxSchema))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('forex', 'GBP_USD', 'neutral', 'decline', -30, clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	await("the sandbox's synthetic verdict change", func(line string) bool {
		return strings.Contains(line, `"symbol":"GBP_USD"`) && !strings.Contains(line, `"sandbox":true`)
	})
}
