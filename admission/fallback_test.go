package admission_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
)

func TestFallbackLimiterDeadRedisLimitsLocally(t *testing.T) {
	t.Parallel()
	opts, err := rediskeys.ClientOptions("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	rdb := opts.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	var logs redistest.LogBuffer
	f := admission.NewFallbackLimiter(admission.NewRollingWindowLimiter(rdb, "x:", admission.Options{}), admission.NewLocalLimiter(time.Now),
		slog.New(slog.NewTextHandler(&logs, nil)), time.Now)

	var allowed int
	for range 12 {
		d, err := f.Allow(context.Background(), "c", 5)
		if err != nil {
			t.Fatalf("Allow with Redis down: %v", err)
		}
		if d.Allowed {
			allowed++
		} else if d.RetryAfter < time.Second {
			t.Errorf("refusal without Retry-After: %+v", d)
		}
	}
	if allowed != 5 {
		t.Errorf("allowed %d with Redis down, want 5", allowed)
	}
	if !f.Degraded() {
		t.Error("not degraded with Redis down")
	}
	if n := logs.Count("redis counter outage:"); n != 1 {
		t.Errorf("logged the outage %d times, want once", n)
	}
}

func TestFallbackLimiterHealthyRedis(t *testing.T) {
	t.Parallel()
	f := admission.NewFallbackLimiter(admission.NewRollingWindowLimiter(redistest.Client(t), redistest.Prefix(t), admission.Options{}),
		admission.NewLocalLimiter(time.Now), slog.New(slog.DiscardHandler), time.Now)
	for range 3 {
		if d, err := f.Allow(context.Background(), "c", 2); err != nil || f.Degraded() {
			t.Fatalf("Allow = %+v, %v; degraded %v", d, err, f.Degraded())
		}
	}
}

// flakyConn fails every read and write while down is set, like a Redis
// that died under an open connection.
type flakyConn struct {
	net.Conn
	down *atomic.Bool
}

var errDown = errors.New("test: redis is down")

func (c *flakyConn) Read(p []byte) (int, error) {
	if c.down.Load() {
		return 0, errDown
	}
	return c.Conn.Read(p)
}

func (c *flakyConn) Write(p []byte) (int, error) {
	if c.down.Load() {
		return 0, errDown
	}
	return c.Conn.Write(p)
}

func TestFallbackLimiterRecovers(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	opts, err := rediskeys.ClientOptions(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			return nil, errDown
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &flakyConn{Conn: c, down: &down}, nil
	}
	rdb := opts.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	clock := newFakeClock()
	var logs redistest.LogBuffer
	f := admission.NewFallbackLimiter(admission.NewRollingWindowLimiter(rdb, redistest.Prefix(t), admission.Options{}), admission.NewLocalLimiter(clock.Now),
		slog.New(slog.NewTextHandler(&logs, nil)), clock.Now)
	ctx := context.Background()

	// Three requests go through Redis and are observed locally.
	for range 3 {
		if d, err := f.Allow(ctx, "c", 5); err != nil || !d.Allowed || f.Degraded() {
			t.Fatalf("healthy Allow = %+v, %v", d, err)
		}
	}
	down.Store(true)
	// The local window already holds those three: two more, then refusals.
	var allowed int
	for range 5 {
		if d, _ := f.Allow(ctx, "c", 5); d.Allowed {
			allowed++
		}
	}
	if allowed != 2 || !f.Degraded() {
		t.Fatalf("with Redis down: allowed %d (want 2), degraded %v", allowed, f.Degraded())
	}
	down.Store(false)
	// Requests never probe Redis: the policy's probe recovers the limiter
	// without any traffic.
	for deadline := time.Now().Add(10 * time.Second); f.Degraded(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not end the degradation after Redis came back")
		}
	}
	if d, err := f.Allow(ctx, "c", 5); err != nil || f.Degraded() {
		t.Fatalf("after Redis came back: %+v, %v, degraded %v", d, err, f.Degraded())
	}
	if logs.Count("redis counter outage:") != 1 || logs.Count("redis counter outage over") != 1 {
		t.Errorf("want one log line per transition, got:\n%s", logs.String())
	}
}

// TestFallbackLimiterDegradedNeverWaitsOnRedis: once Redis failed, the
// requests of a degraded limiter are decided locally without a single
// attempt to reach Redis (a frozen Redis would otherwise cost each of them
// a dial or read time-out), however long the outage lasts.
func TestFallbackLimiterDegradedNeverWaitsOnRedis(t *testing.T) {
	t.Parallel()
	opts, err := rediskeys.ClientOptions(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return nil, errDown
	}
	rdb := opts.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	clock := newFakeClock()
	f := admission.NewFallbackLimiter(admission.NewRollingWindowLimiter(rdb, redistest.Prefix(t), admission.Options{}),
		admission.NewLocalLimiter(clock.Now), slog.New(slog.DiscardHandler), clock.Now)
	if _, err := f.Allow(context.Background(), "c", 1000); err != nil || !f.Degraded() {
		t.Fatalf("first request with Redis down: %v, degraded %v", err, f.Degraded())
	}
	before := dials.Load()
	for range 50 {
		clock.Advance(2 * time.Second) // well past any probe interval
		if _, err := f.Allow(context.Background(), "c", 1000); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load() - before; n != 0 {
		t.Fatalf("a degraded limiter tried Redis %d times on the request path", n)
	}
}
