package admission

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// loadTimeout bounds one load: a load is shared by every request waiting
// for the same key, so it does not run on any one request's context.
const loadTimeout = 5 * time.Second

// Negative caching: an unknown key is remembered for unknownTTL (a key
// issued later is announced on the bus, which forgets it at once), at
// most maxUnknown of them.
const (
	unknownTTL = 10 * time.Minute
	maxUnknown = 100_000
)

// The directory of key hashes is refreshed every directoryRefresh with
// the keys created since the previous refresh began, less
// directoryOverlap (a transaction that inserted a key may commit late).
const (
	directoryRefresh = 30 * time.Second
	directoryOverlap = time.Minute
	directoryRetry   = time.Second
)

// KeyLoader looks up a key by its hash. It returns the key's client and
// the key itself (revoked keys included), an error whose domain code is
// ENOTFOUND or EUNAUTHORIZED for a key that does not exist, and any other
// error when the lookup itself failed.
type KeyLoader func(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error)

// KeyLister lists the hashes of the keys created at or after since (every
// key for the zero time), revoked ones included.
type KeyLister func(ctx context.Context, since time.Time) ([]string, error)

// The refusals of authentication.
var (
	errUnknownKey = domain.Errorf(domain.EUNAUTHORIZED, "invalid API key: unknown key")
	errRevokedKey = domain.Errorf(domain.EUNAUTHORIZED, "invalid API key: the key has been revoked")
	// errThrottled: the key is not one this replica knows, and its source
	// address has spent its budget of lookups.
	errThrottled = errors.New("admission: lookup throttled")
)

// KeyCache serves authenticated keys from memory so that a valid key costs
// no Postgres round trip.
//
//   - Known keys: entries live for a short TTL, the backstop that bounds
//     how long a revocation can go unnoticed should pub/sub be down; Bus
//     invalidations make revocations effective at once. Half-way through
//     its TTL an entry in use is reloaded in the background, so a busy key
//     never waits for Postgres. Revoked keys are cached the same way.
//   - Unknown keys cost Postgres at most once per replica in unknownTTL:
//     the answer is remembered, and forgotten when the key is issued (Bus).
//   - The directory is the set of every key hash that exists, loaded at
//     start, announced on the bus when a key is issued and refreshed every
//     directoryRefresh (and in full after a bus reconnection). A key that is
//     not in it is looked up only when the caller's throttle allows, so a
//     flood of made-up keys cannot reach Postgres, while a key that exists
//     is never subject to the throttle. Until the first load succeeds every
//     key counts as known.
//
// Concurrent requests for one key share one load, which runs on a context
// of its own: a client that goes away does not fail the others.
type KeyCache struct {
	load KeyLoader
	ttl  time.Duration
	now  func() time.Time

	mu      sync.RWMutex
	entries map[string]*keyEntry
	unknown map[string]time.Time // hash → when the answer expires
	sweepAt time.Time
	known   map[string]struct{} // the directory
	loaded  bool                // the directory has been loaded once
	resync  chan struct{}       // asks the directory for a full reload
	// fromStore turns a hash as the store and the bus write it into this
	// cache's form of it (the gate keys the cache by the binary digest, so
	// a request costs no hex encoding); nil keeps it as is.
	fromStore func(string) string

	wg sync.WaitGroup // loads and refreshes under way
}

type keyEntry struct {
	ready   chan struct{} // closed once the fields below are set
	client  *domain.Client
	key     *domain.APIKey
	err     error
	policy  string // the RateLimit-Policy header of the client
	expires time.Time
	// read is when the answer was read from the store: a failing store
	// keeps it in use for up to maxStale from then (see stale).
	read time.Time
	// refreshAt is when a request starts a reload in the background;
	// refreshing says one is under way. Both under KeyCache.mu.
	refreshAt  time.Time
	refreshing bool
}

// NewKeyCache returns an empty cache. ttl is the backstop (2 s is a good
// value: revocation is then effective within 2 s even without pub/sub).
func NewKeyCache(load KeyLoader, ttl time.Duration, now func() time.Time) *KeyCache {
	return &KeyCache{load: load, ttl: ttl, now: now, entries: make(map[string]*keyEntry),
		unknown: make(map[string]time.Time), known: make(map[string]struct{}), resync: make(chan struct{}, 1)}
}

