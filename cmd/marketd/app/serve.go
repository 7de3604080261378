package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/scheduler"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// cmdServe runs one serving role ("api", "worker", "scheduler" or "all")
// until ctx ends (SIGINT/SIGTERM), then shuts down gracefully.
func serveRole(role string) func(*Main, context.Context, []string) error {
	return func(m *Main, ctx context.Context, args []string) error {
		fs := newFlagSet(role)
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

		g, ctx := errgroup.WithContext(ctx)
		var (
			apiServer *api.Server
			up        = obs.NewUp()
			schema    = &schemaCheck{db: db}
			checks    = []api.Check{{Name: "postgres", Required: true, Probe: upProbe(up, "postgres", schema.probe, postgresDown)}}
		)
		if role == "api" {
			tuneAPIGC(m.Getenv, logger)
		}
		if role == "api" || role == "all" {
			deps, err := newAPIDeps(cfg, db, logger)
			if err != nil {
				return err
			}
			defer deps.Close()
			for _, c := range deps.checks {
				c.Probe = upProbe(up, c.Name, c.Probe, redisDown)
				checks = append(checks, c)
			}
			readiness := api.NewReadiness(checks...)
			readiness.Warmup = analyticsWarmup(db, cfg.Region, cfg.served())
			readiness.Served, readiness.Unserved = cfg.coverage()
			readiness.Info = schema.info
			g.Go(func() error { readiness.Run(ctx, 2*time.Second); return nil })
			box, err := secretBox(cfg)
			if err != nil {
				return err
			}
			streamDB, err := openStreamDB(ctx, cfg, cfg.DatabaseURL, logger)
			if err != nil {
				return err
			}
			defer streamDB.Close()
			hub := newStreamHub(streamDB, func() *api.Server { return apiServer }, logger)
			apiCfg := api.Config{Region: cfg.Region, Served: cfg.served(), Logger: logger, Ready: readiness.Ready,
				SecretBox: box, WebhookAllowPrivate: cfg.WebhookAllowPrivate, WebhookClient: webhookClient(cfg), Cache: deps.cache,
				RequestTimeout: cfg.RequestTimeout, Stream: hub, StreamData: streamDB, StreamSlots: deps.slots, StreamReplays: cfg.StreamDBConns - 1,
				Refresh: api.RefreshIntervals{Tickers: cfg.TickerInterval, Candles: cfg.CandleInterval, Scores: cfg.ScoreInterval, Stats: cfg.StatsInterval}}
			apiServer = api.New(apiCfg, db, deps.gate)
			g.Go(func() error { return hub.Run(ctx) })
			sandboxServer, runSandbox, closeSandbox, err := newSandboxServer(ctx, cfg, apiCfg, db, deps, logger)
			if err != nil {
				return err
			}
			defer closeSandbox()
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
			defer closeMon()
			httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
			if err != nil {
				return fmt.Errorf("listen MARKET_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
			}
			opsLn, err := net.Listen("tcp", cfg.OpsAddr)
			if err != nil {
				httpLn.Close()
				return fmt.Errorf("listen MARKET_OPS_ADDR %s: %w", cfg.OpsAddr, err)
			}
			m.setAddrs(httpLn, opsLn)
			logger.Info("listening", "http", httpLn.Addr().String(), "ops", opsLn.Addr().String(), "region", cfg.Region)
			g.Go(func() error { return serveHTTP(ctx, httpLn, publicHandler, logger) })
			metrics, closeMetrics, err := opsMetrics(apiServer.Registry(), cfg.RedisURL, db, deps.gate, up)
			if err != nil {
				return err
			}
			defer closeMetrics()
			g.Go(func() error {
				return serveHTTP(ctx, opsLn, api.OpsHandler(readiness, metrics, extra), logger)
			})
		} else {
			// Queues live in Redis: without it a worker or scheduler idles
			// (and resumes by itself), which /readyz reports as degraded.
			opts, err := rediskeys.ClientOptions(cfg.RedisURL)
			if err != nil {
				return err
			}
			rdb := redis.NewClient(opts)
			defer rdb.Close()
			checks = append(checks, api.Check{Name: "redis", Probe: upProbe(up, "redis", func(ctx context.Context) error {
				if err := rdb.Ping(ctx).Err(); err != nil {
					return errors.New("redis unreachable: queues paused until it answers")
				}
				return nil
			}, nil)})
			readiness := api.NewReadiness(checks...)
			readiness.Warmup = analyticsWarmup(db, cfg.Region, cfg.served())
			readiness.Served, readiness.Unserved = cfg.coverage()
			readiness.Info = schema.info
			g.Go(func() error { readiness.Run(ctx, 5*time.Second); return nil })
			opsLn, err := net.Listen("tcp", cfg.OpsAddr)
			if err != nil {
				return fmt.Errorf("listen MARKET_OPS_ADDR %s: %w", cfg.OpsAddr, err)
			}
			m.setAddrs(nil, opsLn)
			metrics, closeMetrics, err := opsMetrics(nil, cfg.RedisURL, db, nil, up)
			if err != nil {
				return err
			}
			defer closeMetrics()
			g.Go(func() error { return serveHTTP(ctx, opsLn, api.OpsHandler(readiness, metrics, nil), logger) })
		}
		closePipeline, err := runPipeline(ctx, g, cfg, db, role, logger)
		if err != nil {
			return err
		}
		defer closePipeline()
		if role == "all" {
			closeSandbox, err := runSandboxPipeline(ctx, g, cfg, logger)
			if err != nil {
				return err
			}
			defer closeSandbox()
		}
		err = g.Wait()
		logger.Info("stopped")
		return err
	}
}

// candleRetentionInterval is how often candles past their retention are
// deleted: at 1,600 crypto symbols a quarter of an hour of 1m candles is
// about 24,000 rows, a few short batches.
const candleRetentionInterval = 15 * time.Minute

// runPipeline starts the worker of the roles that run one (worker, all)
// and the scheduler of those that schedule (scheduler, all) in g, over db
// and cfg's Redis; the returned func closes what they hold.
func runPipeline(ctx context.Context, g *errgroup.Group, cfg Config, db *store.DB, role string, logger *slog.Logger) (func(), error) {
	closeAll := func() {}
	if role == "worker" || role == "all" {
		w, err := worker.New(worker.Config{RedisURL: cfg.RedisURL, Logger: logger})
		if err != nil {
			return nil, err
		}
		closeIngest, jobs, err := registerIngest(cfg, db, w, logger)
		if err != nil {
			return nil, err
		}
		closeAll = closeIngest
		g.Go(func() error { return w.Run(ctx) })
		for _, job := range jobs {
			g.Go(func() error { return job(ctx) })
		}
	}
	if role != "api" {
		// After a Redis flush, asynqmon and the queue metrics see the
		// queues again without a restart.
		g.Go(func() error { return worker.KeepQueuesRegistered(ctx, cfg.RedisURL, worker.QueueRegistryInterval) })
	}
	if role == "scheduler" || role == "all" {
		served := cfg.served()
		if _, unserved := feeds.Served(cfg.Feeds, cfg.Region); len(unserved) > 0 {
			logger.Info("combinations no configured feed serves are not scheduled", "feeds", cfg.Feeds, "unserved", combinationNames(unserved))
		}
		entries := append(scheduler.IngestEntries(cfg.Region, served, cfg.TickerInterval, cfg.CandleInterval),
			append(scheduler.ScoreEntries(cfg.Region, served, cfg.ScoreInterval),
				scheduler.FundamentalsEntries(cfg.Region, served, cfg.FundamentalsInterval)...)...)
		if cfg.StatsInterval > 0 {
			entries = append(entries, scheduler.StatsEntries(cfg.Region, served, cfg.StatsInterval)...)
		}
		entries = append(entries, scheduler.WebhookEntries(cfg.WebhookInterval)...)
		entries = append(entries, scheduler.StreamPruneEntries(scheduler.StreamPruneInterval)...)
		entries = append(entries, scheduler.RetentionEntries(candleRetentionInterval)...)
		s, err := scheduler.New(scheduler.Config{RedisURL: cfg.RedisURL, Logger: logger, Entries: entries})
		if err != nil {
			closeAll()
			return nil, err
		}
		g.Go(func() error { return s.Run(ctx) })
	}
	return closeAll, nil
}

// runSandboxPipeline runs, in the process of every role (marketd all), the
// sandbox's worker and scheduler too: the synthetic feed into the
// sandbox's database (MARKET_SANDBOX_DATABASE_URL), which is where its
// market data and its stream's synthetic verdict_changed and screener
// events come from, with queues in a Redis database of their own
// (MARKET_SANDBOX_REDIS_URL). Without that database there is no sandbox;
// without that Redis nothing fills it (a separate sandbox worker and
// scheduler may), and a sandbox key's stream carries its own pushes only:
// said at start.
func runSandboxPipeline(ctx context.Context, g *errgroup.Group, cfg Config, logger *slog.Logger) (func(), error) {
	if cfg.SandboxDatabaseURL == "" {
		return func() {}, nil
	}
	logger = logger.With("sandbox", true)
	if cfg.SandboxRedisURL == "" {
		logger.Warn("this process does not fill the sandbox (MARKET_SANDBOX_REDIS_URL is not set): sandbox keys see market data, " +
			"verdict changes and screener events only from a sandbox worker and scheduler of their own (MARKET_SANDBOX_PIPELINE=true), " +
			"else their own pushes only")
		return func() {}, nil
	}
	scfg := sandboxPipelineConfig(cfg)
	sdb, err := store.Open(ctx, scfg.DatabaseURL, store.Options{Logger: logger, MaxConns: 8})
	if err != nil {
		return nil, fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	closePipeline, err := runPipeline(ctx, g, scfg, sdb, "all", logger)
	if err != nil {
		sdb.Close()
		return nil, err
	}
	return func() { closePipeline(); sdb.Close() }, nil
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
