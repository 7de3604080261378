package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/admission"
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
	sub := rdb.Subscribe(ctx, admission.NewSandboxBus(rdb, "", nil).Channel())
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
		var inv admission.Invalidation
		if json.Unmarshal([]byte(msg.Payload), &inv) == nil && inv.Kind == admission.InvalidateDataKind &&
			strings.HasPrefix(inv.ID, "tickers") {
			return
		}
	}
}
