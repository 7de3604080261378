package limits

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kinds of Invalidation.
const (
	InvalidateKeyKind    = "key"
	InvalidateClientKind = "client"
	InvalidateAllKind    = "all"
	// InvalidateMarketKind announces an ingest write: ID is the prefix of
	// the api's market-data cache keys to drop ("tickers:crypto/binance/spot").
	InvalidateMarketKind = "market"
)

// Invalidation tells every api replica to forget cached keys: one key
// (ID is its hash), every key of a client (ID is the client id), or all.
type Invalidation struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

// busHealthCheck is how long a subscriber waits in silence before pinging,
// so a connection that died without a reset is noticed within seconds.
const busHealthCheck = 5 * time.Second

// Bus carries invalidations between the operator CLI and every api
// replica over Redis pub/sub, so a revocation is effective everywhere
// within a second. Pub/sub is fire-and-forget: a replica that was
// disconnected forgets its whole cache when it subscribes again, and the
// cache TTL bounds staleness while it cannot subscribe.
type Bus struct {
	rdb     *redis.Client
	channel string
	logger  *slog.Logger
	// retry is the pause between two subscription attempts while Redis is down.
	retry time.Duration
	// OnMarket, when set, receives market-data invalidations (and "" after
	// every (re)subscription, when messages may have been missed).
	OnMarket func(prefix string)
}

// NewBus returns a bus on channel prefix+"marketd:invalidate".
func NewBus(rdb *redis.Client, prefix string, logger *slog.Logger) *Bus {
	return &Bus{rdb: rdb, channel: prefix + "marketd:invalidate", logger: logger, retry: 500 * time.Millisecond}
}

// Channel is the pub/sub channel of the bus.
func (b *Bus) Channel() string { return b.channel }

// Publish sends inv to every subscribed replica.
func (b *Bus) Publish(ctx context.Context, inv Invalidation) error {
	payload, err := json.Marshal(inv)
	if err != nil {
		return fmt.Errorf("limits: encode invalidation: %w", err)
	}
	if err := b.rdb.Publish(ctx, b.channel, payload).Err(); err != nil {
		return fmt.Errorf("limits: publish invalidation: %w", err)
	}
	return nil
}

// Run applies invalidations to cache until ctx ends, reconnecting after
// Redis failures. Every (re)subscription empties the cache, because
// messages published while this replica was not listening are lost. It
// returns nil once ctx ends.
func (b *Bus) Run(ctx context.Context, cache *KeyCache) error {
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
					b.logger.Warn("limits: invalidation bus disconnected, relying on the key cache TTL", "err", err)
					failing = true
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(b.retry):
				}
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				cache.InvalidateAll()
				if b.OnMarket != nil {
					b.OnMarket("")
				}
				if failing {
					b.logger.Info("limits: invalidation bus subscribed again")
					failing = false
				}
			}
		case *redis.Message:
			b.apply(cache, m.Payload)
		}
	}
}

func (b *Bus) apply(cache *KeyCache, payload string) {
	var inv Invalidation
	if err := json.Unmarshal([]byte(payload), &inv); err != nil {
		// Forgetting everything is always safe; ignoring a revocation is not.
		b.logger.Warn("limits: malformed invalidation, dropping the whole key cache", "payload", payload, "err", err)
		cache.InvalidateAll()
		return
	}
	switch inv.Kind {
	case InvalidateMarketKind:
		if b.OnMarket != nil {
			b.OnMarket(inv.ID)
		}
	case InvalidateKeyKind:
		cache.InvalidateKey(inv.ID)
	case InvalidateClientKind:
		cache.InvalidateClient(inv.ID)
	default:
		cache.InvalidateAll()
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
