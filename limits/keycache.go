package limits

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// loadTimeout bounds one load: a load is shared by every request waiting
// for the same key, so it does not run on any one request's context.
const loadTimeout = 5 * time.Second

// KeyLoader looks up a key by its hash. It returns the key's client and
// the key itself (revoked keys included), an error whose domain code is
// ENOTFOUND or EUNAUTHORIZED for a key that does not exist, and any other
// error when the lookup itself failed.
type KeyLoader func(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error)

// KeyCache serves authenticated keys from memory so that a valid key costs
// no Postgres round trip. Entries live for a short TTL, the backstop that
// bounds how long a revocation can go unnoticed should pub/sub be down;
// Bus invalidations make revocations effective at once. Unknown and
// revoked keys are cached as well, so a client retrying a bad key cannot
// hammer Postgres, and concurrent requests for one key share one load.
type KeyCache struct {
	load KeyLoader
	ttl  time.Duration
	now  func() time.Time

	mu      sync.RWMutex
	entries map[string]*keyEntry
	sweepAt time.Time
}

type keyEntry struct {
	ready   chan struct{} // closed once the fields below are set
	client  *domain.Client
	key     *domain.APIKey
	err     error
	expires time.Time
}

// NewKeyCache returns an empty cache. ttl is the backstop (2 s is a good
// value: revocation is then effective within 2 s even without pub/sub).
func NewKeyCache(load KeyLoader, ttl time.Duration, now func() time.Time) *KeyCache {
	return &KeyCache{load: load, ttl: ttl, now: now, entries: make(map[string]*keyEntry)}
}

// Get returns the client and key of keyHash, shared with other requests
// (read them, never modify them). An unknown or revoked key is
// a domain EUNAUTHORIZED error (401); the client's status is left to the
// caller, because suspension and contract expiry are a 403, and expiry
// depends on the request time.
func (c *KeyCache) Get(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error) {
	now := c.now()
	c.mu.RLock()
	e := c.entries[keyHash]
	c.mu.RUnlock()
	if e == nil || !e.fresh(now) {
		e = c.loadEntry(keyHash, now)
	}
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

// fresh reports whether e is loading or loaded and unexpired.
func (e *keyEntry) fresh(now time.Time) bool {
	select {
	case <-e.ready:
		return now.Before(e.expires)
	default:
		return true
	}
}

// loadEntry returns the entry a request should wait for, starting a load
// unless another request did so in the meantime.
func (c *KeyCache) loadEntry(keyHash string, now time.Time) *keyEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[keyHash]; e != nil && e.fresh(now) {
		return e
	}
	if !now.Before(c.sweepAt) {
		c.sweepLocked(now)
		c.sweepAt = now.Add(c.ttl)
	}
	e := &keyEntry{ready: make(chan struct{})}
	c.entries[keyHash] = e
	go c.fill(keyHash, e)
	return e
}

func (c *KeyCache) fill(keyHash string, e *keyEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	client, key, err := c.load(ctx, keyHash)
	switch {
	case err != nil && isUnknownKey(err):
		err = domain.Errorf(domain.EUNAUTHORIZED, "invalid API key: unknown key")
	case err != nil:
	case client == nil || key == nil:
		err = domain.Errorf(domain.EUNAUTHORIZED, "invalid API key: unknown key")
	case key.RevokedAt != nil:
		err = domain.Errorf(domain.EUNAUTHORIZED, "invalid API key: the key has been revoked")
	}
	e.client, e.key, e.err = client, key, err
	e.expires = c.now().Add(c.ttl)
	if err != nil && domain.ErrorCode(err) != domain.EUNAUTHORIZED {
		// A failed lookup says nothing about the key: let the next request retry.
		c.mu.Lock()
		if c.entries[keyHash] == e {
			delete(c.entries, keyHash)
		}
		c.mu.Unlock()
	}
	close(e.ready)
}

func isUnknownKey(err error) bool {
	code := domain.ErrorCode(err)
	return code == domain.ENOTFOUND || code == domain.EUNAUTHORIZED || errors.Is(err, domain.ErrNotFound)
}

// sweepLocked drops expired entries so keys seen once do not stay forever.
func (c *KeyCache) sweepLocked(now time.Time) {
	for h, e := range c.entries {
		if !e.fresh(now) {
			delete(c.entries, h)
		}
	}
}

// InvalidateKey forgets one key (revoked, or its hash reused by a test).
// A load already running for it is forgotten too, since it may have read
// the key before the change.
func (c *KeyCache) InvalidateKey(keyHash string) {
	c.mu.Lock()
	delete(c.entries, keyHash)
	c.mu.Unlock()
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

// InvalidateAll forgets everything; used when invalidations may have been
// missed (pub/sub reconnected).
func (c *KeyCache) InvalidateAll() {
	c.mu.Lock()
	c.entries = make(map[string]*keyEntry)
	c.mu.Unlock()
}

// Len is the number of cached keys, for metrics.
func (c *KeyCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
