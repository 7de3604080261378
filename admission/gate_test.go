package admission_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// countingKeys is the keys table, counting the lookups that reach Postgres.
type countingKeys struct {
	*store.DB
	lookups atomic.Int64
}

func (k *countingKeys) Authenticate(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error) {
	k.lookups.Add(1)
	return k.DB.Authenticate(ctx, keyHash)
}

type gateBundle struct {
	db   *store.DB
	keys *countingKeys
	gate *admission.Gate
	bus  *invalidation.Bus // another process's bus (the operator CLI's)
	// usage is the ledger's store when set (else db).
	usage admission.UsageStore
}

// setupGate runs a gate on a schema and a Redis prefix of its own, with
// its key directory loaded.
func setupGate(t *testing.T, cfg admission.Config) *gateBundle {
	t.Helper()
	b := newGateBundle(t)
	b.start(t, cfg)
	return b
}

// newGateBundle prepares the schema; start runs the gate.
func newGateBundle(t testing.TB) *gateBundle {
	t.Helper()
	db := storetest.New(t)
	return &gateBundle{db: db, keys: &countingKeys{DB: db}}
}

func (b *gateBundle) start(t testing.TB, cfg admission.Config) {
	t.Helper()
	cfg.Redis, cfg.Prefix, cfg.Keys, cfg.Usage = redistest.Client(t), redistest.Prefix(t), b.keys, b.db
	if b.usage != nil {
		cfg.Usage = b.usage
	}
	b.gate = admission.New(cfg)
	b.bus = invalidation.NewBus(redistest.Client(t), rediskeys.Space(cfg.Prefix), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.gate.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		b.gate.Close()
	})
	eventuallyTrue(t, "the key directory loaded", func() bool { return b.gate.Probe(context.Background()) == nil })
}

