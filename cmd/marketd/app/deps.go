package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/calendar"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/stream"
	"github.com/marketscreener/market/webhook"
	"github.com/marketscreener/market/worker"
)

// apiDeps are the collaborators of the api role: the gate (package
// admission) and the read cache the bus keeps fresh.
type apiDeps struct {
	gate    *admission.Gate
	cache   *readcache.Cache
	rdb     *redis.Client
	slots   *stream.Slots
	checks  []api.Check
	closers []func()
}

func (d *apiDeps) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

func newAPIDeps(cfg Config, db *store.DB, logger *slog.Logger) (*apiDeps, error) {
	opts, err := rediskeys.ClientOptions(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	rdb := opts.NewClient()
	cache := readcache.New(readcache.DefaultTTL, time.Now)
	gate := admission.New(admission.Config{Redis: rdb, Keys: db, Usage: db, Data: cache, Logger: logger})
	return &apiDeps{
		gate:    gate,
		cache:   cache,
		rdb:     rdb,
		slots:   stream.NewSlots(rdb, "", 0, logger),
		checks:  []api.Check{{Name: "redis", Probe: gate.Probe}},
		closers: []func(){func() { _ = rdb.Close() }, gate.Close},
	}, nil
}

// openStreamDB opens the pool of a database's event-stream reads (the
// hub's, the replays'): apart from the request pool, so that streams never
// take a request's connection, and with every statement bounded by the
// stream's query budget. One connection is the hub's; the others serve
// the replays (api.Config.StreamReplays).
func openStreamDB(ctx context.Context, cfg Config, url string, logger *slog.Logger) (*store.DB, error) {
	return store.Open(ctx, url, store.Options{Logger: logger, MaxConns: int32(cfg.StreamDBConns), StatementTimeout: api.StreamQueryTimeout})
}

// newStreamHub is the api replica's event hub: it reads the stream's log
// from Postgres and renders events with the api (set before the hub runs).
func newStreamHub(db *store.DB, render func() *api.Server, logger *slog.Logger) *stream.Hub {
	return stream.NewHub(stream.HubConfig{Source: db, Logger: logger,
		Render: func(ctx context.Context, e domain.StreamEvent) ([]byte, error) {
			return render().RenderStreamEvent(ctx, e)
		}})
}

// newSandboxServer is the server of sandbox keys when the sandbox has a
// database (MARKET_SANDBOX_DATABASE_URL; nil otherwise): the api's
// configuration over the sandbox's market data, with a read cache of its
// own that the sandbox's invalidation bus keeps fresh, a stream hub and a
// stream pool of its own over the sandbox's stream log (its synthetic events and the clients'
// pushes), the client's webhooks from the service's database, and the same
// gate (a sandbox key is rate limited, never counted against the quota).
// run runs the hub and the bus until ctx ends.
func newSandboxServer(ctx context.Context, cfg Config, apiCfg api.Config, db *store.DB, d *apiDeps, logger *slog.Logger) (
	srv *api.Server, run func(context.Context) error, closeAll func(), err error) {
	if cfg.SandboxDatabaseURL == "" {
		return nil, nil, func() {}, nil
	}
	sdb, err := store.Open(ctx, cfg.SandboxDatabaseURL, store.Options{Logger: logger, MaxConns: 4})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	streamDB, err := openStreamDB(ctx, cfg, cfg.SandboxDatabaseURL, logger)
	if err != nil {
		sdb.Close()
		return nil, nil, nil, fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	logger = logger.With("sandbox", true)
	hub := newStreamHub(streamDB, func() *api.Server { return srv }, logger)
	apiCfg.Sandbox, apiCfg.SandboxPusher = true, store.SandboxPusher{Live: db, Sandbox: sdb, Alerts: &alerting.Matcher{}}
	apiCfg.Served = nil // the sandbox runs the synthetic feed, which serves every combination
	apiCfg.DataFeed = func(domain.Combination) string { return feeds.NameSynthetic }
	apiCfg.Stream, apiCfg.StreamData = hub, streamDB
	apiCfg.Logger = logger
	// The sandbox's market calendars are its own database's (the synthetic
	// feed's sessions, stored by the sandbox's worker).
	book := calendar.New(calendar.Config{Store: sdb, Logger: logger})
	apiCfg.Hours = book
	cache := readcache.New(readcache.DefaultTTL, time.Now)
	apiCfg.Cache = cache
	srv = api.New(apiCfg, api.SandboxStore{MarketData: sdb, AnalyticsData: sdb, WebhookData: db, AlertData: db}, d.gate)
	bus := invalidation.NewSandboxBus(d.rdb, "", logger)
	run = func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return hub.Run(ctx) })
		g.Go(func() error { return bus.Run(ctx, nil, cache) })
		g.Go(func() error { return book.Run(ctx) })
		return g.Wait()
	}
	return srv, run, func() { streamDB.Close(); sdb.Close() }, nil
}

