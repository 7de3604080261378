package admission

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeInterval bounds how often a degraded limiter tries Redis again, so a
// dead Redis costs at most one failed attempt per second per replica.
const probeInterval = time.Second

// FallbackLimiter is the rate limiter the api uses: the shared Redis
// window when Redis answers, this replica's LocalLimiter when it does not.
// A Redis outage therefore never fails a request; it only loosens the
// limit to N per replica until Redis is back, and Degraded reports it so
// /readyz can say so.
type FallbackLimiter struct {
	redis  *RollingWindowLimiter
	local  *LocalLimiter
	logger *slog.Logger
	now    func() time.Time

	degraded atomic.Bool
	// nextProbe is the earliest time (unix nanoseconds) a degraded limiter
	// asks Redis again; claiming it with a CAS lets one request probe.
	nextProbe atomic.Int64
}

// NewFallbackLimiter combines the shared and the local limiter. Every
// request Redis admits is also observed by local, so a replica that falls
// back already knows what it admitted in the last minute.
func NewFallbackLimiter(shared *RollingWindowLimiter, local *LocalLimiter, logger *slog.Logger, now func() time.Time) *FallbackLimiter {
	return &FallbackLimiter{redis: shared, local: local, logger: logger, now: now}
}

// Allow decides on one request of clientID. It returns an error only when
// ctx ends; a Redis failure is answered by the local limiter.
func (f *FallbackLimiter) Allow(ctx context.Context, clientID string, limit int) (Decision, error) {
	return f.allowAt(ctx, clientID, limit, f.now())
}

// allowAt is Allow with the clock read by the caller.
func (f *FallbackLimiter) allowAt(ctx context.Context, clientID string, limit int, now time.Time) (Decision, error) {
	if f.degraded.Load() && !f.claimProbe(now) {
		return f.local.record(clientID, max(limit, 1), false, now), nil
	}
	d, err := f.redis.allowAt(ctx, clientID, limit, now)
	if errors.Is(err, redis.ErrPoolTimeout) {
		// Every pooled connection is busy: Redis is slow, not gone. Ask
		// again rather than loosen the limit to per replica.
		d, err = f.redis.allowAt(ctx, clientID, limit, now)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return Decision{}, err
		}
		f.markDegraded(err)
		return f.local.record(clientID, max(limit, 1), false, f.now()), nil
	}
	if f.degraded.Load() {
		f.markRecovered()
	}
	if d.Allowed {
		f.local.record(clientID, max(limit, 1), true, now)
	}
	return d, nil
}

// Degraded reports whether the last attempt to reach Redis failed, i.e.
// whether limits are currently per replica.
func (f *FallbackLimiter) Degraded() bool { return f.degraded.Load() }

func (f *FallbackLimiter) claimProbe(at time.Time) bool {
	now := at.UnixNano()
	next := f.nextProbe.Load()
	return now >= next && f.nextProbe.CompareAndSwap(next, now+probeInterval.Nanoseconds())
}

func (f *FallbackLimiter) markDegraded(err error) {
	f.nextProbe.Store(f.now().Add(probeInterval).UnixNano())
	if f.degraded.CompareAndSwap(false, true) {
		f.logger.Warn("admission: redis unreachable, rate limiting per replica until it answers", "err", err)
	}
}

func (f *FallbackLimiter) markRecovered() {
	if f.degraded.CompareAndSwap(true, false) {
		f.logger.Info("admission: redis answers again, rate limiting shared across replicas")
	}
}
