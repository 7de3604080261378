package admission_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/redistest"
)

// logKey is where RollingWindowLimiter keeps a client's log.
func logKey(prefix, clientID string) string { return prefix + "ratelimit:{" + clientID + "}" }

func redisNow(t *testing.T, rdb *redis.Client) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// allowConcurrently sends n requests at once, spread over the limiters,
// and returns every decision.
func allowConcurrently(t *testing.T, ls []*admission.RollingWindowLimiter, clientID string, limit, n int) []admission.Decision {
	t.Helper()
	var wg sync.WaitGroup
	out := make([]admission.Decision, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			d, err := ls[i%len(ls)].Allow(context.Background(), clientID, limit)
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			out[i] = d
		})
	}
	close(start)
	wg.Wait()
	return out
}

func TestRollingWindowExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	l := admission.NewRollingWindowLimiter(rdb, prefix, admission.Options{})
	ctx := context.Background()

	before := redisNow(t, rdb)
	decisions := allowConcurrently(t, []*admission.RollingWindowLimiter{l}, "c1", 30, 100)
	var allowed int
	var maxRetry time.Duration
	for _, d := range decisions {
		if d.Limit != 30 {
			t.Errorf("Limit = %d, want 30", d.Limit)
		}
		if d.Allowed {
			allowed++
			if d.RetryAfter != 0 {
				t.Errorf("allowed decision has RetryAfter %v", d.RetryAfter)
			}
			continue
		}
		if d.Remaining != 0 || d.RetryAfter < time.Second || d.RetryAfter > time.Minute || d.RetryAfter%time.Second != 0 {
			t.Errorf("refusal %+v: want Remaining 0 and whole-second RetryAfter in [1s, 60s]", d)
		}
		maxRetry = max(maxRetry, d.RetryAfter)
	}
	if allowed != 30 {
		t.Fatalf("allowed %d of 100, want exactly 30", allowed)
	}

	// Retry-After is true to the oldest entry: it is when that entry leaves
	// the window, rounded up, measured on the Redis clock.
	oldest, err := rdb.ZRangeWithScores(ctx, logKey(prefix, "c1"), 0, 0).Result()
	if err != nil || len(oldest) != 1 {
		t.Fatalf("oldest entry: %v, %v", oldest, err)
	}
	leaves := time.UnixMicro(int64(oldest[0].Score)).Add(admission.Window)
	after := redisNow(t, rdb)
	d, err := l.Allow(ctx, "c1", 30)
	if err != nil || d.Allowed {
		t.Fatalf("31st request = %+v, %v; want refused", d, err)
	}
	for _, ra := range []time.Duration{d.RetryAfter, maxRetry} {
		if ra < leaves.Sub(redisNow(t, rdb)) || ra >= leaves.Sub(before)+time.Second {
			t.Errorf("RetryAfter %v not true to the oldest entry leaving in %v..%v", ra, leaves.Sub(after), leaves.Sub(before))
		}
	}
	if d.Reset != d.RetryAfter {
		t.Errorf("Reset %v, want %v when the window is full", d.Reset, d.RetryAfter)
	}
}

func TestRollingWindowSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	replicas := []*admission.RollingWindowLimiter{
		admission.NewRollingWindowLimiter(redistest.Client(t), prefix, admission.Options{}),
		admission.NewRollingWindowLimiter(redistest.Client(t), prefix, admission.Options{}),
	}
	var allowed int
	for _, d := range allowConcurrently(t, replicas, "shared", 30, 80) {
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 30 {
		t.Errorf("two replicas admitted %d, want 30 in all", allowed)
	}
	// Another client has a window of its own.
	if d, err := replicas[1].Allow(context.Background(), "other", 30); err != nil || !d.Allowed || d.Remaining != 29 {
		t.Errorf("other client: %+v, %v", d, err)
	}
}

// seedLog fills a client's log with entries stamped at the given offsets
// from the Redis clock's now.
func seedLog(t *testing.T, rdb *redis.Client, key string, offsets []time.Duration) {
	t.Helper()
	now := redisNow(t, rdb)
	members := make([]redis.Z, len(offsets))
	for i, off := range offsets {
		members[i] = redis.Z{Score: float64(now.Add(off).UnixMicro()), Member: fmt.Sprintf("seed%d", i)}
	}
	if err := rdb.ZAdd(context.Background(), key, members...).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Expire(context.Background(), key, time.Minute)
}

