package invalidation_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/admission/admissiontest"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
)

// replica is one api process: a key cache kept fresh by a bus.
type replica struct {
	keys  *admissiontest.Keys
	cache *admission.KeyCache
	bus   *invalidation.Bus
	name  string // client name of its Redis connections
}

func startReplica(t *testing.T, prefix string, keys *admissiontest.Keys) *replica {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	opts := redistest.Options(t)
	opts.ClientName = "bustest-" + hex.EncodeToString(b[:])
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	r := &replica{keys: keys, cache: admission.NewKeyCache(keys.Load, time.Hour, time.Now), name: opts.ClientName}
	r.bus = invalidation.NewBus(rdb, rediskeys.Space(prefix), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.bus.Run(ctx, r.cache, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// eventually polls cond every 10 ms until it holds or within fails.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSubscribed returns once every replica applies messages: a
// subscription's own InvalidateAll always comes before any message, so a
// replica that emptied its cache on a published "all" is listening.
func waitSubscribed(t *testing.T, publisher *invalidation.Bus, replicas ...*replica) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 10*time.Second, "replicas subscribed", func() bool {
		for _, r := range replicas {
			if _, _, err := r.cache.Get(ctx, "h3"); err != nil {
				t.Fatal(err)
			}
		}
		if err := publisher.Publish(ctx, invalidation.Message{Kind: invalidation.InvalidateAllKind}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			empty := true
			for _, r := range replicas {
				empty = empty && r.cache.Len() == 0
			}
			if empty {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	})
}

func TestBusRevocationReachesEveryReplica(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	keys := admissiontest.NewKeys()
	r1, r2 := startReplica(t, prefix, keys), startReplica(t, prefix, keys)
	cli := invalidation.NewBus(redistest.Client(t), rediskeys.Space(prefix), slog.New(slog.DiscardHandler))
	if cli.Channel() != prefix+"marketd:invalidate" {
		t.Errorf("channel %q", cli.Channel())
	}
	waitSubscribed(t, cli, r1, r2)
	ctx := context.Background()
	for _, r := range []*replica{r1, r2} {
		if _, _, err := r.cache.Get(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
	}

	// The operator revokes h1: the database changes, then the CLI publishes.
	keys.Revoke("h1")
	if err := cli.Publish(ctx, invalidation.Message{Kind: invalidation.InvalidateKeyKind, ID: "h1"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica{r1, r2} {
		eventually(t, time.Second, "revocation applied", func() bool {
			_, _, err := r.cache.Get(ctx, "h1")
			return isUnauthorized(err)
		})
	}

	// A client-wide invalidation (suspension, tier change) too.
	if _, _, err := r1.cache.Get(ctx, "h2"); err != nil {
		t.Fatal(err)
	}
	before := keys.Loads.Load()
	if err := cli.Publish(ctx, invalidation.Message{Kind: invalidation.InvalidateClientKind, ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "client invalidation applied", func() bool {
		_, _, _ = r1.cache.Get(ctx, "h2")
		return keys.Loads.Load() > before
	})
}

// TestBusResubscribesAfterDisconnect kills the replica's pub/sub
// connection: the bus reconnects, forgets its cache (it may have missed
// messages) and applies messages again.
func TestBusResubscribesAfterDisconnect(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	keys := admissiontest.NewKeys()
	r := startReplica(t, prefix, keys)
	admin := redistest.Client(t)
	cli := invalidation.NewBus(admin, rediskeys.Space(prefix), slog.New(slog.DiscardHandler))
	waitSubscribed(t, cli, r)
	ctx := context.Background()
	if _, _, err := r.cache.Get(ctx, "h1"); err != nil {
		t.Fatal(err)
	}

	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+r.name+" ") && strings.Contains(line, "sub=1") {
			id := strings.TrimPrefix(strings.Fields(line)[0], "id=")
			if err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("found %d pub/sub connections named %s", killed, r.name)
	}
	// A revocation published while the replica is disconnected is lost;
	// the resubscription's InvalidateAll covers it.
	keys.Revoke("h1")
	eventually(t, 10*time.Second, "cache emptied on resubscribe", func() bool {
		_, _, err := r.cache.Get(ctx, "h1")
		return isUnauthorized(err)
	})
	waitSubscribed(t, cli, r)
}

// dataLog records what a bus dropped from a read cache.
type dataLog struct {
	mu      sync.Mutex
	scopes  []string
	flushes int
}

func (d *dataLog) Invalidate(s readcache.Scope) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scopes = append(d.scopes, s.String())
}

func (d *dataLog) InvalidateAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flushes++
}

func (d *dataLog) seen(s readcache.Scope) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.scopes, s.String())
}

// The sandbox pipeline's write announcements reach the sandbox server's
// cache only: a live replica never drops its data for them (pub/sub
// channels span Redis databases, so only a channel of their own keeps
// them apart), and live announcements still reach live replicas.
func TestSandboxBusStaysOffTheLiveChannel(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithCancel(context.Background())
	rdb := redistest.Client(t)
	live := invalidation.NewBus(rdb, rediskeys.Space(prefix), slog.New(slog.DiscardHandler))
	sandbox := invalidation.NewSandboxBus(rdb, rediskeys.Space(prefix), slog.New(slog.DiscardHandler))
	if want := prefix + "marketd:sandbox:invalidate"; sandbox.Channel() != want || live.Channel() == sandbox.Channel() {
		t.Fatalf("channels: live %q, sandbox %q, want the sandbox's %q", live.Channel(), sandbox.Channel(), want)
	}
	liveData, sandboxData := &dataLog{}, &dataLog{}
	keys := admission.NewKeyCache(admissiontest.NewKeys().Load, time.Hour, time.Now)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = live.Run(ctx, keys, liveData) }()
	go func() { defer wg.Done(); _ = sandbox.Run(ctx, nil, sandboxData) }() // data only: no keys
	t.Cleanup(func() { cancel(); wg.Wait() })

	// Subscribed once each has taken a probe of its own channel.
	probe := func(bus *invalidation.Bus, data *dataLog, s readcache.Scope) {
		t.Helper()
		eventually(t, 10*time.Second, "announcement on "+bus.Channel(), func() bool {
			if err := bus.Publish(ctx, invalidation.DataChanged(s)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			return data.seen(s)
		})
	}
	probe(live, liveData, readcache.Analytics(domain.Stocks))
	probe(sandbox, sandboxData, readcache.Analytics(domain.Forex))

	sandboxWrite := readcache.Tickers(domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"})
	liveWrite := readcache.Tickers(domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"})
	if err := sandbox.Publish(ctx, invalidation.DataChanged(sandboxWrite)); err != nil {
		t.Fatal(err)
	}
	// A key message on the sandbox's channel is not the sandbox cache's to act on.
	if err := sandbox.Publish(ctx, invalidation.Message{Kind: invalidation.InvalidateAllKind}); err != nil {
		t.Fatal(err)
	}
	if err := live.Publish(ctx, invalidation.DataChanged(liveWrite)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the sandbox write reaches the sandbox cache", func() bool { return sandboxData.seen(sandboxWrite) })
	// Published after the sandbox's: once it arrived, the sandbox's would have too.
	eventually(t, 5*time.Second, "the live write reaches the live cache", func() bool { return liveData.seen(liveWrite) })
	if liveData.seen(sandboxWrite) {
		t.Error("a sandbox write dropped live cached data")
	}
	if sandboxData.seen(liveWrite) {
		t.Error("a live write reached the sandbox cache")
	}
}

func isUnauthorized(err error) bool { return domain.ErrorCode(err) == domain.EUNAUTHORIZED }