// Get returns the client and key of keyHash, shared with other requests
// (read them, never modify them). An unknown or revoked key is a domain
// EUNAUTHORIZED error (401); the client's status is left to the caller,
// because suspension and contract expiry are a 403, and expiry depends on
// the request time.
func (c *KeyCache) Get(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error) {
	now := c.now()
	f := c.find([]byte(keyHash), now)
	if f.state == answered {
		return f.client, f.key, f.err
	}
	return c.fetch(ctx, keyHash, f, now)
}

// findState is what memory says about a key.
type findState int

const (
	answered findState = iota // found (or known to be unknown): no lookup
	pending                   // a load is under way or due, for a key that exists
	stranger                  // not in the directory: a lookup needs the throttle's leave
)

type found struct {
	state  findState
	client *domain.Client
	key    *domain.APIKey
	policy string
	err    error
	entry  *keyEntry // the load under way, if any
}

// find answers from memory when it can, without waiting and without
// allocating (this runs on every request: the map look-ups by string(b)
// do not copy b).
func (c *KeyCache) find(keyHash []byte, now time.Time) found {
	c.mu.RLock()
	e := c.entries[string(keyHash)]
	var negative, known bool
	if e == nil {
		exp, ok := c.unknown[string(keyHash)]
		negative = ok && now.Before(exp)
		_, inDir := c.known[string(keyHash)]
		known = inDir || !c.loaded
	}
	c.mu.RUnlock()
	if e != nil {
		select {
		case <-e.ready:
			if !now.Before(e.expires) {
				return found{state: pending} // it was loaded: it exists
			}
			if e.err != nil {
				return found{err: e.err}
			}
			if !now.Before(e.refreshAt) {
				c.refreshAhead(string(keyHash), e)
			}
			return found{client: e.client, key: e.key, policy: e.policy}
		default:
			return found{state: pending, entry: e}
		}
	}
	switch {
	case negative:
		return found{err: errUnknownKey}
	case known:
		return found{state: pending}
	}
	return found{state: stranger}
}

// fetch waits for the load f found under way, or starts one.
func (c *KeyCache) fetch(ctx context.Context, keyHash string, f found, now time.Time) (*domain.Client, *domain.APIKey, error) {
	if f.entry != nil {
		return c.wait(ctx, f.entry)
	}
	return c.wait(ctx, c.loadEntry(keyHash, now))
}

func (c *KeyCache) wait(ctx context.Context, e *keyEntry) (*domain.Client, *domain.APIKey, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		return nil, nil, e.err
	}
	return e.client, e.key, nil
}

// loadEntry returns the entry a request should wait for, starting a load
// unless another request did so in the meantime.
func (c *KeyCache) loadEntry(keyHash string, now time.Time) *keyEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[keyHash]; e != nil && e.usable(now) {
		return e
	}
	// A lookup that ended between this request's find and here left its
	// answer in the negative cache, not in entries: without this check,
	// every request that raced it would look the unknown key up again.
	if exp, ok := c.unknown[keyHash]; ok && now.Before(exp) {
		return unknownEntry
	}
	prev := c.entries[keyHash] // before the sweep drops it: see stale
	if !now.Before(c.sweepAt) {
		c.sweepLocked(now)
		c.sweepAt = now.Add(c.ttl)
	}
	e := &keyEntry{ready: make(chan struct{})}
	c.entries[keyHash] = e
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.fill(keyHash, e, prev)
		close(e.ready)
	}()
	return e
}

// maxStale is how long a key's answer stays in use after it was read
// while the store fails to answer again (a Postgres failover): requests
// with a known key keep being served, and no revocation can be missed
// meanwhile, since revoking is a write to that same store (and announced
// on the bus once it commits).
const maxStale = 5 * time.Minute

