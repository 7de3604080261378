package admission

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// ThrottleConfig sets the failed-authentication throttle. Zero fields take
// the defaults.
type ThrottleConfig struct {
	// PerAddress is the sustained failures (and lookups of keys this
	// replica does not know) per second allowed from one source address,
	// Burst how many it may spend at once.
	PerAddress float64
	Burst      float64
	// LookupsPerSecond bounds the lookups of unknown keys from every
	// address together (what Postgres can be made to do), LookupBurst at once.
	LookupsPerSecond float64
	LookupBurst      float64
	// Delay is how late an address that has spent its budget gets the
	// answer to a failed authentication.
	Delay time.Duration
	// MaxDelayedPerAddress and MaxDelayed bound the answers held back at
	// once; past them a refusal is answered at once.
	MaxDelayedPerAddress int
	MaxDelayed           int
}

func (c ThrottleConfig) withDefaults() ThrottleConfig {
	def := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.PerAddress, 5)
	def(&c.Burst, 20)
	def(&c.LookupsPerSecond, 100)
	def(&c.LookupBurst, 200)
	if c.Delay <= 0 {
		c.Delay = time.Second
	}
	if c.MaxDelayedPerAddress <= 0 {
		c.MaxDelayedPerAddress = 256
	}
	if c.MaxDelayed <= 0 {
		c.MaxDelayed = 4096
	}
	return c
}

// maxAddresses bounds the throttle's memory; past it the idle addresses
// are forgotten, and if none is idle, all of them.
const maxAddresses = 100_000

// authThrottle is the per-address throttle of failed authentication. Each
// failure (a missing, malformed, unknown or revoked key) spends one token
// of the source address's bucket, and so does each lookup of a key this
// replica does not know; buckets refill at PerAddress per second. An
// address with no token left cannot have unknown keys looked up (a 429
// without touching Postgres), and its failures are answered Delay late, so
// a flood from it slows down to its connection count per Delay. A key this
// replica knows is never looked at here: a paying client behind the same
// address (an office NAT, loopback in tests) is not affected.
type authThrottle struct {
	cfg ThrottleConfig
	now func() time.Time

	mu      sync.Mutex
	addrs   map[string]*bucket
	lookups bucket // every address together, lookups only
	delayed int
}

type bucket struct {
	tokens  float64
	at      time.Time
	delayed int
}

func newAuthThrottle(cfg ThrottleConfig, now func() time.Time) *authThrottle {
	cfg = cfg.withDefaults()
	return &authThrottle{cfg: cfg, now: now, addrs: make(map[string]*bucket),
		lookups: bucket{tokens: cfg.LookupBurst, at: now()}}
}

// refill brings b up to now. t.mu is held.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
	}
	b.at = now
}

// addrKey is the throttled unit of a remote address ("ip:port" or "ip"):
// the IPv4 address, or the /64 of an IPv6 one (one host's share).
func addrKey(remote string) string {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return prefixOf(ap.Addr())
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return prefixOf(a)
	}
	return remote
}

func prefixOf(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// bucketOf returns the bucket of addr, brought up to now. t.mu is held.
func (t *authThrottle) bucketOf(addr string, now time.Time) *bucket {
	b := t.addrs[addr]
	if b == nil {
		if len(t.addrs) >= maxAddresses {
			t.forgetIdle(now)
		}
		b = &bucket{tokens: t.cfg.Burst, at: now}
		t.addrs[addr] = b
	}
	b.refill(now, t.cfg.PerAddress, t.cfg.Burst)
	return b
}

// forgetIdle drops the buckets that are full again. t.mu is held.
func (t *authThrottle) forgetIdle(now time.Time) {
	for a, b := range t.addrs {
		b.refill(now, t.cfg.PerAddress, t.cfg.Burst)
		if b.tokens >= t.cfg.Burst && b.delayed == 0 {
			delete(t.addrs, a)
		}
	}
	if len(t.addrs) >= maxAddresses {
		clear(t.addrs)
	}
}

// mayLookUp spends a token of addr and of the lookup budget for the lookup
// of a key this replica does not know. When either is spent it returns
// false and how long until both have a token again.
func (t *authThrottle) mayLookUp(addr string) (bool, time.Duration) { return t.lookUp(addr, true) }

// peek is mayLookUp without spending anything.
func (t *authThrottle) peek(addr string) (bool, time.Duration) { return t.lookUp(addr, false) }

func (t *authThrottle) lookUp(addr string, spend bool) (bool, time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucketOf(addr, now)
	t.lookups.refill(now, t.cfg.LookupsPerSecond, t.cfg.LookupBurst)
	if b.tokens >= 1 && t.lookups.tokens >= 1 {
		if spend {
			b.tokens--
			t.lookups.tokens--
		}
		return true, 0
	}
	return false, max(time.Duration((1-b.tokens)/t.cfg.PerAddress*float64(time.Second)),
		time.Duration((1-t.lookups.tokens)/t.cfg.LookupsPerSecond*float64(time.Second)))
}

// failed records a failed authentication from addr and holds the caller
// back for the delay when addr has no token left (up to the caps). It
// returns early when ctx ends.
func (t *authThrottle) failed(ctx context.Context, addr string) {
	now := t.now()
	t.mu.Lock()
	b := t.bucketOf(addr, now)
	if b.tokens >= 1 {
		b.tokens--
		t.mu.Unlock()
		return
	}
	if b.delayed >= t.cfg.MaxDelayedPerAddress || t.delayed >= t.cfg.MaxDelayed {
		t.mu.Unlock()
		return
	}
	b.delayed++
	t.delayed++
	t.mu.Unlock()
	timer := time.NewTimer(t.cfg.Delay)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	t.mu.Lock()
	b.delayed--
	t.delayed--
	t.mu.Unlock()
}
