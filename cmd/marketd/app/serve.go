package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/calendar"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/scheduler"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// roles is what each serving command starts, in order; a role's process
// stops them in the reverse order. The pipeline (worker, queue registry,
// scheduler) is the same in the sandbox's process of `marketd all`.
var roles = map[string][]component{
	"api":       {tuneGC(apiGOGC, false), serveAPI},
	"worker":    {tuneGC(workerGOGC, true), serveOps, startWorker, keepQueuesRegistered},
	"scheduler": {serveOps, keepQueuesRegistered, startScheduler},
	"all":       {tuneGC(workerGOGC, true), serveAPI, startWorker, keepQueuesRegistered, startScheduler, fillSandbox},
}

// A component is one thing a role starts: it adds its goroutines to the
// role's group and registers with onStop what releases what it holds,
// which runs once every goroutine has ended.
type component func(ctx context.Context, r *roleRun) error

// roleRun is one serving role of a process: its configuration, its
// database and what its components share.
type roleRun struct {
	m      *Main
	cfg    Config
	db     *store.DB
	logger *slog.Logger
	g      *errgroup.Group
	// up, schema and checks feed the role's /readyz and /metrics.
	up     *obs.Up
	schema *schemaCheck
	checks []api.Check
	stops  []func()
	// book is the markets' calendars over db, shared by the role's
	// components (hours).
	book *calendar.Book
	// readRouter sends the api's reads to the replica
	// (MARKET_DATABASE_READ_URL); nil without one.
	readRouter *store.ReadRouter
}

func (r *roleRun) onStop(f func()) { r.stops = append(r.stops, f) }

// hours is the role's market calendars: one Book over the role's
// database, read once before the first component uses it (a scheduler's
// first tick then follows the stored sessions), then every minute.
func (r *roleRun) hours(ctx context.Context) *calendar.Book {
	if r.book == nil {
		r.book = calendar.New(calendar.Config{Store: r.db, Now: r.cfg.now(), Logger: r.logger})
		if err := r.book.Load(ctx); err != nil {
			r.logger.Warn("reading the market calendars failed; markets count as open until they are read", "err", err)
		}
		r.g.Go(func() error { return r.book.Run(ctx) })
	}
	return r.book
}

// stop releases what the components hold, last acquired first.
func (r *roleRun) stop() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// serveRole runs a serving role until ctx ends (SIGINT/SIGTERM), then
// shuts down gracefully.
func serveRole(role string) func(*Main, context.Context, *flag.FlagSet, []string) error {
	return func(m *Main, ctx context.Context, fs *flag.FlagSet, args []string) error {
		fs.Bool("json", true, "logs are always JSON (accepted for uniformity)")
		if _, err := parseFlags(fs, args); err != nil {
			return err
		}
		cfg, err := LoadConfig(m.Getenv)
		if err != nil {
			return err
		}
		logger := m.logger(cfg).With("role", role)
		if cfg.DemoSecretKey {
			logger.Warn("INSECURE: MARKET_SECRET_KEY=" + DemoSecretKeyValue + " seals webhook secrets with a public key; " +
				"set MARKET_SECRET_KEY to 32 bytes of your own (openssl rand -hex 32) before any client subscribes a webhook")
		}
		db, err := store.Open(ctx, cfg.DatabaseURL, store.Options{Logger: logger, MaxConns: 16})
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go db.WarnWithoutAutovacuum(ctx)
		go db.WarnSmallSharedBuffers(ctx)
		g, ctx := errgroup.WithContext(ctx)
		r := &roleRun{m: m, cfg: cfg, db: db, logger: logger, g: g, up: obs.NewUp(), schema: &schemaCheck{db: db}}
		r.checks = []api.Check{{Name: "postgres", Required: true, Probe: upProbe(r.up, "postgres", r.schema.probe, postgresDown)}}
		defer r.stop()
		if err := r.start(ctx, roles[role]); err != nil {
			// What started stops before what it uses is released.
			cancel()
			_ = g.Wait()
			return err
		}
		err = g.Wait()
		logger.Info("stopped")
		return err
	}
}

