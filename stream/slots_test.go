package stream_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/stream"
)

func TestSlotsCapAndGiveBackACrashedReplicasSlots(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	slots := stream.NewSlots(rdb, prefix, 0, nil)
	var held []*stream.Slot
	for i := range 3 {
		slot, ok := slots.Acquire(ctx, "c1", 3)
		if !ok {
			t.Fatalf("slot %d refused", i)
		}
		held = append(held, slot)
	}
	if _, ok := slots.Acquire(ctx, "c1", 3); ok {
		t.Fatal("a fourth slot of three was given")
	}
	if _, ok := slots.Acquire(ctx, "c2", 3); !ok {
		t.Fatal("another client was refused")
	}
	held[0].Release()
	held[0].Release() // twice is harmless
	if _, ok := slots.Acquire(ctx, "c1", 3); !ok {
		t.Fatal("a released slot did not come back")
	}
	// A replica that crashed refreshes nothing: its lease runs out and the
	// next acquire sweeps it (here a lease that ended a second ago).
	key := prefix + "marketd:streams:c3"
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := slots.Acquire(ctx, "c3", 1); !ok {
		t.Fatal("a dead replica's slot was not given back")
	}
	if n, err := slots.Open(ctx, "c3"); err != nil || n != 1 {
		t.Fatalf("open slots %d (%v), want 1", n, err)
	}
}

