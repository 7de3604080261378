package admission_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
)

// The rate windows under the Redis-backed counters' outage policy, on a
// real redis-server of the test's own: frozen (SIGSTOP) and then killed
// (SIGKILL), each outage answered by the replica's own window, logged
// once when it starts and once when it ends, and over without traffic as
// soon as Redis answers again (the counts shared again).
func TestRateWindowFollowsTheOutagePolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	opts, err := rediskeys.ClientOptions(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := opts.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	var logs redistest.LogBuffer
	newLimiter := func(logger *slog.Logger) *admission.FallbackLimiter {
		return admission.NewFallbackLimiter(admission.NewRollingWindowLimiter(rdb, "p:", admission.Options{}),
			admission.NewLocalLimiter(time.Now), logger, time.Now)
	}
	f := newLimiter(slog.New(slog.NewTextHandler(&logs, nil)))
	other := newLimiter(slog.New(slog.DiscardHandler)) // another replica
	ctx := context.Background()
	allow := func(l *admission.FallbackLimiter, client string, n, limit int) (allowed int) {
		t.Helper()
		for range n {
			d, err := l.Allow(ctx, client, limit)
			if err != nil {
				t.Fatalf("Allow: %v (a Redis outage must never fail a request)", err)
			}
			if d.Allowed {
				allowed++
			}
		}
		return allowed
	}
	waitRecovered := func() {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); f.Degraded(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the outage did not end after Redis came back")
			}
		}
	}

	for i, fault := range []struct {
		name         string
		break_, heal func()
	}{
		{"paused", srv.Pause, srv.Resume},
		{"killed", srv.Kill, srv.Start},
	} {
		client := fault.name
		if got := allow(f, client, 3, 5); got != 3 || f.Degraded() {
			t.Fatalf("%s: healthy: allowed %d of 3, degraded %v", fault.name, got, f.Degraded())
		}
		fault.break_()
		// The replica's own window already holds the three: two more.
		if got := allow(f, client, 6, 5); got != 2 || !f.Degraded() {
			t.Fatalf("%s: allowed %d during the outage (want 2, the rest of the replica's own window), degraded %v", fault.name, got, f.Degraded())
		}
		fault.heal()
		waitRecovered()
		// Shared again: the window in Redis decides (the three booked
		// before a freeze are still there, and the request cut off by it
		// may have been recorded when Redis thawed; a restarted Redis
		// without persistence starts from zero), and another replica sees
		// what this one books.
		got := allow(f, client, 6, 5)
		if fault.name == "paused" && (got < 1 || got > 2) || fault.name == "killed" && got != 5 {
			t.Fatalf("%s: after the outage allowed %d of 6 from the shared window", fault.name, got)
		}
		if got := allow(other, client, 3, 5); got != 0 {
			t.Fatalf("%s: after the outage another replica was allowed %d beyond the shared limit", fault.name, got)
		}
		if n, m := logs.Count("redis counter outage:"), logs.Count("redis counter outage over"); n != i+1 || m != i+1 {
			t.Fatalf("%s: outage logged %d times, its end %d times; want %d each:\n%s", fault.name, n, m, i+1, logs.String())
		}
	}
}
