package admission_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/redistest"
)

// countingScripter counts the script calls that reach Redis, and holds the
// first one back until release is closed so that the requests arriving
// meanwhile queue up behind it.
type countingScripter struct {
	*redis.Client
	calls   atomic.Int64
	hold    atomic.Bool // the next call waits for release
	release chan struct{}
}

func (c *countingScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	c.calls.Add(1)
	if c.hold.CompareAndSwap(true, false) {
		<-c.release
	}
	return c.Client.EvalSha(ctx, sha1, keys, args...)
}

func (c *countingScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.calls.Add(1)
	return c.Client.Eval(ctx, script, keys, args...)
}

// 200 requests at once over two limiter instances (two replicas) with
// N=30: exactly 30 are admitted, and the admitted ones saw 29, 28, ..., 0
// requests left, each value exactly once, though they were decided in
// batches.
func TestRollingWindowBatchesAreExact(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	replicas := []*admission.RollingWindowLimiter{
		admission.NewRollingWindowLimiter(redistest.Client(t), prefix, admission.Options{}),
		admission.NewRollingWindowLimiter(redistest.Client(t), prefix, admission.Options{}),
	}
	decisions := allowConcurrently(t, replicas, "batched", 30, 200)
	remaining := map[int]int{}
	var allowed int
	for _, d := range decisions {
		if d.Limit != 30 {
			t.Errorf("Limit = %d, want 30", d.Limit)
		}
		if !d.Allowed {
			if d.Remaining != 0 || d.RetryAfter < time.Second || d.RetryAfter > time.Minute || d.RetryAfter%time.Second != 0 {
				t.Errorf("refusal %+v: want Remaining 0 and whole-second RetryAfter in [1s, 60s]", d)
			}
			if d.Reset != d.RetryAfter {
				t.Errorf("refusal %+v: Reset differs from RetryAfter with a full window", d)
			}
			continue
		}
		allowed++
		remaining[d.Remaining]++
		if d.RetryAfter != 0 || d.Reset < time.Second || d.Reset > time.Minute {
			t.Errorf("admission %+v: want RetryAfter 0 and Reset in [1s, 60s]", d)
		}
	}
	if allowed != 30 {
		t.Fatalf("two replicas admitted %d of 200, want exactly 30", allowed)
	}
	for r := range 30 {
		if remaining[r] != 1 {
			t.Errorf("Remaining %d seen %d times, want once (all: %v)", r, remaining[r], remaining)
		}
	}
	rdb := redistest.Client(t)
	if n, err := rdb.ZCard(context.Background(), logKey(prefix, "batched")).Result(); err != nil || n != 30 {
		t.Errorf("log holds %d entries (%v), want 30", n, err)
	}
}

// Requests that arrive while a client's script call is in Redis are sent
// together as one call, decided in arrival order.
func TestRollingWindowBatchesConcurrentRequests(t *testing.T) {
	t.Parallel()
	rdb, l := heldLimiter(t)
	ctx := context.Background()

	const n = 100
	out := make([]admission.Decision, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := l.Allow(ctx, "c", 1000)
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			out[i] = d
		})
	}
	// The first call is held back until the others have queued up.
	time.Sleep(200 * time.Millisecond)
	close(rdb.release)
	wg.Wait()
	if calls := rdb.calls.Load(); calls > 3 {
		t.Errorf("%d requests took %d script calls, want them batched into 2", n, calls)
	}
	seen := map[int]bool{}
	for _, d := range out {
		if !d.Allowed || seen[d.Remaining] {
			t.Errorf("decision %+v: want each admitted with a Remaining of its own", d)
		}
		seen[d.Remaining] = true
	}
	for r := 1000 - n; r < 1000; r++ {
		if !seen[r] {
			t.Errorf("no request saw Remaining %d", r)
		}
	}
}

// A batch mixing limits (a tier change while requests are queued) decides
// each request with its own limit, in arrival order.
func TestRollingWindowBatchMixedLimits(t *testing.T) {
	t.Parallel()
	rdb, l := heldLimiter(t)
	ctx := context.Background()
	// The first request occupies the flusher; then 5 requests with limit 4
	// and 5 with limit 8 queue up in that order.
	first := make(chan admission.Decision, 1)
	go func() {
		d, _ := l.Allow(ctx, "c", 4)
		first <- d
	}()
	for rdb.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	out := make([]admission.Decision, 10)
	for i := range 10 {
		limit := 4
		if i >= 5 {
			limit = 8
		}
		wg.Go(func() {
			d, err := l.Allow(ctx, "c", limit)
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			out[i] = d
		})
		time.Sleep(10 * time.Millisecond) // arrival order
	}
	close(rdb.release)
	wg.Wait()
	if d := <-first; !d.Allowed || d.Remaining != 3 {
		t.Fatalf("first request: %+v", d)
	}
	if calls := rdb.calls.Load(); calls != 2 {
		t.Errorf("%d script calls, want 2", calls)
	}
	// Limit 4: 3 more fit (Remaining 2, 1, 0), 2 refused. Limit 8: 4 more
	// fit (Remaining 3, 2, 1, 0), 1 refused.
	want := []struct {
		allowed   bool
		remaining int
	}{{true, 2}, {true, 1}, {true, 0}, {false, 0}, {false, 0}, {true, 3}, {true, 2}, {true, 1}, {true, 0}, {false, 0}}
	for i, w := range want {
		if out[i].Allowed != w.allowed || out[i].Remaining != w.remaining {
			t.Errorf("request %d: %+v, want allowed %v remaining %d", i, out[i], w.allowed, w.remaining)
		}
		if !out[i].Allowed && out[i].RetryAfter < time.Second {
			t.Errorf("request %d refused without RetryAfter: %+v", i, out[i])
		}
	}
}

// heldLimiter returns a limiter whose script is loaded (so no NOSCRIPT
// retry adds a call) and whose next script calls are held until released.
func heldLimiter(t *testing.T) (*countingScripter, *admission.RollingWindowLimiter) {
	t.Helper()
	rdb := &countingScripter{Client: redistest.Client(t), release: make(chan struct{})}
	l := admission.NewRollingWindowLimiter(rdb, redistest.Prefix(t), admission.Options{})
	if _, err := l.Allow(context.Background(), "warm", 5); err != nil {
		t.Fatal(err)
	}
	rdb.calls.Store(0)
	rdb.hold.Store(true)
	return rdb, l
}
