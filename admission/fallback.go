package admission

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeInterval is how often a degraded limiter's watcher tries Redis
// again: a dead Redis costs one failed attempt per second per replica, off
// the request path.
const probeInterval = time.Second

// FallbackLimiter is the rate limiter the api uses: the shared Redis
// window when Redis answers, this replica's LocalLimiter when it does not.
// A Redis outage therefore never fails a request; it only loosens the
// limit to N per replica until Redis is back, and Degraded reports it so
// /readyz can say so. While degraded, requests do not wait on Redis at
// all: Watch probes it in the background and ends the degradation as soon
// as it answers, with or without traffic.
type FallbackLimiter struct {
	redis  *RollingWindowLimiter
	local  *LocalLimiter
	logger *slog.Logger
	now    func() time.Time

	degraded atomic.Bool
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
	if f.degraded.Load() {
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
	if d.Allowed {
		f.local.record(clientID, max(limit, 1), true, now)
	}
	return d, nil
}

// Degraded reports whether the last attempt to reach Redis failed, i.e.
// whether limits are currently per replica.
func (f *FallbackLimiter) Degraded() bool { return f.degraded.Load() }

// Watch probes Redis every interval (probeInterval when 0) while the
// limiter is degraded and ends the degradation once Redis answers. It
// returns when ctx ends; Gate.Run runs it.
func (f *FallbackLimiter) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = probeInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f.degraded.Load() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f.redis.ping(pctx)
		cancel()
		if err == nil {
			f.markRecovered()
		}
	}
}

func (f *FallbackLimiter) markDegraded(err error) {
	if f.degraded.CompareAndSwap(false, true) {
		f.logger.Warn("admission: redis unreachable, rate limiting per replica until it answers", "err", err)
	}
}

func (f *FallbackLimiter) markRecovered() {
	if f.degraded.CompareAndSwap(true, false) {
		f.logger.Info("admission: redis answers again, rate limiting shared across replicas")
	}
}
