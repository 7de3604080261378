package readcache

import (
	"context"
	"sync"
	"time"
)

// maxEntries bounds memory: past it the whole cache is dropped (cheap and
// rare: the api caches a few thousand values).
const maxEntries = 50_000

// DefaultTTL bounds how stale a cached read is when a write's
// announcement is lost.
const DefaultTTL = 10 * time.Second

// DefaultLoadTimeout bounds one shared load.
const DefaultLoadTimeout = 10 * time.Second

// Cache holds hot read results in process. Entries are dropped by scope
// when a write is announced (Invalidate); the TTL is the backstop when an
// announcement is lost.
type Cache struct {
	ttl         time.Duration
	now         func() time.Time
	loadTimeout time.Duration

	mu     sync.RWMutex
	scopes map[Scope]*scopeEntries
	size   int
	// flights are the loads under way, one per key.
	flights map[Key]*flight
}

// scopeEntries are the values of one scope. gen grows with every
// invalidation of the scope, so a load that started before one does not
// store what it read.
type scopeEntries struct {
	gen     uint64
	entries map[item]entry
}

type entry struct {
	value   any
	expires time.Time
}

type flight struct {
	done  chan struct{}
	value any
	err   error
}

// New returns an empty cache whose entries live for ttl, reading time from now.
func New(ttl time.Duration, now func() time.Time) *Cache {
	return &Cache{ttl: ttl, now: now, loadTimeout: DefaultLoadTimeout,
		scopes: make(map[Scope]*scopeEntries), flights: make(map[Key]*flight)}
}

func (c *Cache) get(k Key) (any, bool) {
	c.mu.RLock()
	var (
		e  entry
		ok bool
	)
	if s := c.scopes[k.Scope]; s != nil {
		e, ok = s.entries[k.item]
	}
	c.mu.RUnlock()
	if !ok || c.now().After(e.expires) {
		return nil, false
	}
	return e.value, true
}

// Generation is a number that changes whenever scope s is invalidated
// (Invalidate, InvalidateAll): a value built outside the cache from data
// of s is stale once it differs from the number read before the build.
func (c *Cache) Generation(s Scope) uint64 {
	c.mu.RLock()
	se := c.scopes[s]
	var gen uint64
	if se != nil {
		gen = se.gen
	}
	c.mu.RUnlock()
	if se != nil {
		return gen
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scopeLocked(s).gen
}

// Invalidate drops every value of scope s.
func (c *Cache) Invalidate(s Scope) {
	c.mu.Lock()
	if se := c.scopes[s]; se != nil {
		c.size -= len(se.entries)
		se.gen++
		clear(se.entries)
	}
	c.mu.Unlock()
}

// InvalidateAll drops everything (after announcements may have been missed).
func (c *Cache) InvalidateAll() {
	c.mu.Lock()
	for _, se := range c.scopes {
		se.gen++
		clear(se.entries)
	}
	c.size = 0
	c.mu.Unlock()
}

// Load returns the cached value of k, or loads it with load and caches it.
// Concurrent calls for one key share one load. The load runs on a context
// detached from every caller's cancellation (it keeps ctx's values, and
// is bounded by the cache's load timeout): the caller whose request starts
// it may go away, the load still completes for the others. A caller whose
// own ctx ends stops waiting and gets ctx's error. Errors are not cached.
func Load[T any](ctx context.Context, c *Cache, k Key, load func(ctx context.Context) (T, error)) (T, error) {
	if v, ok := c.get(k); ok {
		return v.(T), nil
	}
	c.mu.Lock()
	if f := c.flights[k]; f != nil {
		c.mu.Unlock()
		return wait[T](ctx, f)
	}
	// A load may have finished between the look-up above and the lock.
	if se := c.scopes[k.Scope]; se != nil {
		if e, ok := se.entries[k.item]; ok && !c.now().After(e.expires) {
			c.mu.Unlock()
			return e.value.(T), nil
		}
	}
	f := &flight{done: make(chan struct{})}
	c.flights[k] = f
	gen := c.scopeLocked(k.Scope).gen
	c.mu.Unlock()

	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.loadTimeout)
	v, err := load(lctx)
	cancel()
	f.value, f.err = v, err

	c.mu.Lock()
	delete(c.flights, k)
	if se := c.scopeLocked(k.Scope); err == nil && se.gen == gen {
		if c.size >= maxEntries {
			for _, other := range c.scopes {
				clear(other.entries)
			}
			c.size = 0
		}
		if _, dup := se.entries[k.item]; !dup {
			c.size++
		}
		se.entries[k.item] = entry{value: v, expires: c.now().Add(c.ttl)}
	}
	c.mu.Unlock()
	close(f.done)
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

func (c *Cache) scopeLocked(s Scope) *scopeEntries {
	se := c.scopes[s]
	if se == nil {
		se = &scopeEntries{entries: make(map[item]entry)}
		c.scopes[s] = se
	}
	return se
}

func wait[T any](ctx context.Context, f *flight) (T, error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	if f.err != nil {
		var zero T
		return zero, f.err
	}
	return f.value.(T), nil
}
