package admission_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/admission/admissiontest"
	"github.com/marketscreener/market/domain"
)

func isUnauthorized(err error) bool { return domain.ErrorCode(err) == domain.EUNAUTHORIZED }

func TestKeyCacheSingleFlight(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	keys.Gate = make(chan struct{})
	cache := admission.NewKeyCache(keys.Load, time.Hour, time.Now)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			client, key, err := cache.Get(context.Background(), "h1")
			if err != nil || client.ID != "c1" || key.ID != "k1" {
				t.Errorf("Get = %v, %v, %v", client, key, err)
			}
		})
	}
	// Let the load finish only once it started, so all 100 can pile up on it.
	for keys.Loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(keys.Gate)
	wg.Wait()
	if n := keys.Loads.Load(); n != 1 {
		t.Errorf("loader called %d times for 100 concurrent Gets, want 1", n)
	}
}

func TestKeyCacheNegativeAndTTL(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	clock := newFakeClock()
	cache := admission.NewKeyCache(keys.Load, 2*time.Second, clock.Now)
	ctx := context.Background()
	for range 5 {
		if _, _, err := cache.Get(ctx, "garbage"); !isUnauthorized(err) {
			t.Fatalf("unknown key: %v, want unauthorized", err)
		}
	}
	if n := keys.Loads.Load(); n != 1 {
		t.Errorf("unknown key loaded %d times, want 1 (negative caching)", n)
	}
	// An unknown key costs the database once, not once per key TTL: the
	// answer stands until the key is issued (announced on the bus) or ten
	// minutes pass.
	clock.Advance(2 * time.Second)
	_, _, _ = cache.Get(ctx, "garbage")
	if n := keys.Loads.Load(); n != 1 {
		t.Errorf("loads after the key TTL = %d, want still 1", n)
	}
	clock.Advance(10 * time.Minute)
	_, _, _ = cache.Get(ctx, "garbage")
	if n := keys.Loads.Load(); n != 2 {
		t.Errorf("loads after ten minutes = %d, want 2", n)
	}
	keys.Mu.Lock()
	keys.Keys["garbage"] = &domain.APIKey{ID: "k9", ClientID: "c2", Hash: "garbage"}
	keys.Mu.Unlock()
	cache.KeyIssued("garbage")
	if client, _, err := cache.Get(ctx, "garbage"); err != nil || client.ID != "c2" {
		t.Errorf("a key issued after an unknown answer: %v, %v; want it to work at once", client, err)
	}

	// Revocation without any invalidation still lands within the TTL.
	if _, _, err := cache.Get(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	keys.Revoke("h1")
	clock.Advance(2 * time.Second)
	if _, _, err := cache.Get(ctx, "h1"); !isUnauthorized(err) {
		t.Errorf("revoked key after the TTL: %v, want unauthorized", err)
	}
}

// A key in use is reloaded in the background half-way through its TTL:
// requests keep being answered from memory, and a revocation the reload
// finds lands without any request waiting for the database.
func TestKeyCacheRefreshesAhead(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	clock := newFakeClock()
	cache := admission.NewKeyCache(keys.Load, 2*time.Second, clock.Now)
	ctx := context.Background()
	if _, _, err := cache.Get(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	keys.Gate = make(chan struct{}) // the reload waits until released
	clock.Advance(1100 * time.Millisecond)
	for range 3 {
		if _, _, err := cache.Get(ctx, "h1"); err != nil {
			t.Fatalf("while the reload runs: %v, want the cached key", err)
		}
	}
	keys.Revoke("h1")
	close(keys.Gate)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, err := cache.Get(ctx, "h1")
		if isUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background reload never replaced the entry (last: %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := keys.Loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2 (one reload for several requests)", n)
	}
}

func TestKeyCacheInvalidation(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	cache := admission.NewKeyCache(keys.Load, time.Hour, time.Now)
	ctx := context.Background()
	warm := func() {
		t.Helper()
		for _, h := range []string{"h1", "h2", "h3"} {
			if _, _, err := cache.Get(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	warm()
	keys.Revoke("h1")
	cache.InvalidateKey("h1")
	if _, _, err := cache.Get(ctx, "h1"); !isUnauthorized(err) {
		t.Errorf("revoked key after InvalidateKey: %v", err)
	}
	if cache.Len() != 3 {
		t.Errorf("Len = %d, want 3", cache.Len())
	}

	keys.Mu.Lock()
	keys.Clients["c1"].Status = domain.StatusSuspended
	keys.Mu.Unlock()
	cache.InvalidateClient("c1")
	if cache.Len() != 1 {
		t.Errorf("Len after InvalidateClient = %d, want 1 (c2's key)", cache.Len())
	}
	if client, _, err := cache.Get(ctx, "h2"); err != nil || client.Status != domain.StatusSuspended {
		t.Errorf("h2 after suspension: %v, %v", client, err)
	}
	cache.InvalidateAll()
	if cache.Len() != 0 {
		t.Errorf("Len after InvalidateAll = %d", cache.Len())
	}
}

func TestKeyCacheDoesNotCacheLookupFailures(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	keys.Fail = errors.New("connection refused")
	cache := admission.NewKeyCache(keys.Load, time.Hour, time.Now)
	ctx := context.Background()
	if _, _, err := cache.Get(ctx, "h1"); err == nil || isUnauthorized(err) {
		t.Fatalf("lookup failure: %v, want the loader's error, not a 401", err)
	}
	keys.Mu.Lock()
	keys.Fail = nil
	keys.Mu.Unlock()
	if _, _, err := cache.Get(ctx, "h1"); err != nil {
		t.Errorf("after the database recovered: %v", err)
	}
}

func TestKeyCacheWaiterContext(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	keys.Gate = make(chan struct{})
	cache := admission.NewKeyCache(keys.Load, time.Hour, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := cache.Get(ctx, "h1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: %v", err)
	}
	close(keys.Gate)
	// The shared load was not cancelled with the first caller.
	if _, _, err := cache.Get(context.Background(), "h1"); err != nil {
		t.Errorf("Get after the load finished: %v", err)
	}
}

// A Postgres failover: while the store fails, a key read before keeps
// being served past its TTL, through the background reloads and through a
// reload on expiry alike, for up to five minutes from when it was read;
// an unknown key gets the store's error. Once the store answers again its
// answer replaces the old one (a revocation committed meanwhile counts).
func TestKeyCacheServesAKnownKeyWhileTheStoreFails(t *testing.T) {
	t.Parallel()
	keys := admissiontest.NewKeys()
	clock := newFakeClock()
	cache := admission.NewKeyCache(keys.Load, 2*time.Second, clock.Now)
	ctx := context.Background()
	if _, _, err := cache.Get(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	down := errors.New("store: failed to connect")
	keys.Mu.Lock()
	keys.Fail = down
	keys.Mu.Unlock()
	// Requests every half second for four minutes: the background reloads
	// fail, and so do the reloads of an expired entry.
	for i := range 480 {
		clock.Advance(500 * time.Millisecond)
		if i == 100 {
			clock.Advance(3 * time.Second) // a pause in the traffic: the entry expires
		}
		if client, _, err := cache.Get(ctx, "h1"); err != nil || client.ID != "c1" {
			t.Fatalf("after %s with the store failing: %v, %v", time.Duration(i+1)*500*time.Millisecond, client, err)
		}
		cache.Wait() // the background reload, if one started
	}
	if _, _, err := cache.Get(ctx, "h2-unknown"); !errors.Is(err, down) {
		t.Fatalf("a key never read with the store failing: %v, want the store's error", err)
	}
	// Past five minutes from the last read, the store's error.
	clock.Advance(90 * time.Second)
	cache.Wait()
	var err error
	for range 3 { // the expired entry, then the reload on expiry
		_, _, err = cache.Get(ctx, "h1")
		cache.Wait()
	}
	if !errors.Is(err, down) {
		t.Fatalf("five minutes after the last read: %v, want the store's error", err)
	}
	// The store answers again: its answer, a revocation included.
	keys.Mu.Lock()
	keys.Fail = nil
	now := clock.Now()
	keys.Keys["h1"].RevokedAt = &now
	keys.Mu.Unlock()
	if _, _, err := cache.Get(ctx, "h1"); !isUnauthorized(err) {
		t.Fatalf("revoked while the store was failing, answered once it is back: %v, want unauthorized", err)
	}
}