// stale is prev's answer (a key that exists, revoked or not) kept in use
// after a reload failed with err, when the failure is the store's and
// prev was read within maxStale; nil otherwise.
func stale(prev *keyEntry, err error, now time.Time) *keyEntry {
	if prev == nil || err == nil || err == errUnknownKey || err == errRevokedKey || prev.client == nil || prev.read.IsZero() {
		return nil
	}
	select {
	case <-prev.ready:
	default:
		return nil
	}
	if prev.err != nil && prev.err != errRevokedKey || !now.Before(prev.read.Add(maxStale)) {
		return nil
	}
	return prev
}

// unknownEntry is the answer for a key the negative cache holds: loaded,
// unknown (shared; never filed in entries).
var unknownEntry = func() *keyEntry {
	e := &keyEntry{ready: make(chan struct{}), err: errUnknownKey}
	close(e.ready)
	return e
}()

// usable reports whether e is loading or loaded and unexpired.
func (e *keyEntry) usable(now time.Time) bool {
	select {
	case <-e.ready:
		return now.Before(e.expires)
	default:
		return true
	}
}

// fill loads keyHash into e (not yet ready) and files the answer: a known
// key into the directory, an unknown one into the negative cache, and a
// failed lookup nowhere (the next request retries).
func (c *KeyCache) fill(keyHash string, e, prev *keyEntry) {
	client, key, err := c.lookup(keyHash)
	now := c.now()
	read := now
	if old := stale(prev, err, now); old != nil {
		client, key, err, read = old.client, old.key, old.err, old.read
	}
	e.client, e.key, e.err, e.read = client, key, err, read
	if client != nil {
		e.policy = policyHeader(client)
	}
	e.expires, e.refreshAt = now.Add(c.ttl), now.Add(c.ttl/2)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil || err == errRevokedKey:
		c.known[keyHash] = struct{}{}
	case err == errUnknownKey:
		if c.entries[keyHash] == e {
			delete(c.entries, keyHash)
			c.rememberUnknownLocked(keyHash, now)
		}
	default:
		if c.entries[keyHash] == e {
			delete(c.entries, keyHash)
		}
	}
}

// lookup asks the loader on a context no request can cancel.
func (c *KeyCache) lookup(keyHash string) (*domain.Client, *domain.APIKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	client, key, err := c.load(ctx, keyHash)
	switch {
	case err != nil && isUnknownKey(err):
		return nil, nil, errUnknownKey
	case err != nil:
		return nil, nil, err
	case client == nil || key == nil:
		return nil, nil, errUnknownKey
	case key.RevokedAt != nil:
		// Kept with the error, so InvalidateClient finds the entry.
		return client, key, errRevokedKey
	}
	return client, key, nil
}

// refreshAhead reloads a key in use in the background; e stays in use
// until the new answer replaces it. A reload that an invalidation
// overtook is dropped (it may have read the key before the change).
func (c *KeyCache) refreshAhead(keyHash string, e *keyEntry) {
	c.mu.Lock()
	if e.refreshing || c.entries[keyHash] != e {
		c.mu.Unlock()
		return
	}
	e.refreshing = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		client, key, err := c.lookup(keyHash)
		now := c.now()
		c.mu.Lock()
		defer c.mu.Unlock()
		e.refreshing = false
		if c.entries[keyHash] != e {
			return
		}
		switch {
		case err == errUnknownKey:
			delete(c.entries, keyHash)
			c.rememberUnknownLocked(keyHash, now)
		case err == nil || err == errRevokedKey:
			fresh := &keyEntry{ready: make(chan struct{}), client: client, key: key, err: err,
				policy: policyHeader(client), expires: now.Add(c.ttl), read: now, refreshAt: now.Add(c.ttl / 2)}
			close(fresh.ready)
			c.entries[keyHash] = fresh
		case stale(e, err, now) != nil:
			// The store fails: the answer read before stays in use (see
			// maxStale), and the next request after a quarter of the TTL
			// asks the store again in the background.
			kept := &keyEntry{ready: make(chan struct{}), client: e.client, key: e.key, err: e.err,
				policy: e.policy, expires: now.Add(c.ttl), read: e.read, refreshAt: now.Add(c.ttl / 4)}
			close(kept.ready)
			c.entries[keyHash] = kept
		}
		// Otherwise a failed lookup leaves e to expire: the request after that retries.
	}()
}