// seedLease adds a lease of weight entries stamped at offset from the
// Redis clock's now, as the script stores one.
func seedLease(t *testing.T, rdb *redis.Client, key string, offset time.Duration, weight int) {
	t.Helper()
	ctx := context.Background()
	stamp := float64(redisNow(t, rdb).Add(offset).UnixMicro())
	if err := rdb.ZAdd(ctx, key+":leases", redis.Z{Score: stamp, Member: "seedL"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key+":weights", "seedL", weight).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Expire(ctx, key+":leases", time.Minute)
	rdb.Expire(ctx, key+":weights", time.Minute)
}

// windowCount is what the window at key counts: its single entries and the
// weights of its leases.
func windowCount(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	ctx := context.Background()
	n, err := rdb.ZCard(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := rdb.HVals(ctx, key+":weights").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		v, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// A lease stands for its weight in entries at its stamp: the entry whose
// departure frees a slot may be inside a lease, or a single entry before
// or after it, counted in time order across both.
func TestRollingWindowBlockerAcrossLeases(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	l := admission.NewRollingWindowLimiter(rdb, prefix, admission.Options{})
	// Five entries 50..46 s ago, a lease of 20 stamped 45 s ago, fifteen
	// entries 44..30 s ago, and one lease 61 s old that no longer counts:
	// 40 in the window. The oldest leaves in 10 s.
	for _, c := range []struct {
		limit int
		wait  time.Duration // until the entry at position 40-limit leaves
	}{
		{limit: 38, wait: 12 * time.Second}, // position 2: the third single entry
		{limit: 30, wait: 15 * time.Second}, // position 10: inside the lease
		{limit: 16, wait: 15 * time.Second}, // position 24: the lease's last entry
		{limit: 15, wait: 16 * time.Second}, // position 25: the first entry after the lease
		{limit: 1, wait: 30 * time.Second},  // position 39: the newest
	} {
		client := fmt.Sprintf("c%d", c.limit)
		key := logKey(prefix, client)
		offsets := make([]time.Duration, 0, 20)
		for s := 50; s >= 46; s-- {
			offsets = append(offsets, -time.Duration(s)*time.Second)
		}
		for s := 44; s >= 30; s-- {
			offsets = append(offsets, -time.Duration(s)*time.Second)
		}
		seedLog(t, rdb, key, offsets)
		seedLease(t, rdb, key, -45*time.Second, 20)
		old := float64(redisNow(t, rdb).Add(-61 * time.Second).UnixMicro())
		rdb.ZAdd(context.Background(), key+":leases", redis.Z{Score: old, Member: "oldL"})
		rdb.HSet(context.Background(), key+":weights", "oldL", 500)
		d, err := l.Allow(context.Background(), client, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		want := admission.Decision{Allowed: false, Limit: c.limit, Remaining: 0, RetryAfter: c.wait, Reset: 10 * time.Second}
		if d != want {
			t.Errorf("limit %d: decision %+v, want %+v", c.limit, d, want)
		}
		if n := windowCount(t, rdb, key); n != 40 {
			t.Errorf("limit %d: the window counts %d, want 40 (the 61 s old lease left)", c.limit, n)
		}
	}
}

func TestRollingWindowRetryAfterFreesASlot(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	l := admission.NewRollingWindowLimiter(rdb, prefix, admission.Options{})
	ctx := context.Background()
	// Three requests 58.8 s ago, 50 s ago and 10 s ago; an entry 61 s old
	// is outside the window and must not count.
	seedLog(t, rdb, logKey(prefix, "c"), []time.Duration{-61 * time.Second, -58800 * time.Millisecond, -50 * time.Second, -10 * time.Second})
	d, err := l.Allow(ctx, "c", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := admission.Decision{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 2 * time.Second, Reset: 2 * time.Second}
	if d != want {
		t.Fatalf("decision %+v, want %+v", d, want)
	}
	// Polling at the pace of a client: the oldest entry leaves within ~1.2 s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err = l.Allow(ctx, "c", 3)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The oldest counted entry is now the one seeded 50 s ago.
	if !d.Allowed || d.Remaining != 0 || d.Reset < time.Second || d.Reset > 10*time.Second {
		t.Errorf("after the oldest entry left: %+v; want allowed, Remaining 0, Reset at most 10s", d)
	}
}

func TestRollingWindowLoweredLimit(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	l := admission.NewRollingWindowLimiter(rdb, prefix, admission.Options{})
	// 40 requests in the last 50 s, then a downgrade to 30/minute: one more
	// fits only when 11 of them have left: the entry of rank 10, 40 s old,
	// leaves in 20 s, while the oldest leaves in 10 s.
	offsets := make([]time.Duration, 40)
	for i := range offsets {
		offsets[i] = -50*time.Second + time.Duration(i)*time.Second
	}
	seedLog(t, rdb, logKey(prefix, "c"), offsets)
	d, err := l.Allow(context.Background(), "c", 30)
	if err != nil {
		t.Fatal(err)
	}
	want := admission.Decision{Allowed: false, Limit: 30, Remaining: 0, RetryAfter: 20 * time.Second, Reset: 10 * time.Second}
	if d != want {
		t.Errorf("decision %+v, want %+v", d, want)
	}
}

func TestRollingWindowRejectsNonPositiveLimit(t *testing.T) {
	t.Parallel()
	l := admission.NewRollingWindowLimiter(redistest.Client(t), redistest.Prefix(t), admission.Options{})
	if _, err := l.Allow(context.Background(), "c", 0); err == nil {
		t.Error("limit 0 accepted")
	}
}

// TestRollingWindowSurvivesScriptFlush covers a Redis restart or failover
// that lost the script cache and the data: the limiter reloads the script
// and starts an empty window.
func TestRollingWindowSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	rdb := redistest.IsolatedDB(t)
	l := admission.NewRollingWindowLimiter(rdb, "", admission.Options{})
	ctx := context.Background()
	for range 2 {
		if _, err := l.Allow(ctx, "c", 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(ctx, "c", 2); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Errorf("after SCRIPT FLUSH and FLUSHDB: %+v, %v", d, err)
	}
}

func BenchmarkRollingWindowAllow(b *testing.B) {
	rdb := redistest.Client(b)
	l := admission.NewRollingWindowLimiter(rdb, redistest.Prefix(b), admission.Options{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.Allow(ctx, "bench", 1_000_000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRollingWindowAllowParallel(b *testing.B) {
	opts := redistest.Options(b)
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	l := admission.NewRollingWindowLimiter(rdb, redistest.Prefix(b), admission.Options{})
	ctx := context.Background()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Allow(ctx, "bench", 1_000_000); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
