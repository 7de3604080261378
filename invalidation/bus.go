// Package invalidation is the bus that keeps every api replica's caches
// fresh: the operator CLI announces revoked and issued keys and changed
// clients (admission's key cache), and the worker announces the market
// data its writes made stale (package readcache's scopes), over Redis
// pub/sub on the channels package rediskeys names.
package invalidation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/rediskeys"
)

// Kinds of Message.
const (
	// InvalidateKeyKind: ID is the hash of a key that changed (revoked).
	InvalidateKeyKind = "key"
	// InvalidateClientKind: ID is a client whose status, tier or limits changed.
	InvalidateClientKind = "client"
	// InvalidateAllKind: forget every cached key.
	InvalidateAllKind = "all"
	// KeyIssuedKind: ID is the hash of a key issued a moment ago.
	KeyIssuedKind = "issued"
	// InvalidateDataKind: ID is a readcache.Scope a write made stale.
	InvalidateDataKind = "data"
)

// Message is one message of the bus.
type Message struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

// KeyRevoked, ClientChanged, KeyIssued and DataChanged are the messages
// the operator CLI and the worker send.
func KeyRevoked(keyHash string) Message {
	return Message{Kind: InvalidateKeyKind, ID: keyHash}
}

// ClientChanged: see KeyRevoked.
func ClientChanged(clientID string) Message {
	return Message{Kind: InvalidateClientKind, ID: clientID}
}

// KeyIssued: see KeyRevoked.
func KeyIssued(keyHash string) Message { return Message{Kind: KeyIssuedKind, ID: keyHash} }

// DataChanged: see KeyRevoked.
func DataChanged(s readcache.Scope) Message {
	return Message{Kind: InvalidateDataKind, ID: s.String()}
}

// DataCache is what the bus drops market data from (readcache.Cache).
type DataCache interface {
	Invalidate(readcache.Scope)
	InvalidateAll()
}

// KeyCache is what the bus drops keys and clients from (admission's
// KeyCache), and tells of keys issued a moment ago.
type KeyCache interface {
	InvalidateKey(keyHash string)
	InvalidateClient(clientID string)
	KeyIssued(keyHash string)
	InvalidateAll()
}

// busHealthCheck is how long a subscriber waits in silence before pinging,
// so a connection that died without a reset is noticed within seconds.
const busHealthCheck = 5 * time.Second

// Bus carries invalidations between the operator CLI, the worker and every
// api replica over Redis pub/sub, so a revocation is effective everywhere
// within a second, a new key works at once and ingested data replaces
// cached data. Pub/sub is fire-and-forget: a replica that was disconnected
// forgets every cached key and datum when it subscribes again (and reloads
// its key directory), and the caches' TTLs bound staleness while it cannot
// subscribe.
type Bus struct {
	rdb     *redis.Client
	channel string
	logger  *slog.Logger
	// retry is the pause between two subscription attempts while Redis is down.
	retry time.Duration
	// subscribed is set once the first subscription has been confirmed
	// and the caches emptied for it (Subscribed).
	subscribed atomic.Bool
}

// Subscribed reports whether the bus has been subscribed once, with the
// caches emptied for it: until then a key read into the cache is dropped
// when the subscription comes (a replica that answered a request with it
// would have to read it again, and could not while Postgres is away).
func (b *Bus) Subscribed() bool { return b.subscribed.Load() }

// NewBus returns the service's bus, on the space's channel
// (rediskeys.Space.Invalidations).
func NewBus(rdb *redis.Client, space rediskeys.Space, logger *slog.Logger) *Bus {
	return newBus(rdb, space.Invalidations(), logger)
}

// NewSandboxBus returns the sandbox's bus, on the space's sandbox channel
// (rediskeys.Space.SandboxInvalidations): the sandbox pipeline's writes
// announced to the sandbox servers' read caches only. Pub/sub channels
// span every database of a Redis server, so the sandbox's queues being in
// a database of their own does not keep its announcements off the live
// channel; a channel of its own does.
func NewSandboxBus(rdb *redis.Client, space rediskeys.Space, logger *slog.Logger) *Bus {
	return newBus(rdb, space.SandboxInvalidations(), logger)
}

func newBus(rdb *redis.Client, channel string, logger *slog.Logger) *Bus {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Bus{rdb: rdb, channel: channel, logger: logger, retry: 500 * time.Millisecond}
}

// Channel is the pub/sub channel of the bus.
func (b *Bus) Channel() string { return b.channel }

// Publish sends inv to every subscribed replica.
func (b *Bus) Publish(ctx context.Context, inv Message) error {
	payload, err := json.Marshal(inv)
	if err != nil {
		return fmt.Errorf("invalidation: encode message: %w", err)
	}
	if err := b.rdb.Publish(ctx, b.channel, payload).Err(); err != nil {
		return fmt.Errorf("invalidation: publish message: %w", err)
	}
	return nil
}

// Run applies invalidations to keys and data (either nil: none) until ctx ends,
// reconnecting after Redis failures. Every (re)subscription empties both,
// because messages published while this replica was not listening are
// lost. It returns nil once ctx ends.
func (b *Bus) Run(ctx context.Context, keys KeyCache, data DataCache) error {
	sub := b.rdb.Subscribe(ctx, b.channel)
	// A receive blocks in a socket read that ignores ctx; closing the
	// subscription is what ends it at shutdown.
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	defer func() {
		stop()
		_ = sub.Close()
	}()
	failing := false
	for {
		msg, err := sub.ReceiveTimeout(ctx, busHealthCheck)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if isTimeout(err) {
				// Silence: check the connection. A failed ping closes it, and
				// the next receive reconnects and resubscribes.
				err = sub.Ping(ctx)
			}
			if err != nil {
				if !failing {
					b.logger.Warn("invalidation: bus disconnected, relying on the caches' TTLs", "err", err)
					failing = true
				}
				timer := time.NewTimer(b.retry)
				select {
				case <-ctx.Done():
					timer.Stop()
					return nil
				case <-timer.C:
				}
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if keys != nil {
					keys.InvalidateAll()
				}
				if data != nil {
					data.InvalidateAll()
				}
				b.subscribed.Store(true)
				if failing {
					b.logger.Info("invalidation: bus subscribed again")
					failing = false
				}
			}
		case *redis.Message:
			b.apply(keys, data, m.Payload)
		}
	}
}

func (b *Bus) apply(keys KeyCache, data DataCache, payload string) {
	var inv Message
	err := json.Unmarshal([]byte(payload), &inv)
	if keys == nil && (err != nil || inv.Kind != InvalidateDataKind) {
		return // a data-only bus (the sandbox's): nothing of keys to act on
	}
	if err != nil {
		// Forgetting everything is always safe; ignoring a revocation is not.
		b.logger.Warn("invalidation: malformed invalidation, dropping the whole key cache", "payload", payload, "err", err)
		keys.InvalidateAll()
		return
	}
	switch inv.Kind {
	case InvalidateDataKind:
		if data == nil {
			return
		}
		s, err := readcache.ParseScope(inv.ID)
		if err != nil {
			b.logger.Warn("invalidation: malformed data invalidation, dropping all cached data", "payload", payload, "err", err)
			data.InvalidateAll()
			return
		}
		data.Invalidate(s)
	case InvalidateKeyKind:
		keys.InvalidateKey(inv.ID)
	case InvalidateClientKind:
		keys.InvalidateClient(inv.ID)
	case KeyIssuedKind:
		keys.KeyIssued(inv.ID)
	default:
		keys.InvalidateAll()
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