func TestSlotsRefreshKeepsALiveStreamsLease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	slots := stream.NewSlots(rdb, prefix, 300*time.Millisecond, nil)
	slot, ok := slots.Acquire(ctx, "c", 1)
	if !ok {
		t.Fatal("refused")
	}
	defer slot.Release()
	deadline := time.Now().Add(time.Second) // past three TTLs
	for time.Now().Before(deadline) {
		if _, ok := slots.Acquire(ctx, "c", 1); ok {
			t.Fatal("a live stream's lease ran out while it was refreshed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustAcquire(t *testing.T, s *stream.Slots, clientID string, max int) *stream.Slot {
	t.Helper()
	slot, ok := s.Acquire(context.Background(), clientID, max)
	if !ok {
		t.Fatalf("a slot of %d refused", max)
	}
	t.Cleanup(slot.Release)
	return slot
}

func lost(s *stream.Slot) bool {
	select {
	case <-s.Lost():
		return true
	default:
		return false
	}
}

// alive counts the slots that did not lose their place.
func alive(slots ...*stream.Slot) int {
	n := 0
	for _, s := range slots {
		if !lost(s) {
			n++
		}
	}
	return n
}

func TestSlotsAfterRedisLostItsStateNeverMoreThanTheCap(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	key := prefix + "marketd:streams:c"
	// Leases that outlive the test: the refreshes run when it says.
	a := stream.NewSlots(rdb, prefix, time.Hour, nil)
	b := stream.NewSlots(redistest.Client(t), prefix, time.Hour, nil)
	a1, a2 := mustAcquire(t, a, "c", 2), mustAcquire(t, a, "c", 2)

	// Redis loses the client's set: the replica holding the two streams
	// registers them again before it admits another.
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Acquire(ctx, "c", 2); ok {
		t.Fatal("a third stream of two was admitted beside the first two")
	}
	if n, err := a.Open(ctx, "c"); err != nil || n != 2 {
		t.Fatalf("open %d (%v), want 2", n, err)
	}

	// Another replica cannot know of them: it admits two more. At the
	// older streams' refresh they find the cap full and lose their place.
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	b1, b2 := mustAcquire(t, b, "c", 2), mustAcquire(t, b, "c", 2)
	a.RefreshNow()
	b.RefreshNow()
	if !lost(a1) || !lost(a2) || lost(b1) || lost(b2) {
		t.Fatalf("lost: a1 %v a2 %v b1 %v b2 %v, want the first two only", lost(a1), lost(a2), lost(b1), lost(b2))
	}
	for range 3 { // and it stays so
		a.RefreshNow()
		b.RefreshNow()
		if n, err := a.Open(ctx, "c"); err != nil || n != 2 || alive(a1, a2, b1, b2) != 2 {
			t.Fatalf("open %d (%v), alive %d, want 2", n, err, alive(a1, a2, b1, b2))
		}
	}
	// A lost slot's release gives back nothing it does not hold.
	a1.Release()
	if _, ok := a.Acquire(ctx, "c", 2); ok {
		t.Fatal("a lost slot's release freed another stream's slot")
	}
	b1.Release()
	mustAcquire(t, a, "c", 2)
}

// With the refreshes on their own clock: four streams of a cap of two
// after a loss of state, two of them end within a refresh and no more.
func TestSlotsRefreshLoopBringsTheCountBackUnderTheCap(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	ttl := 600 * time.Millisecond // refreshed every 200 ms
	a := stream.NewSlots(rdb, prefix, ttl, nil)
	b := stream.NewSlots(redistest.Client(t), prefix, ttl, nil)
	held := []*stream.Slot{mustAcquire(t, a, "c", 2), mustAcquire(t, a, "c", 2)}
	if err := rdb.Del(ctx, prefix+"marketd:streams:c").Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// A refresh of a's may come first: then b is refused, as it should.
		if s, ok := b.Acquire(ctx, "c", 2); ok {
			t.Cleanup(s.Release)
			held = append(held, s)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(held...) > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams of a cap of 2 alive after 10 s", alive(held...))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		n, err := a.Open(ctx, "c")
		if err != nil || n > 2 || alive(held...) != 2 {
			t.Fatalf("open %d (%v), alive %d, want 2", n, err, alive(held...))
		}
	}
}

func TestSlotsCountedDuringAnOutageAreRegisteredWhenRedisReturns(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	a := stream.NewSlots(redistest.Flaky(t, &down), prefix, time.Hour, nil)
	b := stream.NewSlots(redistest.Client(t), prefix, time.Hour, nil)
	a1 := mustAcquire(t, a, "c", 3)

	// Redis away from a: it counts its own streams of the client, the one
	// registered before included, against the same cap.
	down.Store(true)
	a2, a3 := mustAcquire(t, a, "c", 3), mustAcquire(t, a, "c", 3)
	if _, ok := a.Acquire(ctx, "c", 3); ok {
		t.Fatal("a fourth stream of three admitted during the outage")
	}
	a.RefreshNow() // fails: every stream keeps its place
	if alive(a1, a2, a3) != 3 {
		t.Fatal("a failed refresh took a stream's place")
	}
	b1 := mustAcquire(t, b, "c", 3) // another replica, Redis reachable

	// Back: a registers its streams, oldest first, under the cap; the
	// youngest finds it full.
	down.Store(false)
	waitUntil(t, func() bool { return !a.Degraded() }) // the outage policy's probe sees Redis again
	a.RefreshNow()
	if lost(a1) || lost(a2) || !lost(a3) || lost(b1) {
		t.Fatalf("lost: a1 %v a2 %v a3 %v b1 %v, want a3 only", lost(a1), lost(a2), lost(a3), lost(b1))
	}
	if n, err := a.Open(ctx, "c"); err != nil || n != 3 {
		t.Fatalf("open %d (%v), want 3", n, err)
	}
	if _, ok := b.Acquire(ctx, "c", 3); ok {
		t.Fatal("a fourth stream of three admitted after the outage")
	}
}

// A lower cap (the client's tier changed) keeps the oldest streams over
// every replica and refuses the others, each stream deciding for itself;
// during an outage a replica ranks its own streams.
func TestSlotsFitALowerCapKeepsTheOldest(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	a := stream.NewSlots(redistest.Flaky(t, &down), prefix, time.Hour, nil)
	b := stream.NewSlots(redistest.Client(t), prefix, time.Hour, nil)
	s1, s2, s3, s4 := mustAcquire(t, a, "c", 10), mustAcquire(t, b, "c", 10), mustAcquire(t, a, "c", 10), mustAcquire(t, b, "c", 10)
	// The newest first, to show the order is admission's, not the calls'.
	for i, tc := range []struct {
		s    *stream.Slot
		keep bool
	}{{s4, false}, {s2, true}, {s3, false}, {s1, true}} {
		if got := tc.s.Fit(ctx, 2); got != tc.keep {
			t.Fatalf("stream %d: Fit %v, want %v", i, got, tc.keep)
		}
		if !tc.s.Fit(ctx, 2) && tc.keep {
			t.Fatal("Fit again changed its mind")
		}
	}
	s3.Release()
	s4.Release()
	if n, err := a.Open(ctx, "c"); err != nil || n != 2 {
		t.Fatalf("open %d (%v), want 2", n, err)
	}
	if _, ok := b.Acquire(ctx, "c", 2); ok {
		t.Fatal("a third stream of two admitted")
	}
	if !s1.Fit(ctx, 5) || !s2.Fit(ctx, 5) { // an upgrade keeps every one
		t.Fatal("a higher cap refused a stream")
	}

	// Redis away from a: its own streams of another client, oldest first.
	a1, a2, a3 := mustAcquire(t, a, "d", 3), mustAcquire(t, a, "d", 3), mustAcquire(t, a, "d", 3)
	down.Store(true)
	if !a1.Fit(ctx, 1) || a2.Fit(ctx, 1) || a3.Fit(ctx, 1) {
		t.Fatal("during an outage the replica's oldest stream alone must keep its place")
	}
}

// waitUntil polls cond until it holds (10 s at most).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
