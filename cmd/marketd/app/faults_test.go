package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/faultproxy"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/worker"
)

// TestPostgresFaultsAre503: a Postgres connection broken mid-query (EOF)
// and a frozen one both answer 503 with Retry-After, the frozen one within
// the request's budget (not a 500 after a driver time-out), for a request
// that reads Postgres; /usage, which needs only the quota ledger, is
// counted provisionally meanwhile; and the service answers again once
// Postgres does.
func TestPostgresFaultsAre503(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["MARKET_REQUEST_TIMEOUT"] = "2s"
	mustRun(t, env, "migrate")
	id := mustRun(t, env, "clients", "create", "--org", "Faulty", "--tier", "business")
	key := mustRun(t, env, "keys", "issue", "--client", id)

	target := faultproxy.PostgresTarget()
	proxy := faultproxy.New(t, target)
	env["MARKET_DATABASE_URL"] = faultproxy.Through(env["MARKET_DATABASE_URL"], target, proxy.Addr())
	srv := startServer(t, env, "api")
	waitReady(t, srv)
	// Fully up: the invalidation bus's first subscription empties the key
	// cache, and a key read before it would be read again, from the broken
	// Postgres, below.
	deadline := time.Now().Add(10 * time.Second)
	for _, checks := readyz(t, srv.OpsAddr()); checks["redis"] != "ok"; _, checks = readyz(t, srv.OpsAddr()) {
		if time.Now().After(deadline) {
			t.Fatalf("redis check %q after 10 s", checks["redis"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"
	if r := get(t, base+"/usage", key); r.status != http.StatusOK {
		t.Fatalf("healthy: %d %v", r.status, r.body)
	}

	// An alert's GET reads Postgres on every request (nothing cached
	// answers it); this one does not exist (404 when Postgres answers).
	const alert = "/alerts/00000000-0000-4000-8000-000000000000"
	check := func(name string) {
		t.Helper()
		start := time.Now()
		r := get(t, base+alert, key)
		took := time.Since(start)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d Retry-After=%q %v, want 503 with Retry-After", name, r.status, r.header.Get("Retry-After"), r.body)
		}
		// The budget is 2 s; 5 s is the contract's bound (a frozen
		// connection used to hold the request ~10 s, then answer 500).
		if took > 5*time.Second {
			t.Fatalf("%s: answered after %v, want within the request budget", name, took)
		}
	}
	proxy.Set("break")
	check("connection broken mid-query")
	// The quota ledger failed with it: /usage, which needs nothing else,
	// is admitted provisionally (docs/admission.md) and answers.
	if r := get(t, base+"/usage", key); r.status != http.StatusOK {
		t.Fatalf("/usage while the ledger cannot commit: %d %v, want 200 (counted provisionally)", r.status, r.body)
	}
	proxy.Set("pass")
	eventually(t, func() response { return get(t, base+alert, key) }, http.StatusNotFound)

	proxy.Set("freeze")
	check("frozen connection")
	proxy.Set("pass")
	eventually(t, func() response { return get(t, base+alert, key) }, http.StatusNotFound)
}

// readyz returns the /readyz status and checks.
func readyz(t *testing.T, opsAddr string) (string, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + opsAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Status, body.Checks
}

// TestRedisDownRequestsStayFast: with Redis frozen (connections accepted,
// nothing answered), requests are decided by the per-replica fallback
// without waiting on Redis, and once Redis answers again /readyz recovers
// by itself, without any request reaching the rate limiter.
func TestRedisDownRequestsStayFast(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id := mustRun(t, env, "clients", "create", "--org", "NoRedis", "--tier", "business")
	key := mustRun(t, env, "keys", "issue", "--client", id)

	redisURL := redistest.LeaseDB(t)
	target := strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(redisURL, "redis://"), "/", 2)[0], "")
	proxy := faultproxy.New(t, target)
	env["MARKET_REDIS_URL"] = faultproxy.Through(redisURL, target, proxy.Addr())
	srv := startServer(t, env, "api")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"
	if r := get(t, base+"/usage", key); r.status != http.StatusOK {
		t.Fatalf("healthy: %d %v", r.status, r.body)
	}

	proxy.Set("freeze")
	// The request that finds Redis gone pays for it once (≤ the 200 ms
	// time-outs of rediskeys.ClientOptions); the limiter then decides locally.
	if r := get(t, base+"/usage", key); r.status != http.StatusOK {
		t.Fatalf("first request with Redis frozen: %d %v", r.status, r.body)
	}
	// Requests further apart than the old per-second probe: each of them
	// used to wait for a Redis time-out (≥ 150 ms, rediskeys.ClientOptions' read
	// time-out), so even the fastest of them took that long. The fastest
	// one of six is compared: the slow path cannot beat the 150 ms read
	// time-out, while a fast request fails this only if a busy machine
	// stalls all six.
	fastest := time.Hour
	for i := range 6 {
		time.Sleep(1100 * time.Millisecond)
		start := time.Now()
		r := get(t, base+"/usage", key)
		fastest = min(fastest, time.Since(start))
		if r.status != http.StatusOK {
			t.Fatalf("request %d with Redis frozen: %d %v", i, r.status, r.body)
		}
	}
	if fastest >= 150*time.Millisecond {
		t.Fatalf("with Redis frozen the fastest of 6 requests took %v: they wait on Redis", fastest)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, _ := readyz(t, srv.OpsAddr()); st == "degraded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not report the Redis outage")
		}
	}

	proxy.Set("pass")
	// No request from here on: readiness must recover by itself.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, checks := readyz(t, srv.OpsAddr())
		if st == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %s %v 15 s after Redis came back, with no request", st, checks)
		}
	}
}

// TestQueuesReappearAfterFlush: after FLUSHDB on the queues' Redis,
// asynqmon lists the service's queues again without a restart.
func TestQueuesReappearAfterFlush(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["MARKET_REDIS_URL"] = redistest.LeaseDB(t)
	mustRun(t, env, "migrate")
	srv := startServer(t, env, "all")
	queues := func() []string {
		resp, err := http.Get("http://" + srv.OpsAddr() + "/asynqmon/api/queues")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body struct {
			Queues []struct {
				Queue string `json:"queue"`
			} `json:"queues"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("asynqmon queues: %d %s", resp.StatusCode, b)
		}
		var names []string
		for _, q := range body.Queues {
			names = append(names, q.Queue)
		}
		return names
	}
	waitQueues := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if len(queues()) >= len(worker.Queues) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: asynqmon lists %v, want the %d queues", what, queues(), len(worker.Queues))
			}
		}
	}
	waitQueues("after start")
	// The deployment's asynqmon is read-only: a queue pause is refused.
	resp, err := http.Post("http://"+srv.OpsAddr()+"/asynqmon/api/queues/default:pause", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST pause on the default asynqmon: %d, want 405", resp.StatusCode)
	}
	opts, err := redis.ParseURL(env["MARKET_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if q := queues(); len(q) != 0 {
		t.Logf("right after FLUSHDB asynqmon lists %v", q)
	}
	waitQueues("after FLUSHDB")
}