// registerIngest adds the market-data ingest and the analytics scoring
// handlers to the worker. Writes are announced on the invalidation bus so
// api replicas drop cached data (the sandbox's bus for a sandbox pipeline:
// its writes concern the sandbox servers' caches only). Ingest enqueues the scoring of what it
// changed (worker.ScoreTrigger), and committed verdict events wake the
// dispatcher (worker.DispatchWaker, one of the returned background jobs).
// The markets' sessions are refreshed from the feeds (worker.CalendarJob:
// its handler, and a refresh at start among the background jobs); the
// scorer reads them from hours (a candle ending with its session has
// closed at the bell).
func registerIngest(cfg Config, db *store.DB, w *worker.Worker, logger *slog.Logger, hours domain.MarketHours) (func(), []func(context.Context) error, error) {
	opts, err := rediskeys.BackgroundClientOptions(cfg.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	rdb := opts.NewClient()
	reg, err := feeds.New(cfg.feedsConfig(rdb, logger))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	queue, err := worker.NewQueueClient(cfg.RedisURL)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	closeAll := func() { _ = queue.Close(); _ = rdb.Close() }
	bus := invalidation.NewBus(rdb, "", logger)
	if cfg.SandboxPipeline {
		bus = invalidation.NewSandboxBus(rdb, "", logger)
	}
	notify := func(ctx context.Context, s readcache.Scope) { _ = bus.Publish(ctx, invalidation.DataChanged(s)) }
	served := cfg.served()
	clock := cfg.now()
	// The closes rescored in this process, which its history loads wait for.
	closes := &worker.Rescoring{}
	sc := &worker.Scorer{Store: db, Region: cfg.Region, Served: served, Logger: logger, Now: clock, Notify: notify,
		Candles: store.NewCandleCache(cfg.ScoreCandleCache), Alerts: &alerting.Matcher{}, Hours: hours, Rescoring: closes}
	sc.Register(w)
	pipe := worker.Pipeline{Redis: rdb, Queue: queue, RunNow: w.RunNow}
	trigger := &worker.ScoreTrigger{Pipeline: pipe, Scorer: sc, Region: cfg.Region, Served: served, Logger: logger}
	trigger.Register(w)
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: logger, Now: clock, MaxCandleSymbols: cfg.MaxCandleSymbols, Notify: notify,
		Hours: hours, Rescoring: closes}
	if cfg.ScoreTrigger {
		in.Changes = trigger
	} else {
		logger.Info("ingest does not trigger scoring (MARKET_SCORE_TRIGGER=false): the score tick alone scores", "interval", cfg.ScoreInterval)
	}
	in.Register(w)
	in.Retention = cfg.CandleRetention
	rj := &worker.RetentionJob{Store: db, Retention: cfg.CandleRetention, Logger: logger, Now: clock,
		Compact: &worker.CompactJob{Store: db, HotWindow: worker.DefaultCandleHotWindow(), Logger: logger, Now: clock}}
	rj.Register(w)
	(&worker.AnalyticsRetentionJob{Store: db, Days: cfg.ReportRetentionDays, Logger: logger, Now: clock}).Register(w)
	st := &worker.StatsJob{Store: db, Region: cfg.Region, Served: served, Logger: logger, Now: clock, Notify: notify}
	st.Register(w)
	// The stream log is stamped by Postgres's now(): pruned on the wall clock.
	(&worker.StreamPruner{Store: db, Logger: logger, Now: time.Now}).Register(w)
	box, err := secretBox(cfg)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	// The markets' sessions, daily from the scheduler and once at start.
	cal := &worker.CalendarJob{Store: db, Feeds: reg, Region: cfg.Region, Served: served, Logger: logger, Now: clock}
	cal.Register(w)
	jobs := []func(context.Context) error{cal.RunAtStart}
	if job := pushJob(cfg, reg, in, rdb, cfg.FeedURLs, logger); job != nil {
		jobs = append(jobs, job)
	}
	if box == nil {
		logger.Warn("webhook deliveries are off: MARKET_SECRET_KEY is not set")
	} else {
		// Deliveries keep the wall clock: a receiver checks the signature's
		// timestamp against its own, and Postgres times the retries.
		d := &worker.Dispatcher{Store: db, Box: box, Logger: logger, Now: time.Now,
			Client: webhookClient(cfg), Concurrency: cfg.WebhookConcurrency}
		d.Register(w)
		waker := &worker.DispatchWaker{Listen: db.ListenVerdictEvents, Pipeline: pipe, Logger: logger, Now: time.Now}
		jobs = append(jobs, waker.Run)
	}
	return closeAll, jobs, nil
}

// analyticsWarmup lists the markets and styles of the region not scored
// yet ("forex/swing"), for /readyz's warming_up. A market without an
// analytics source among the served combinations is never scored, so it is
// not waited for.
func analyticsWarmup(db *store.DB, region string, served domain.Served) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		scored, err := db.ScoredStyles(ctx)
		if err != nil {
			return nil, err
		}
		var cold []string
		for _, m := range domain.Markets {
			if !domain.Scored(region, m, served) {
				continue
			}
			for _, st := range analytics.ScoredStyles(m) {
				if !slices.Contains(scored[m], st) {
					cold = append(cold, string(m)+"/"+string(st))
				}
			}
		}
		return cold, nil
	}
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
