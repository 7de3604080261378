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

// hammer runs workers goroutines per instance (a replica's limiter or
// ledger), each asking one request after another, until its instance
// refuses one or stop (when not nil) says so, and returns every admitted
// answer.
func hammer[T any](t *testing.T, instances, workers int, stop func(admitted int64) bool, ask func(instance int) (T, bool, error)) []T {
	t.Helper()
	var (
		mu       sync.Mutex
		out      []T
		wg       sync.WaitGroup
		admitted atomic.Int64
	)
	for i := range instances {
		for range workers {
			wg.Go(func() {
				var mine []T
				defer func() {
					mu.Lock()
					out = append(out, mine...)
					mu.Unlock()
				}()
				for {
					if stop != nil && stop(admitted.Load()) {
						return
					}
					v, ok, err := ask(i)
					if err != nil {
						t.Errorf("hammer: %v", err)
						return
					}
					if !ok {
						return
					}
					mine = append(mine, v)
					admitted.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return out
}

// hammerAllow hammers limiters until refused and returns every admitted decision.
func hammerAllow(t *testing.T, ls []*admission.RollingWindowLimiter, clientID string, limit, workers int, stop func(admitted int64) bool) []admission.Decision {
	t.Helper()
	return hammer(t, len(ls), workers, stop, func(i int) (admission.Decision, bool, error) {
		d, err := ls[i].Allow(context.Background(), clientID, limit)
		return d, d.Allowed, err
	})
}

// lowLeaseMin lets a limiter lease from ≈ 320 requests/s instead of
// ≈ 2 500, so that the lease tests exercise leases on a loaded machine.
const lowLeaseMin = 32

// sustained stops a hammer once it has run for at least least and shown
// what the test is after (shown, given the requests admitted so far), or
// after sustainedMax whatever it shows: a loaded host (CI under -race on
// 2 cores) reaches a lease's rate later, and the test's assertions then
// say what it never showed.
// shown is asked by one worker at a time, at most every 10 ms (it reads
// the engine's stats under the engine's lock, which the hammered requests
// take too).
func sustained(least time.Duration, shown func(admitted int64) bool) func(admitted int64) bool {
	start := time.Now()
	var next atomic.Int64 // since start, when shown is asked next
	next.Store(int64(least))
	var done atomic.Bool
	return func(admitted int64) bool {
		if done.Load() {
			return true
		}
		ran := time.Since(start)
		if ran >= sustainedMax {
			return true
		}
		at := next.Load()
		if int64(ran) < at || !next.CompareAndSwap(at, int64(ran+10*time.Millisecond)) {
			return false
		}
		if shown(admitted) {
			done.Store(true)
			return true
		}
		return false
	}
}

const sustainedMax = 20 * time.Second

// A client far below a high limit that keeps a replica busy gets leases
// (most requests are decided in memory). When the load stops, the unused
// slots of the last lease are removed from the window, so the window holds
// exactly the admitted requests.
func TestRollingWindowLeaseSustainedLoad(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	rdb := redistest.Client(t)
	l := admission.NewRollingWindowLimiter(rdb, prefix, admission.Options{})
	l.LeaseMin = lowLeaseMin
	const limit = 1_000_000

	got := hammerAllow(t, []*admission.RollingWindowLimiter{l}, "busy", limit, 16, sustained(600*time.Millisecond, func(admitted int64) bool {
		return l.LeaseStats() >= admitted*2/3
	}))
	// Leases are asked for ahead of need, so once the rate is measured
	// most requests are decided from one.
	if leased := l.LeaseStats(); leased < int64(len(got))/2 {
		t.Fatalf("only %d slots leased for %d requests of sustained load", leased, len(got))
	}
	for _, d := range got {
		if d.Limit != limit || d.Remaining < limit-len(got)-admission.MaxRateLease || d.Remaining >= limit || d.Reset < time.Second || d.Reset > admission.Window+time.Second {
			t.Fatalf("leased decision %+v out of range after %d requests", d, len(got))
		}
	}
	waitWindow(t, rdb, logKey(prefix, "busy"), len(got))
	// A lease is one member of the client's leases, whatever its size: the
	// leased requests are not one member each.
	singles, err := rdb.ZCard(context.Background(), logKey(prefix, "busy")).Result()
	if err != nil {
		t.Fatal(err)
	}
	leases, err := rdb.ZCard(context.Background(), logKey(prefix, "busy")+":leases").Result()
	if err != nil {
		t.Fatal(err)
	}
	if singles+leases > int64(len(got))-l.LeaseStats()/2 {
		t.Errorf("%d single entries and %d leases in Redis for %d requests, %d of them leased", singles, leases, len(got), l.LeaseStats())
	}
	t.Logf("%d requests, %d slots leased", len(got), l.LeaseStats())
}

// With leases on two replicas the limit is still exact: hammering until
// refused admits exactly N between them (all inside one window), never
// more, because leased slots are in the window before they are used and
// unused ones are given back before a replica asks again.
func TestRollingWindowLeaseExactAcrossReplicas(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	replicas := []*admission.RollingWindowLimiter{
		admission.NewRollingWindowLimiter(redistest.Client(t), prefix, admission.Options{}),
		admission.NewRollingWindowLimiter(redistest.Client(t), prefix, admission.Options{}),
	}
	for _, r := range replicas {
		r.LeaseMin = lowLeaseMin
	}
	const limit = 25_000
	got := hammerAllow(t, replicas, "edge", limit, 8, nil)
	if len(got) != limit {
		t.Fatalf("admitted %d, want exactly %d", len(got), limit)
	}
	if replicas[0].LeaseStats()+replicas[1].LeaseStats() == 0 {
		t.Fatal("no lease granted: the test did not exercise leases")
	}
	for _, d := range got {
		if d.Remaining < 0 || d.Remaining >= limit {
			t.Fatalf("decision %+v", d)
		}
	}
}

// A limit lowered while a lease is out applies to the very next request:
// the lease (taken under the old limit) is not used, its unused slots
// leave the window in the same call, and the window then holds exactly
// the admitted requests (once a lease that was on its way when the load
// stopped has expired too).
func TestRollingWindowLeaseLoweredLimit(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	rdb := redistest.Client(t)
	l := admission.NewRollingWindowLimiter(rdb, prefix, admission.Options{})
	l.LeaseMin = lowLeaseMin

	got := hammerAllow(t, []*admission.RollingWindowLimiter{l}, "downgraded", 1_000_000, 8, sustained(300*time.Millisecond, func(int64) bool {
		return l.LeaseStats() > 0
	}))
	if l.LeaseStats() == 0 {
		t.Fatalf("no lease in %s of sustained load (%d requests)", sustainedMax, len(got))
	}
	d, err := l.Allow(context.Background(), "downgraded", 30)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Limit != 30 || d.Remaining != 0 || d.RetryAfter < time.Second {
		t.Fatalf("first request at limit 30 after %d admitted: %+v, want a refusal", len(got), d)
	}
	waitWindow(t, rdb, logKey(prefix, "downgraded"), len(got))
}

// waitWindow waits until the window at key counts exactly want entries:
// unused lease slots are given back within the lease's lifetime.
func waitWindow(t *testing.T, rdb *redis.Client, key string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := windowCount(t, rdb, key)
		if n == int64(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("window holds %d entries, want the %d admitted (unused lease slots not given back)", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
