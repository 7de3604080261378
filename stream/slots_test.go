package stream_test

import (
	"context"
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
