package admission_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
)

// fakeClock is a settable clock for the in-process limiter and the cache.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// TestLocalLimiterProperty replays random request streams (bursts, steady
// traffic, long pauses) for several clients and checks every decision
// against the definition: a request is admitted if and only if fewer than
// N requests were admitted in the 60 s before it, so no 60-second window
// ever holds more than N; and a refusal's Retry-After is exactly when the
// blocking entry leaves, rounded up.
func TestLocalLimiterProperty(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 42))
			clock := newFakeClock()
			l := admission.NewLocalLimiter(clock.Now)
			limitOf := map[string]int{"a": 1, "b": 1 + rng.IntN(5), "c": 30, "d": 100}
			clients := []string{"a", "b", "c", "d"}
			admitted := map[string][]time.Time{}
			for range 20000 {
				switch r := rng.IntN(100); {
				case r < 60: // burst: same instant
				case r < 95:
					clock.Advance(time.Duration(rng.IntN(2000)) * time.Millisecond)
				case r < 99:
					clock.Advance(time.Duration(rng.IntN(60_000)) * time.Millisecond)
				default:
					clock.Advance(time.Duration(60_000+rng.IntN(60_000)) * time.Millisecond)
				}
				id := clients[rng.IntN(len(clients))]
				n, now := limitOf[id], clock.Now()
				d := l.Allow(id, n)

				log := admitted[id]
				first := len(log) // index of the first entry inside (now-60s, now]
				for first > 0 && log[first-1].After(now.Add(-admission.Window)) {
					first--
				}
				inWindow := len(log) - first
				if d.Allowed != (inWindow < n) {
					t.Fatalf("%s at %v: allowed=%v with %d of %d in the window", id, now, d.Allowed, inWindow, n)
				}
				if d.Allowed {
					admitted[id] = append(log, now)
					if d.Remaining != n-inWindow-1 || d.RetryAfter != 0 {
						t.Fatalf("%s: allowed decision %+v with %d in the window", id, d, inWindow+1)
					}
					continue
				}
				frees := log[len(log)-n].Add(admission.Window)
				if want := max(ceilSeconds(frees.Sub(now)), time.Second); d.RetryAfter != want || d.Remaining != 0 {
					t.Fatalf("%s: refusal %+v, want RetryAfter %v", id, d, want)
				}
			}
			for id, log := range admitted {
				n := limitOf[id]
				for i := n; i < len(log); i++ {
					if log[i].Sub(log[i-n]) < admission.Window {
						t.Fatalf("%s: %d requests admitted within %v", id, n+1, log[i].Sub(log[i-n]))
					}
				}
			}
		})
	}
}

func TestLocalLimiterBurstThenWindow(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := admission.NewLocalLimiter(clock.Now)
	for i := range 30 {
		if d := l.Allow("c", 30); !d.Allowed || d.Remaining != 29-i {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	clock.Advance(59*time.Second + 500*time.Millisecond)
	if d := l.Allow("c", 30); d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("31st request: %+v, want refused with RetryAfter 1s", d)
	}
	clock.Advance(500 * time.Millisecond)
	if d := l.Allow("c", 30); !d.Allowed {
		t.Fatalf("request 60 s after the burst refused: %+v", d)
	}
}

func TestLocalLimiterObserveCountsWithoutLimiting(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := admission.NewLocalLimiter(clock.Now)
	for range 10 {
		l.Observe("c", 5)
	}
	if d := l.Allow("c", 5); d.Allowed {
		t.Errorf("after 10 observed requests and a limit of 5: %+v", d)
	}
	clock.Advance(admission.Window)
	if d := l.Allow("c", 5); !d.Allowed || d.Remaining != 4 {
		t.Errorf("a window later: %+v", d)
	}
}

func TestLocalLimiterConcurrent(t *testing.T) {
	t.Parallel()
	l := admission.NewLocalLimiter(time.Now)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range 100 {
		wg.Go(func() {
			if l.Allow("c", 30).Allowed {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 30 {
		t.Errorf("allowed %d, want 30", allowed)
	}
}
