package admission_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/redistest"
)

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

func TestFallbackLimiterDeadRedisLimitsLocally(t *testing.T) {
	t.Parallel()
	opts, err := admission.RedisOptions("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	var logs logBuffer
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
	if n := logs.count("redis unreachable"); n != 1 {
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
	opts, err := admission.RedisOptions(redistest.URL())
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
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	clock := newFakeClock()
	var logs logBuffer
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
	if f.Allow(ctx, "c", 5); !f.Degraded() {
		t.Fatal("probed Redis before the probe interval passed")
	}
	clock.Advance(time.Second)
	if d, err := f.Allow(ctx, "c", 5); err != nil || f.Degraded() {
		t.Fatalf("after Redis came back: %+v, %v, degraded %v", d, err, f.Degraded())
	}
	if logs.count("redis unreachable") != 1 || logs.count("redis answers again") != 1 {
		t.Errorf("want one log line per transition, got:\n%s", logs.buf.String())
	}
}
