package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/obs"
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
			checks    = []api.Check{{Name: "postgres", Required: true, Probe: upProbe(up, "postgres", schemaProbe(db), postgresDown)}}
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
			readiness.Warmup = analyticsWarmup(db, cfg.Region)
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
			apiCfg := api.Config{Region: cfg.Region, Logger: logger, Ready: readiness.Ready,
				SecretBox: box, WebhookAllowPrivate: cfg.WebhookAllowPrivate, WebhookClient: webhookClient(cfg), Cache: deps.cache,
				RequestTimeout: cfg.RequestTimeout, Stream: hub, StreamData: streamDB, StreamSlots: deps.slots, StreamReplays: cfg.StreamDBConns - 1,
				Refresh: api.RefreshIntervals{Tickers: cfg.TickerInterval, Candles: cfg.CandleInterval, Scores: cfg.ScoreInterval, Stats: cfg.StatsInterval}}
			apiServer = api.New(apiCfg, db, deps.gate)
			g.Go(func() error { return hub.Run(ctx) })
			sandboxServer, sandboxHub, closeSandbox, err := newSandboxServer(ctx, cfg, apiCfg, db, deps, logger)
			if err != nil {
				return err
			}
			defer closeSandbox()
			if sandboxHub != nil {
				g.Go(func() error { return sandboxHub.Run(ctx) })
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
			opts, err := admission.RedisOptions(cfg.RedisURL)
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
			readiness.Warmup = analyticsWarmup(db, cfg.Region)
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
		if role == "worker" || role == "all" {
			w, err := worker.New(worker.Config{RedisURL: cfg.RedisURL, Logger: logger})
			if err != nil {
				return err
			}
			closeIngest, jobs, err := registerIngest(cfg, db, w, logger)
			if err != nil {
				return err
			}
			defer closeIngest()
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
			entries := append(scheduler.IngestEntries(cfg.Region, cfg.TickerInterval, cfg.CandleInterval),
				append(scheduler.ScoreEntries(cfg.Region, cfg.ScoreInterval),
					scheduler.FundamentalsEntries(cfg.Region, cfg.FundamentalsInterval)...)...)
			if cfg.StatsInterval > 0 {
				entries = append(entries, scheduler.StatsEntries(cfg.Region, cfg.StatsInterval)...)
			}
			entries = append(entries, scheduler.WebhookEntries(cfg.WebhookInterval)...)
			entries = append(entries, scheduler.StreamPruneEntries(scheduler.StreamPruneInterval)...)
			s, err := scheduler.New(scheduler.Config{RedisURL: cfg.RedisURL, Logger: logger, Entries: entries})
			if err != nil {
				return err
			}
			g.Go(func() error { return s.Run(ctx) })
		}
		err = g.Wait()
		logger.Info("stopped")
		return err
	}
}

// schemaProbe is ready when Postgres answers and the schema is at the
// version this binary expects (run marketd migrate otherwise).
func schemaProbe(db *store.DB) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := db.Ping(ctx); err != nil {
			return errPostgresUnreachable
		}
		cur, want, err := db.SchemaVersion(ctx)
		if err != nil {
			return err
		}
		if cur != want {
			return fmt.Errorf("schema at version %d, binary expects %d: run marketd migrate", cur, want)
		}
		return nil
	}
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
