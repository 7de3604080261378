package stream_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/stream"
)

// The stream slots under the Redis-backed counters' outage policy, on a
// real redis-server of the test's own, frozen (SIGSTOP) and then killed
// (SIGKILL, state lost): the replica counts its own streams against the
// cap, the outage is logged once when it starts and once when it ends,
// and once Redis answers the next refresh registers the streams again.
func TestStreamSlotsFollowTheOutagePolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	opts, err := rediskeys.ClientOptions(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := opts.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	var logs redistest.LogBuffer
	s := stream.NewSlots(rdb, "p:", time.Hour, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	for i, fault := range []struct {
		name         string
		break_, heal func()
	}{
		{"paused", srv.Pause, srv.Resume},
		{"killed", srv.Kill, srv.Start},
	} {
		client := fault.name
		first := mustAcquire(t, s, client, 3)
		fault.break_()
		second, third := mustAcquire(t, s, client, 3), mustAcquire(t, s, client, 3)
		if _, ok := s.Acquire(ctx, client, 3); ok || !s.Degraded() {
			t.Fatalf("%s: a fourth stream of three admitted during the outage (degraded %v)", fault.name, s.Degraded())
		}
		s.RefreshNow() // no call to Redis: every stream keeps its place
		if alive(first, second, third) != 3 {
			t.Fatalf("%s: a refresh during the outage took a stream's place", fault.name)
		}
		fault.heal()
		waitUntil(t, func() bool { return !s.Degraded() })
		s.RefreshNow()
		if n, err := s.Open(ctx, client); err != nil || n != 3 {
			t.Fatalf("%s: %d streams registered in Redis after the outage (%v), want 3", fault.name, n, err)
		}
		if n, m := logs.Count("redis counter outage:"), logs.Count("redis counter outage over"); n != i+1 || m != i+1 {
			t.Fatalf("%s: outage logged %d times, its end %d times; want %d each:\n%s", fault.name, n, m, i+1, logs.String())
		}
		first.Release()
		second.Release()
		third.Release()
	}
}