func eventuallyTrue(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newKey creates a client (mutate adjusts it) with one key.
func (b *gateBundle) newKey(t testing.TB, mutate func(*domain.Client)) (string, *domain.Client) {
	t.Helper()
	c := &domain.Client{OrgName: t.Name(), Tier: domain.Business, Markets: domain.Markets}
	if mutate != nil {
		mutate(c)
	}
	if err := b.db.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key, _, err := b.db.IssueKey(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return key, c
}

func admit(t *testing.T, g *admission.Gate, key, from string) admission.Outcome {
	t.Helper()
	out, err := g.Admit(context.Background(), admission.Request{Key: key, RemoteAddr: from})
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return out
}

// mintKey returns a key with a valid checksum that nobody issued.
func mintKey(t *testing.T) string {
	t.Helper()
	k, err := domain.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The checks run in the documented order, and each refusal carries the
// headers the contract gives it.
func TestGateOrderOfChecks(t *testing.T) {
	t.Parallel()
	b := setupGate(t, admission.Config{})
	rate := 2
	quota := int64(3)
	limited, _ := b.newKey(t, func(c *domain.Client) { c.RateLimitOverride = &rate })
	small, _ := b.newKey(t, func(c *domain.Client) { c.QuotaOverride = &quota })
	suspended, sc := b.newKey(t, nil)
	if _, err := b.db.SetClientStatus(context.Background(), sc.ID, domain.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	expired, _ := b.newKey(t, func(c *domain.Client) { c.ContractExpiresAt = &past })
	const from = "192.0.2.7:5000"

	cases := []struct {
		name, key string
		status    int
		detail    string
		limits    bool // RateLimit headers
	}{
		{"missing", "", 401, "missing X-API-Key", false},
		{"malformed", "msk_nope", 401, "format or checksum", false},
		{"unknown", mintKey(t), 401, "unknown key", false},
		{"suspended", suspended, 403, "suspended", false},
		{"expired", expired, 403, "contract expired", false},
		{"admitted", limited, 200, "", true},
		{"admitted again", limited, 200, "", true},
		{"rate limited", limited, 429, admission.RateLimitedDetail, true},
	}
	for _, c := range cases {
		out := admit(t, b.gate, c.key, from)
		if out.Status != c.status || !strings.Contains(out.Detail, c.detail) {
			t.Errorf("%s: %d %q, want %d %q", c.name, out.Status, out.Detail, c.status, c.detail)
		}
		if got := out.RateLimitPolicy != "" && out.RateLimit != ""; got != c.limits {
			t.Errorf("%s: RateLimit headers %q / %q, want them: %v", c.name, out.RateLimitPolicy, out.RateLimit, c.limits)
		}
		if (out.Status == 429) != (out.RetryAfter != "") {
			t.Errorf("%s: Retry-After %q on a %d", c.name, out.RetryAfter, out.Status)
		}
	}
	for i := 1; i <= 4; i++ {
		out := admit(t, b.gate, small, from)
		switch {
		case i <= 3 && (out.Status != http.StatusOK || out.Used != int64(i)):
			t.Errorf("quota request %d: %+v, want 200 with used %d", i, out, i)
		case i == 4 && (out.Status != http.StatusTooManyRequests || out.Detail != admission.QuotaExceededDetail || out.Used != 3):
			t.Errorf("request past the quota: %+v", out)
		}
		if !strings.Contains(out.RateLimitPolicy, `"month";q=3;w=2592000`) {
			t.Errorf("RateLimit-Policy %q lacks the month", out.RateLimitPolicy)
		}
	}
}

// A flood of made-up keys with valid checksums from one address costs
// Postgres at most the address's budget, and is then refused without a
// lookup; a key that exists is admitted throughout, from the same
// address, even one this replica has never seen before.
func TestGateUnknownKeyFlood(t *testing.T) {
	t.Parallel()
	b := newGateBundle(t)
	paying, _ := b.newKey(t, nil)
	fresh, _ := b.newKey(t, nil) // exists, never used yet
	b.start(t, admission.Config{Throttle: floodThrottle})
	const from = "198.51.100.9:40000"
	if out := admit(t, b.gate, paying, from); !out.Admitted() {
		t.Fatalf("paying key: %+v", out)
	}
	before := b.keys.lookups.Load()
	statuses := map[int]int{}
	for i := range 300 {
		out := admit(t, b.gate, mintKey(t), from)
		statuses[out.Status]++
		if out.Status == http.StatusTooManyRequests {
			if ra, err := strconv.Atoi(out.RetryAfter); err != nil || ra < 1 {
				t.Fatalf("throttled without a Retry-After: %+v", out)
			}
		}
		if i%10 == 0 {
			if out := admit(t, b.gate, paying, from); !out.Admitted() {
				t.Fatalf("the paying key during the flood (request %d): %+v", i, out)
			}
		}
	}
	// The burst of 10 plus what refilled at 1/s while the loop ran.
	if n := b.keys.lookups.Load() - before; n > 15 {
		t.Errorf("300 made-up keys cost %d lookups, want at most the budget (≈ 10)", n)
	}
	if statuses[http.StatusTooManyRequests] < 280 || statuses[http.StatusTooManyRequests]+statuses[http.StatusUnauthorized] != 300 {
		t.Errorf("flood answers %v, want 401s within the budget and 429s beyond", statuses)
	}
	if out := admit(t, b.gate, fresh, from); !out.Admitted() {
		t.Errorf("a key that exists, first seen from the flooding address: %+v, want admitted", out)
	}
	// Another address is not affected by the first one's budget.
	if out := admit(t, b.gate, mintKey(t), "203.0.113.5:1"); out.Status != http.StatusUnauthorized {
		t.Errorf("a made-up key from another address: %+v, want a plain 401", out)
	}
}

// floodThrottle is a small budget, and a short delay to keep tests quick.
var floodThrottle = admission.ThrottleConfig{PerAddress: 1, Burst: 10, Delay: time.Millisecond}

// A key issued while an address floods works at once from that address:
// "keys issue" announces it on the bus.
func TestGateIssuedKeyWorksAtOnceFromAFloodingAddress(t *testing.T) {
	t.Parallel()
	b := setupGate(t, admission.Config{Throttle: floodThrottle})
	const from = "198.51.100.10:1"
	for range 30 {
		admit(t, b.gate, mintKey(t), from)
	}
	if out := admit(t, b.gate, mintKey(t), from); out.Status != http.StatusTooManyRequests {
		t.Fatalf("after 30 made-up keys: %+v, want the address throttled", out)
	}
	key, _ := b.newKey(t, nil)
	eventuallyTrue(t, "the announced key admitted from the throttled address", func() bool {
		// Announced again while polling: the gate may not be subscribed yet.
		if err := b.bus.Publish(context.Background(), invalidation.KeyIssued(domain.HashKey(key))); err != nil {
			t.Fatal(err)
		}
		return admit(t, b.gate, key, from).Admitted()
	})
}

// An unknown key is looked up once; a key issued later under any name
// works at once, on the bus's word or, should the bus miss it, by a lookup.
func TestGateUnknownKeyCostsOneLookup(t *testing.T) {
	t.Parallel()
	b := setupGate(t, admission.Config{})
	waitBusSubscribed(t, b)
	bad := mintKey(t)
	before := b.keys.lookups.Load()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if out, err := b.gate.Admit(context.Background(), admission.Request{Key: bad, RemoteAddr: "192.0.2.1:1"}); err != nil || out.Status != 401 {
				t.Errorf("unknown key: %+v, %v", out, err)
			}
		})
	}
	wg.Wait()
	if n := b.keys.lookups.Load() - before; n != 1 {
		t.Errorf("50 requests with one unknown key cost %d lookups, want 1", n)
	}
	// Issued while this replica was not listening (no announcement).
	late, _ := b.newKey(t, nil)
	if out := admit(t, b.gate, late, "192.0.2.1:1"); !out.Admitted() {
		t.Errorf("a key issued after the directory loaded: %+v, want admitted", out)
	}
}

// waitBusSubscribed returns once the gate's invalidation bus has
// subscribed. Subscribing empties the key cache (what was published before
// it is lost), negative answers included, so a made-up key is looked up
// again after it: a test counting lookups starts after that. A probe key
// is answered "unknown" once, then announced until a request looks it up
// again (the announcement or the subscription reached the gate).
func waitBusSubscribed(t *testing.T, b *gateBundle) {
	t.Helper()
	probe, from := mintKey(t), "192.0.2.254:1"
	admit(t, b.gate, probe, from)
	eventuallyTrue(t, "the gate's invalidation bus subscribed", func() bool {
		if err := b.bus.Publish(context.Background(), invalidation.KeyIssued(domain.HashKey(probe))); err != nil {
			t.Fatal(err)
		}
		before := b.keys.lookups.Load()
		admit(t, b.gate, probe, from)
		return b.keys.lookups.Load() > before
	})
}

// BenchmarkGateAdmitParallel is the gate's cost per request of a busy
// client far below its limits (leases active after the first 100 ms):
// what every request pays before its operation.
func BenchmarkGateAdmitParallel(b *testing.B) {
	bundle := newGateBundle(b)
	rate := 100_000_000
	key, _ := bundle.newKey(b, func(c *domain.Client) { c.Tier, c.RateLimitOverride = domain.Enterprise, &rate })
	bundle.start(b, admission.Config{})
	ctx := context.Background()
	req := admission.Request{Key: key, RemoteAddr: "127.0.0.1:1"}
	warm := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(warm) {
		if out, err := bundle.gate.Admit(ctx, req); err != nil || !out.Admitted() {
			b.Fatalf("%+v, %v", out, err)
		}
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if out, err := bundle.gate.Admit(ctx, req); err != nil || !out.Admitted() {
				b.Errorf("%+v, %v", out, err)
				return
			}
		}
	})
}