// start starts components in order; the first failure ends it.
func (r *roleRun) start(ctx context.Context, components []component) error {
	for _, start := range components {
		if err := start(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// tuneGC applies a role's garbage-collector defaults (GOGC gogc, or off
// with offUnderLimit under a GOMEMLIMIT set in the environment; the soft
// memory limit from the cgroup's): tuneRoleGC.
func tuneGC(gogc int, offUnderLimit bool) component {
	return func(_ context.Context, r *roleRun) error {
		tuneRoleGC(gogc, offUnderLimit, r.m.Getenv, r.logger)
		return nil
	}
}

// readsCheck is an api's checks with a read replica: the primary is no
// longer required (while it fails over the replica serves the market data
// and the analytics, the quota is counted provisionally, cached keys stay
// valid: /readyz is 200 "degraded" and a load balancer keeps the replica
// in rotation), and "postgres_reads" is: the replica answers, or else the
// primary does.
func readsCheck(checks []api.Check, router *store.ReadRouter) []api.Check {
	out := make([]api.Check, 0, len(checks)+1)
	var primary func(context.Context) error
	for _, c := range checks {
		if c.Name == "postgres" {
			primary, c.Required = c.Probe, false
		}
		out = append(out, c)
	}
	if primary == nil {
		return checks
	}
	return append(out, api.Check{Name: "postgres_reads", Required: true, Probe: func(ctx context.Context) error {
		if _, ok := router.Lag(); ok {
			return nil
		}
		if err := primary(ctx); err != nil {
			return fmt.Errorf("neither the read replica nor the primary answers: %w", err)
		}
		return nil
	}})
}

// serveAPI serves the public api (and the sandbox's, with its database)
// and the ops listener with asynqmon; it is ready with Postgres, the gate
// and its caches.
func serveAPI(ctx context.Context, r *roleRun) error {
	cfg, db, logger, g := r.cfg, r.db, r.logger, r.g
	var apiServer *api.Server
	deps, err := newAPIDeps(cfg, db, logger)
	if err != nil {
		return err
	}
	r.onStop(deps.Close)
	for _, c := range deps.checks {
		c.Probe = upProbe(r.up, c.Name, c.Probe, redisDown)
		r.checks = append(r.checks, c)
	}
	if cfg.DatabaseReadURL != "" {
		replica, err := store.Open(ctx, cfg.DatabaseReadURL, store.Options{Logger: logger.With("database", "replica"), MaxConns: 16})
		if err != nil {
			return err
		}
		r.onStop(replica.Close)
		router := store.NewReadRouter(db, replica, cfg.ReadMaxLag)
		g.Go(func() error { return router.Run(ctx) })
		r.readRouter = router
		r.checks = readsCheck(r.checks, router)
	}
	readiness := api.NewReadiness(r.checks...)
	readiness.Warmup = analyticsWarmup(db, cfg.Region, cfg.served())
	readiness.Served, readiness.Unserved = cfg.coverage()
	readiness.Info = r.schema.info
	g.Go(func() error { readiness.Run(ctx, 2*time.Second); return nil })
	box, err := secretBox(cfg)
	if err != nil {
		return err
	}
	streamDB, err := openStreamDB(ctx, cfg, cfg.DatabaseURL, logger)
	if err != nil {
		return err
	}
	r.onStop(streamDB.Close)
	hub := newStreamHub(streamDB, func() *api.Server { return apiServer }, logger)
	apiCfg := api.Config{Region: cfg.Region, Served: cfg.served(), DataFeed: cfg.dataFeed, Logger: logger, Ready: readiness.Ready, Hours: r.hours(ctx),
		SecretBox: box, WebhookAllowPrivate: cfg.WebhookAllowPrivate, WebhookClient: webhookClient(cfg), Cache: deps.cache,
		RequestTimeout: cfg.RequestTimeout, Stream: hub, StreamData: streamDB, StreamSlots: deps.slots, StreamReplays: cfg.StreamDBConns - 1,
		Refresh: api.RefreshIntervals{Tickers: cfg.TickerInterval, Candles: cfg.CandleInterval, Scores: cfg.ScoreInterval, Stats: cfg.StatsInterval}}
	var reads api.Store = db
	if r.readRouter != nil {
		reads = api.SandboxStore{MarketData: r.readRouter, AnalyticsData: r.readRouter, WebhookData: db, AlertData: db}
	}
	apiServer = api.New(apiCfg, reads, deps.gate)
	if r.readRouter != nil {
		registerReadRouter(apiServer.Registry(), r.readRouter)
	}
	g.Go(func() error { return hub.Run(ctx) })
	sandboxServer, runSandbox, closeSandbox, err := newSandboxServer(ctx, cfg, apiCfg, db, deps, logger)
	if err != nil {
		return err
	}
	r.onStop(closeSandbox)
	if runSandbox != nil {
		g.Go(func() error { return runSandbox(ctx) })
	}
	publicHandler := api.SandboxRouter(apiServer, sandboxServer)
	g.Go(func() error { return deps.gate.Run(ctx) })
	extra := map[string]http.Handler{}
	mon, closeMon, err := worker.Monitor(cfg.RedisURL, "/asynqmon",
		worker.MonitorOptions{Writable: cfg.AsynqmonWritable, Token: cfg.AsynqmonToken})
	if err != nil {
		return err
	}
	extra["/asynqmon/"] = mon
	r.onStop(closeMon)
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen MARKET_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	opsLn, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		httpLn.Close()
		return fmt.Errorf("listen MARKET_OPS_ADDR %s: %w", cfg.OpsAddr, err)
	}
	r.m.setAddrs(httpLn, opsLn)
	logger.Info("listening", "http", httpLn.Addr().String(), "ops", opsLn.Addr().String(), "region", cfg.Region)
	g.Go(func() error { return serveHTTP(ctx, httpLn, publicHandler, logger) })
	metrics, closeMetrics, err := opsMetrics(apiServer.Registry(), cfg.RedisURL, db, deps.gate, r.up, r.hours(ctx))
	if err != nil {
		return err
	}
	r.onStop(closeMetrics)
	g.Go(func() error {
		return serveHTTP(ctx, opsLn, api.OpsHandler(readiness, metrics, extra), logger)
	})
	return nil
}

// serveOps serves the ops listener of a role without the api. Queues live
// in Redis: without it a worker or scheduler idles (and resumes by
// itself), which /readyz reports as degraded.
func serveOps(ctx context.Context, r *roleRun) error {
	cfg := r.cfg
	opts, err := rediskeys.ClientOptions(cfg.RedisURL)
	if err != nil {
		return err
	}
	rdb := opts.NewClient()
	r.onStop(func() { _ = rdb.Close() })
	r.checks = append(r.checks, api.Check{Name: "redis", Probe: upProbe(r.up, "redis", func(ctx context.Context) error {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return errors.New("redis unreachable: queues paused until it answers")
		}
		return nil
	}, nil)})
	readiness := api.NewReadiness(r.checks...)
	readiness.Warmup = analyticsWarmup(r.db, cfg.Region, cfg.served())
	readiness.Served, readiness.Unserved = cfg.coverage()
	readiness.Info = r.schema.info
	r.g.Go(func() error { readiness.Run(ctx, 5*time.Second); return nil })
	opsLn, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		return fmt.Errorf("listen MARKET_OPS_ADDR %s: %w", cfg.OpsAddr, err)
	}
	r.m.setAddrs(nil, opsLn)
	metrics, closeMetrics, err := opsMetrics(nil, cfg.RedisURL, r.db, nil, r.up, r.hours(ctx))
	if err != nil {
		opsLn.Close()
		return err
	}
	r.onStop(closeMetrics)
	r.g.Go(func() error { return serveHTTP(ctx, opsLn, api.OpsHandler(readiness, metrics, nil), r.logger) })
	return nil
}