func (c *KeyCache) rememberUnknownLocked(keyHash string, now time.Time) {
	if len(c.unknown) >= maxUnknown {
		for h, exp := range c.unknown {
			if !now.Before(exp) {
				delete(c.unknown, h)
			}
		}
		if len(c.unknown) >= maxUnknown {
			clear(c.unknown)
		}
	}
	c.unknown[keyHash] = now.Add(unknownTTL)
}

func isUnknownKey(err error) bool {
	code := domain.ErrorCode(err)
	return code == domain.ENOTFOUND || code == domain.EUNAUTHORIZED || errors.Is(err, domain.ErrNotFound)
}

// sweepLocked drops expired entries so keys seen once do not stay forever.
func (c *KeyCache) sweepLocked(now time.Time) {
	for h, e := range c.entries {
		if !e.usable(now) {
			delete(c.entries, h)
		}
	}
	for h, exp := range c.unknown {
		if !now.Before(exp) {
			delete(c.unknown, h)
		}
	}
}

// InvalidateKey forgets one key (revoked, or its hash reused by a test).
// A load already running for it is forgotten too, since it may have read
// the key before the change.
func (c *KeyCache) InvalidateKey(keyHash string) {
	keyHash = c.norm(keyHash)
	c.mu.Lock()
	delete(c.entries, keyHash)
	c.mu.Unlock()
}

// norm is a hash from the store or the bus in this cache's form.
func (c *KeyCache) norm(storeHash string) string {
	if c.fromStore == nil {
		return storeHash
	}
	return c.fromStore(storeHash)
}

// InvalidateClient forgets every key of a client (suspended, activated,
// tier or limits changed), and every load still running, whose client is
// not known yet.
func (c *KeyCache) InvalidateClient(clientID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, e := range c.entries {
		select {
		case <-e.ready:
			if e.client != nil && e.client.ID == clientID || e.key != nil && e.key.ClientID == clientID {
				delete(c.entries, h)
			}
		default:
			delete(c.entries, h)
		}
	}
}

// InvalidateAll forgets every cached key; used when invalidations may have
// been missed (pub/sub reconnected). The directory reloads in full.
func (c *KeyCache) InvalidateAll() {
	c.mu.Lock()
	c.entries = make(map[string]*keyEntry)
	clear(c.unknown)
	c.mu.Unlock()
	select {
	case c.resync <- struct{}{}:
	default:
	}
}

// KeyIssued records a key issued a moment ago: it is in the directory, and
// no earlier "unknown" answer for it stands.
func (c *KeyCache) KeyIssued(keyHash string) {
	keyHash = c.norm(keyHash)
	c.mu.Lock()
	c.known[keyHash] = struct{}{}
	delete(c.unknown, keyHash)
	c.mu.Unlock()
}

func (c *KeyCache) directoryLoaded() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loaded
}

// Len is the number of cached keys, for metrics.
func (c *KeyCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// runDirectory keeps the directory of key hashes: a full load first (and
// after every InvalidateAll), then the keys created since the previous
// load, every directoryRefresh, until ctx ends.
func (c *KeyCache) runDirectory(ctx context.Context, list KeyLister, logger *slog.Logger) {
	var since time.Time // the zero time: every key
	failing := false
	for {
		start := c.now()
		hashes, err := list(ctx, since)
		next := directoryRefresh
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				logger.Warn("admission: loading the key directory failed; unknown keys are looked up without throttling until it loads", "err", err)
				failing = true
			}
			next = directoryRetry
		} else {
			failing = false
			c.mu.Lock()
			for _, h := range hashes {
				c.known[c.norm(h)] = struct{}{}
			}
			c.loaded = true
			c.mu.Unlock()
			since = start.Add(-directoryOverlap)
		}
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-c.resync:
			since = time.Time{}
		case <-timer.C:
		}
		timer.Stop()
	}
}

// close waits for the loads under way.
func (c *KeyCache) close() { c.wg.Wait() }
