package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// apiDeps are the collaborators of the api role.
type apiDeps struct {
	store   *store.DB
	auth    api.Authenticator
	limiter api.Limiter
	checks  []api.Check
	run     func(ctx context.Context) error
	closers []func()
}

func (d *apiDeps) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

func newAPIDeps(ctx context.Context, cfg Config, db *store.DB, logger *slog.Logger) (*apiDeps, error) {
	d := &apiDeps{store: db, auth: db, run: func(ctx context.Context) error { <-ctx.Done(); return nil }}
	d.limiter = storeLimiter{db: db}
	return d, nil
}

// storeLimiter counts the monthly quota in Postgres, one atomic statement
// per request.
type storeLimiter struct{ db *store.DB }

func (l storeLimiter) Admit(ctx context.Context, c *domain.Client, now time.Time) (api.Admission, error) {
	quota := c.MonthlyQuota()
	used, ok, err := l.db.CountRequest(ctx, c.ID, quota, now)
	if err != nil {
		return api.Admission{}, err
	}
	adm := api.Admission{Allowed: ok, RateLimit: c.RatePerMinute(), RateRemaining: c.RatePerMinute(), Quota: quota, Used: used}
	if !ok {
		adm.Refusal = domain.EQUOTA
		adm.RetryAfter = domain.NextMonth(now).Sub(now)
	}
	return adm, nil
}