// candleRetentionInterval is how often candles past their retention are
// deleted: at 1,600 crypto symbols a quarter of an hour of 1m candles is
// about 24,000 rows, a few short batches.
const candleRetentionInterval = 15 * time.Minute

// analyticsRetentionInterval is how often the report archive is thinned:
// a day's reports pass the cut-off at once, at midnight UTC, and an hourly
// run works them off in a few batches.
const analyticsRetentionInterval = time.Hour

// startWorker runs the asynq worker: ingest, scoring, statistics,
// retention, webhooks, and the background jobs beside them (exchange
// streams, the dispatch waker).
func startWorker(ctx context.Context, r *roleRun) error {
	w, err := worker.New(worker.Config{RedisURL: r.cfg.RedisURL, Logger: r.logger, Now: r.cfg.now()})
	if err != nil {
		return err
	}
	closeIngest, jobs, err := registerIngest(r.cfg, r.db, w, r.logger, r.hours(ctx))
	if err != nil {
		return err
	}
	r.onStop(closeIngest)
	r.g.Go(func() error { return w.Run(ctx) })
	for _, job := range jobs {
		r.g.Go(func() error { return job(ctx) })
	}
	return nil
}

// keepQueuesRegistered lets asynqmon and the queue metrics see the queues
// again after a Redis flush, without a restart.
func keepQueuesRegistered(ctx context.Context, r *roleRun) error {
	r.g.Go(func() error { return worker.KeepQueuesRegistered(ctx, r.cfg.RedisURL, worker.QueueRegistryInterval) })
	return nil
}

