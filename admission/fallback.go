package admission

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/rediskeys"
)

// FallbackLimiter is the rate limiter the api uses: the shared Redis
// window when Redis answers, this replica's LocalLimiter when it does not,
// under the Redis-backed counters' outage policy (rediskeys.Outage). A
// Redis outage therefore never fails a request; it only loosens the limit
// to N per replica until Redis is back, and Degraded reports it so /readyz
// and the metrics can say so. While degraded, requests do not wait on
// Redis at all: the policy's probe watches for it off the request path and
// ends the degradation as soon as it answers, with or without traffic.
type FallbackLimiter struct {
	redis  *RollingWindowLimiter
	local  *LocalLimiter
	now    func() time.Time
	outage *rediskeys.Outage
}

// NewFallbackLimiter combines the shared and the local limiter. Every
// request Redis admits is also observed by local, so a replica that falls
// back already knows what it admitted in the last minute.
func NewFallbackLimiter(shared *RollingWindowLimiter, local *LocalLimiter, logger *slog.Logger, now func() time.Time) *FallbackLimiter {
	return &FallbackLimiter{redis: shared, local: local, now: now,
		outage: rediskeys.NewOutage(rediskeys.CounterRateWindow, "rate limits per replica", logger, nil, shared.ping)}
}

// Allow decides on one request of clientID. It returns an error only when
// ctx ends; a Redis failure is answered by the local limiter.
func (f *FallbackLimiter) Allow(ctx context.Context, clientID string, limit int) (Decision, error) {
	return f.allowAt(ctx, clientID, limit, f.now())
}

// allowAt is Allow with the clock read by the caller.
func (f *FallbackLimiter) allowAt(ctx context.Context, clientID string, limit int, now time.Time) (Decision, error) {
	if !f.outage.Ask() {
		f.outage.Fallback()
		return f.local.record(clientID, max(limit, 1), false, now), nil
	}
	d, err := f.redis.allowAt(ctx, clientID, limit, now)
	if errors.Is(err, redis.ErrPoolTimeout) {
		// Every pooled connection is busy: Redis is slow, not gone. Ask
		// again rather than loosen the limit to per replica.
		d, err = f.redis.allowAt(ctx, clientID, limit, now)
	}
	if !f.outage.Done(ctx, err) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Decision{}, ctxErr
		}
		f.outage.Fallback()
		return f.local.record(clientID, max(limit, 1), false, f.now()), nil
	}
	if d.Allowed {
		f.local.record(clientID, max(limit, 1), true, now)
	}
	return d, nil
}

// Degraded reports whether the limits are currently per replica (an
// outage of Redis in progress).
func (f *FallbackLimiter) Degraded() bool { return f.outage.Down() }
