package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/limits"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/webhook"
	"github.com/marketscreener/market/worker"
)

// keyCacheTTL is the backstop of revocation when pub/sub is down: a
// revoked key or suspended client is refused within this time anyway.
const keyCacheTTL = 2 * time.Second

// apiDeps are the collaborators of the api role.
type apiDeps struct {
	store   *store.DB
	auth    api.Authenticator
	limiter api.Limiter
	checks  []api.Check
	bus     *limits.Bus
	run     func(ctx context.Context) error
	closers []func()
}

func (d *apiDeps) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

func newAPIDeps(cfg Config, db *store.DB, logger *slog.Logger) (*apiDeps, error) {
	opts, err := limits.RedisOptions(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	keys := limits.NewKeyCache(db.Authenticate, keyCacheTTL, time.Now)
	bus := limits.NewBus(rdb, "", logger)
	rate := limits.NewFallbackLimiter(limits.NewRollingWindowLimiter(rdb, ""), limits.NewLocalLimiter(time.Now), logger, time.Now)
	ledger := store.NewQuotaLedger(db, logger)
	d := &apiDeps{
		store:   db,
		auth:    cachedAuth{keys},
		limiter: &admitter{rate: rate, ledger: ledger},
		checks: []api.Check{{Name: "redis", Probe: func(ctx context.Context) error {
			if err := rdb.Ping(ctx).Err(); err != nil {
				return errors.New("redis unreachable: rate limits fall back to per-replica windows")
			}
			if rate.Degraded() {
				return errors.New("rate limiter recovering from a Redis outage")
			}
			return nil
		}}},
		bus:     bus,
		run:     func(ctx context.Context) error { return bus.Run(ctx, keys) },
		closers: []func(){func() { _ = rdb.Close() }, ledger.Close},
	}
	return d, nil
}

// cachedAuth maps the key cache's answers onto the api's contract.
type cachedAuth struct{ keys *limits.KeyCache }

func (a cachedAuth) Authenticate(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error) {
	// Unknown and revoked keys come back as EUNAUTHORIZED (cached refusals).
	return a.keys.Get(ctx, keyHash)
}

// admitter applies the rolling-window rate limit (Redis, falling back to a
// per-replica window) and then the exact, durable monthly quota (Postgres
// group commit). Only a request that passes both is counted.
type admitter struct {
	rate   *limits.FallbackLimiter
	ledger *store.QuotaLedger
}

func (a *admitter) Admit(ctx context.Context, c *domain.Client, now time.Time) (api.Admission, error) {
	d, err := a.rate.Allow(ctx, c.ID, c.RatePerMinute())
	if err != nil {
		return api.Admission{}, err
	}
	adm := api.Admission{Allowed: d.Allowed, RateLimit: d.Limit, RateRemaining: d.Remaining, RateReset: d.Reset,
		Quota: c.MonthlyQuota()}
	if !d.Allowed {
		adm.Refusal, adm.RetryAfter = domain.ERATELIMIT, d.RetryAfter
		return adm, nil
	}
	used, ok, err := a.ledger.Admit(ctx, c.ID, adm.Quota, now)
	if err != nil {
		return api.Admission{}, err
	}
	adm.Used = used
	if !ok {
		adm.Allowed, adm.Refusal, adm.RetryAfter = false, domain.EQUOTA, domain.NextMonth(now).Sub(now)
	}
	return adm, nil
}

// registerIngest adds the market-data ingest and the analytics scoring
// handlers to the worker. Writes are announced on the invalidation bus so
// api replicas drop cached data.
func registerIngest(cfg Config, db *store.DB, w *worker.Worker, logger *slog.Logger) (func(), error) {
	reg, err := feeds.New(feeds.Config{Names: cfg.Feeds, OandaToken: cfg.OandaToken, AlpacaKeyID: cfg.AlpacaKeyID,
		AlpacaSecret: cfg.AlpacaSecret, Logger: logger, Seed: cfg.SyntheticSeed})
	if err != nil {
		return nil, err
	}
	opts, err := limits.RedisOptions(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	bus := limits.NewBus(rdb, "", logger)
	notify := func(ctx context.Context, prefix string) {
		_ = bus.Publish(ctx, limits.Invalidation{Kind: limits.InvalidateMarketKind, ID: prefix})
	}
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: logger, Now: time.Now, MaxCandleSymbols: cfg.MaxCandleSymbols, Notify: notify}
	in.Register(w)
	sc := &worker.Scorer{Store: db, Region: cfg.Region, Logger: logger, Now: time.Now, Notify: notify}
	sc.Register(w)
	st := &worker.StatsJob{Store: db, Region: cfg.Region, Logger: logger, Now: time.Now, Notify: notify}
	st.Register(w)
	box, err := secretBox(cfg)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	if box == nil {
		logger.Warn("webhook deliveries are off: MARKET_SECRET_KEY is not set")
	} else {
		d := &worker.Dispatcher{Store: db, Box: box, Logger: logger, Now: time.Now,
			Client: webhookClient(cfg), Concurrency: cfg.WebhookConcurrency}
		d.Register(w)
	}
	return func() { _ = rdb.Close() }, nil
}

// webhookClient is the hardened client of webhook deliveries and test pings.
func webhookClient(cfg Config) *http.Client {
	return webhook.NewClient(webhook.ClientConfig{AllowPrivate: cfg.WebhookAllowPrivate, ExtraRootsPEM: cfg.WebhookCAPEM})
}

// secretBox is the webhook-secret cipher of MARKET_SECRET_KEY; nil when the
// key is not set (subscriptions are then refused and nothing is sent).
func secretBox(cfg Config) (*domain.SecretBox, error) {
	if len(cfg.SecretKey) == 0 {
		return nil, nil
	}
	return domain.NewSecretBox(cfg.SecretKey)
}
