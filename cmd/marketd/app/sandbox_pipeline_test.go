package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store/storetest"
)

// sandboxEnv is a deployment with a sandbox: the live schema, the
// sandbox's (migrated), and the env of a separate worker and scheduler
// filling the sandbox (MARKET_SANDBOX_PIPELINE, queues in a Redis
// database of their own).
func sandboxEnv(t *testing.T) (live, pipeline map[string]string) {
	t.Helper()
	live = testEnv(t)
	schema := storetest.NewSchemaName() // created by migrate
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), storetest.DatabaseURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	live["MARKET_SANDBOX_DATABASE_URL"] = storetest.URLWithSchema(schema)
	mustRun(t, live, "migrate")
	pipeline = map[string]string{}
	for k, v := range live {
		pipeline[k] = v
	}
	for k, v := range map[string]string{
		"MARKET_DATABASE_URL":         live["MARKET_SANDBOX_DATABASE_URL"],
		"MARKET_SANDBOX_DATABASE_URL": "",
		"MARKET_SANDBOX_PIPELINE":     "true",
		"MARKET_REDIS_URL":            redistest.LeaseDB(t),
		"MARKET_FEEDS":                "synthetic",
		"MARKET_TICKER_INTERVAL":      "1s",
		"MARKET_MAX_CANDLE_SYMBOLS":   "3",
		"MARKET_STATS_INTERVAL":       "0",
	} {
		pipeline[k] = v
	}
	return live, pipeline
}

// A sandbox pipeline's worker announces its writes on the sandbox's
// invalidation channel (where the api's sandbox cache listens), whatever
// Redis database its queues are in: pub/sub spans them, and the live
// channel would drop every live replica's cached data on each sandbox write.
func TestSandboxPipelineAnnouncesOnTheSandboxChannel(t *testing.T) {
	t.Parallel()
	_, pipeline := sandboxEnv(t)
	opts, err := redis.ParseURL(pipeline["MARKET_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := rdb.Subscribe(ctx, invalidation.NewSandboxBus(rdb, "", nil).Channel())
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	startServer(t, pipeline, "worker")
	startServer(t, pipeline, "scheduler")
	for {
		msg, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("no write announcement on the sandbox's channel: %v", err)
		}
		var inv invalidation.Message
		if json.Unmarshal([]byte(msg.Payload), &inv) == nil && inv.Kind == invalidation.InvalidateDataKind &&
			strings.HasPrefix(inv.ID, "tickers") {
			return
		}
	}
}

// `marketd all` with a sandbox fills it too (MARKET_SANDBOX_REDIS_URL): a
// sandbox key's stream carries the sandbox's synthetic screener events
// besides its own pushes, any synthetic verdict_changed event among them
// has a data id sbx_…, the sandbox's reports are scored, and the
// in-process sandbox worker announces its writes on the sandbox's channel.
// Without a pipeline of its own, nothing but the pushes ever reached it.
// (Whether the synthetic walk changes a verdict within the test depends on
// the clock, so a synthetic verdict change is checked when one comes, and
// the scoring by the sandbox's reports.)
func TestMarketdAllFillsTheSandboxAndItsStream(t *testing.T) {
	t.Parallel()
	env, pipeline := sandboxEnv(t)
	for k, v := range map[string]string{
		"MARKET_REDIS_URL":          redistest.LeaseDB(t), // asynq queues of its own
		"MARKET_SANDBOX_REDIS_URL":  pipeline["MARKET_REDIS_URL"],
		"MARKET_FEEDS":              "synthetic",
		"MARKET_TICKER_INTERVAL":    "1s",
		"MARKET_CANDLE_INTERVAL":    "2s",
		"MARKET_SCORE_INTERVAL":     "2s",
		"MARKET_STATS_INTERVAL":     "0",
		"MARKET_MAX_CANDLE_SYMBOLS": "3",
	} {
		env[k] = v
	}
	clientID := mustRun(t, env, "clients", "create", "--org", "Sandbox Co", "--tier", "business")
	sandboxKey := mustRun(t, env, "keys", "issue", "--client", clientID, "--sandbox")

	opts, err := redis.ParseURL(env["MARKET_SANDBOX_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	announced := rdb.Subscribe(ctx, invalidation.NewSandboxBus(rdb, "", nil).Channel())
	defer announced.Close()
	if _, err := announced.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	srv := startServer(t, env, "all")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stream", nil)
	req.Header.Set("X-API-Key", sandboxKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	pushReq, _ := http.NewRequest(http.MethodPost, base+"/sandbox/verdict-change",
		strings.NewReader(`{"market":"forex","symbol":"EUR_USD","new_verdict":"growth"}`))
	pushReq.Header.Set("X-API-Key", sandboxKey)
	pushReq.Header.Set("Content-Type", "application/json")
	pushResp, err := http.DefaultClient.Do(pushReq)
	if err != nil || pushResp.StatusCode != http.StatusAccepted {
		t.Fatalf("push: %v %v", pushResp, err)
	}
	pushResp.Body.Close()

	var screener, push bool
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for !(screener && push) && sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			ID      string `json:"id"`
			Event   string `json:"event"`
			Sandbox bool   `json:"sandbox"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event data %q: %v", line, err)
		}
		if ev.Event == "verdict_changed" && !ev.Sandbox && !strings.HasPrefix(ev.ID, "sbx_") {
			t.Errorf("a synthetic verdict change's id %q lacks the sbx_ prefix", ev.ID)
		}
		screener = screener || ev.Event == "screener"
		push = push || (ev.Event == "verdict_changed" && ev.Sandbox)
	}
	if !(screener && push) {
		t.Fatalf("the sandbox stream ended (%v) with screener %v, push %v", sc.Err(), screener, push)
	}
	for {
		listReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/analytics/crypto/list", nil)
		listReq.Header.Set("X-API-Key", sandboxKey)
		listResp, err := http.DefaultClient.Do(listReq)
		if err != nil {
			t.Fatalf("the sandbox's analytics were never scored: %v", err)
		}
		var items []json.RawMessage
		_ = json.NewDecoder(listResp.Body).Decode(&items)
		listResp.Body.Close()
		if listResp.StatusCode == http.StatusOK && len(items) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		msg, err := announced.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("no write announcement on the sandbox's channel: %v", err)
		}
		var inv invalidation.Message
		if json.Unmarshal([]byte(msg.Payload), &inv) == nil && inv.Kind == invalidation.InvalidateDataKind {
			return
		}
	}
}