// startScheduler runs the asynq scheduler of the served combinations'
// periodic tasks.
func startScheduler(ctx context.Context, r *roleRun) error {
	cfg := r.cfg
	served := cfg.served()
	if _, unserved := feeds.Served(cfg.Feeds, cfg.Region); len(unserved) > 0 {
		r.logger.Info("combinations no configured feed serves are not scheduled", "feeds", cfg.Feeds, "unserved", combinationNames(unserved))
	}
	entries := append(scheduler.IngestEntries(cfg.Region, served, cfg.TickerInterval, cfg.CandleInterval),
		append(scheduler.ScoreEntries(cfg.Region, served, cfg.ScoreInterval),
			scheduler.FundamentalsEntries(cfg.Region, served, cfg.FundamentalsInterval)...)...)
	if cfg.StatsInterval > 0 {
		entries = append(entries, scheduler.StatsEntries(cfg.Region, served, cfg.StatsInterval)...)
	}
	if len(cfg.SecretKey) > 0 {
		// Without the key no worker registers the dispatcher: its ticks
		// would only fail, retry and be archived.
		entries = append(entries, scheduler.WebhookEntries(cfg.WebhookInterval)...)
	}
	entries = append(entries, scheduler.CalendarEntries()...)
	entries = append(entries, scheduler.StreamPruneEntries(scheduler.StreamPruneInterval)...)
	entries = append(entries, scheduler.RetentionEntries(candleRetentionInterval)...)
	entries = append(entries, scheduler.AnalyticsRetentionEntries(analyticsRetentionInterval)...)
	s, err := scheduler.New(scheduler.Config{RedisURL: cfg.RedisURL, Logger: r.logger, Entries: entries, Now: cfg.now(), Hours: r.hours(ctx)})
	if err != nil {
		return err
	}
	r.g.Go(func() error { return s.Run(ctx) })
	return nil
}

// sandboxPipeline is what fills the sandbox in the process of `marketd all`.
var sandboxPipeline = []component{startWorker, keepQueuesRegistered, startScheduler}

// fillSandbox runs, in the process of `marketd all`, the sandbox's worker
// and scheduler too: the synthetic feed into the sandbox's database
// (MARKET_SANDBOX_DATABASE_URL), which is where its market data and its
// stream's synthetic verdict_changed and screener events come from, with
// queues in a Redis database of their own (MARKET_SANDBOX_REDIS_URL).
// Without that database there is no sandbox; without that Redis nothing
// fills it (a separate sandbox worker and scheduler may), and a sandbox
// key's stream carries its own pushes only: said at start.
func fillSandbox(ctx context.Context, r *roleRun) error {
	if r.cfg.SandboxDatabaseURL == "" {
		return nil
	}
	logger := r.logger.With("sandbox", true)
	if r.cfg.SandboxRedisURL == "" {
		logger.Warn("this process does not fill the sandbox (MARKET_SANDBOX_REDIS_URL is not set): sandbox keys see market data, " +
			"verdict changes and screener events only from a sandbox worker and scheduler of their own (MARKET_SANDBOX_PIPELINE=true), " +
			"else their own pushes only")
		return nil
	}
	scfg := sandboxPipelineConfig(r.cfg)
	sdb, err := store.Open(ctx, scfg.DatabaseURL, store.Options{Logger: logger, MaxConns: 8})
	if err != nil {
		return fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	r.onStop(sdb.Close)
	sandbox := &roleRun{m: r.m, cfg: scfg, db: sdb, logger: logger, g: r.g}
	r.onStop(sandbox.stop)
	return sandbox.start(ctx, sandboxPipeline)
}

// sandboxPipelineConfig is cfg turned to fill the sandbox: its database,
// its Redis, the synthetic feed, every variable else the same.
func sandboxPipelineConfig(cfg Config) Config {
	s := cfg
	s.DatabaseURL, s.RedisURL = cfg.SandboxDatabaseURL, cfg.SandboxRedisURL
	s.SandboxDatabaseURL, s.SandboxRedisURL = "", ""
	s.SandboxPipeline = true
	s.Feeds = []string{feeds.NameSynthetic}
	return s
}

// schemaCheck probes Postgres and the schema for readiness and keeps what
// it last saw for /readyz.
type schemaCheck struct {
	db   *store.DB
	last atomic.Pointer[store.Schema]
}

// probe is ready when Postgres answers and the schema has every migration
// of this binary (run marketd migrate otherwise). A schema ahead of the
// binary is fine: migrations stay backward compatible for one release, so
// the previous release keeps serving during a rolling upgrade.
func (c *schemaCheck) probe(ctx context.Context) error {
	if err := c.db.Ping(ctx); err != nil {
		c.last.Store(nil) // unknown: /readyz shows no stale versions
		return errPostgresUnreachable
	}
	s, err := c.db.Schema(ctx)
	if err != nil {
		c.last.Store(nil)
		return err
	}
	c.last.Store(&s)
	return s.Problem()
}

// info is /readyz's "schema": the applied and the binary's versions, and
// the skew when the schema is ahead.
func (c *schemaCheck) info() map[string]any {
	s := c.last.Load()
	if s == nil {
		return nil
	}
	schema := map[string]any{"version": s.Version, "binary": s.Binary}
	if skew := s.Skew(); skew != "" {
		schema["skew"] = skew
	}
	return map[string]any{"schema": schema}
}

// serveHTTP serves until ctx ends, then drains connections for up to 15 s.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown %s: %w", ln.Addr(), err)
	}
	return nil
}
