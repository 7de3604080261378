package api

import (
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// readCache holds hot read results in process. Ingest invalidates entries
// (over Redis pub/sub, see Server.InvalidateMarketData); the TTL is the
// backstop when a notification is lost.
type readCache struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.RWMutex
	m   map[string]cacheEntry
	// loads collapses concurrent misses of one key into one load, so an
	// invalidation under load costs one query, not one per waiting request.
	loads singleflight.Group
}

type cacheEntry struct {
	value   any
	expires time.Time
}

func newReadCache(ttl time.Duration, now func() time.Time) *readCache {
	return &readCache{ttl: ttl, now: now, m: map[string]cacheEntry{}}
}

func (c *readCache) get(key string) (any, bool) {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if !ok || c.now().After(e.expires) {
		return nil, false
	}
	return e.value, true
}

func (c *readCache) put(key string, v any) {
	c.mu.Lock()
	if len(c.m) > 50000 { // bound memory: a full reset is cheap and rare
		c.m = map[string]cacheEntry{}
	}
	c.m[key] = cacheEntry{value: v, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
}

// invalidatePrefix drops every entry whose key starts with prefix ("" = all).
func (c *readCache) invalidatePrefix(prefix string) {
	c.mu.Lock()
	for k := range c.m {
		if strings.HasPrefix(k, prefix) {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

// cached returns the cached value of key or loads and caches it. Errors are not cached.
func cached[T any](c *readCache, key string, load func() (T, error)) (T, error) {
	if v, ok := c.get(key); ok {
		return v.(T), nil
	}
	v, err, _ := c.loads.Do(key, func() (any, error) {
		v, err := load()
		if err != nil {
			return v, err
		}
		c.put(key, v)
		return v, nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}
