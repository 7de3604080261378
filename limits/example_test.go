package limits_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/limits"
)

// ledger is the part of store.QuotaLedger the example needs.
type ledger interface {
	Admit(ctx context.Context, clientID string, quota *int64, now time.Time) (int64, bool, error)
}

// Example shows the order of checks in front of every authenticated
// request: key, client status, rate limit, quota. Only a request that
// passes all four is counted against the quota.
func Example() {
	ctx := context.Background()
	logger := slog.Default()
	opts, _ := limits.RedisOptions("redis://127.0.0.1:6379/0")
	rdb := redis.NewClient(opts)

	var loadKey limits.KeyLoader // store's lookup by key hash
	var quotas ledger            // store.NewQuotaLedger(db, logger)

	keys := limits.NewKeyCache(loadKey, 2*time.Second, time.Now)
	go func() { _ = limits.NewBus(rdb, "", logger).Run(ctx, keys) }()
	rate := limits.NewFallbackLimiter(limits.NewRollingWindowLimiter(rdb, ""), limits.NewLocalLimiter(time.Now), logger, time.Now)

	handle := func(ctx context.Context, rawKey string) string {
		now := time.Now()
		if !domain.CheckKeyFormat(rawKey) {
			return "401"
		}
		client, _, err := keys.Get(ctx, domain.HashKey(rawKey))
		if err != nil {
			return "401 or 500, by domain.ErrorCode(err)"
		}
		if client.EffectiveStatus(now) != domain.StatusActive {
			return "403"
		}
		d, err := rate.Allow(ctx, client.ID, client.RatePerMinute())
		if err != nil {
			return "request ended"
		}
		// Set RateLimit-Policy, and RateLimit: "minute";r=<d.Remaining>;t=<d.Reset seconds>.
		if !d.Allowed {
			return "429 Too Many Requests, Retry-After: d.RetryAfter seconds"
		}
		used, admitted, err := quotas.Admit(ctx, client.ID, client.MonthlyQuota(), now)
		if err != nil {
			return "500 (or the request ended): do not serve it"
		}
		if !admitted {
			return "429 monthly quota, Retry-After: until domain.NextMonth(now)"
		}
		_ = used // GET /usage shows used, which includes this request
		return "serve"
	}
	_ = handle
}
