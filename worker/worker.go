// Package worker runs the asynq task handlers: market-data ingest, scoring,
// statistics and webhook delivery. It and package scheduler are the only
// importers of asynq. Tasks are idempotent: asynq delivers at least once.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
)

// Queue names, by priority.
const (
	QueueCritical = "critical" // webhook deliveries
	QueueDefault  = "default"  // scoring, statistics
	QueueLive     = "live"     // screener snapshots: small, frequent, what clients see first
	QueueIngest   = "ingest"   // candles
)

// Config configures a Worker.
type Config struct {
	RedisURL    string
	Concurrency int
	Logger      *slog.Logger
}

// Worker is an asynq server with the service's handlers.
type Worker struct {
	cfg Config
	srv *asynq.Server
	mux *asynq.ServeMux
}

// New returns a worker; handlers are added with Handle before Run.
func New(cfg Config) (*Worker, error) {
	opt, err := asynq.ParseRedisURI(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("worker: redis url: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8 // within the process's Postgres pool (16), leaving room for the api in "all"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: cfg.Concurrency,
		// Ingest before analytics: scores are only as fresh as the data.
		Queues:          map[string]int{QueueCritical: 6, QueueLive: 5, QueueIngest: 3, QueueDefault: 2},
		Logger:          NewAsynqLogger(cfg.Logger),
		ShutdownTimeout: 20 * time.Second,
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			cfg.Logger.Warn("task failed", "type", t.Type(), "err", err)
		}),
	})
	return &Worker{cfg: cfg, srv: srv, mux: asynq.NewServeMux()}, nil
}

// Handle registers a handler for a task type.
func (w *Worker) Handle(taskType string, h asynq.Handler) { w.mux.Handle(taskType, h) }

// Run processes tasks until ctx ends, then shuts down gracefully (running
// tasks get ShutdownTimeout to finish; unfinished ones go back to the queue).
func (w *Worker) Run(ctx context.Context) error {
	if err := w.srv.Start(w.mux); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	w.cfg.Logger.Info("worker started", "concurrency", w.cfg.Concurrency)
	<-ctx.Done()
	w.srv.Shutdown()
	w.cfg.Logger.Info("worker stopped")
	return nil
}

// Monitor returns the asynqmon UI mounted at rootPath (for the ops
// listener) and a function releasing its Redis connections. Read-only by
// default (asynqmon refuses every request but GET). Writable, it asks for
// the token on every request (basic-auth password, so a browser asks once
// and sends it with the UI's requests; or a bearer token), compared in
// constant time. Either way, a cross-origin write (a page in the operator's
// browser posting to the ops port) is refused.
func Monitor(redisURL, rootPath string, o MonitorOptions) (http.Handler, func(), error) {
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: redis url: %w", err)
	}
	if o.Writable && o.Token == "" {
		return nil, nil, fmt.Errorf("worker: a writable asynqmon needs a token")
	}
	mon := asynqmon.New(asynqmon.Options{RootPath: rootPath, RedisConnOpt: opt, ReadOnly: !o.Writable})
	var h http.Handler = mon
	if o.Writable {
		h = requireToken(h, o.Token)
	}
	return http.NewCrossOriginProtection().Handler(h), func() { _ = mon.Close() }, nil
}

// asynqLogger adapts slog to asynq's Logger interface.
type asynqLogger struct{ l *slog.Logger }

// NewAsynqLogger adapts a slog.Logger for asynq servers and schedulers.
func NewAsynqLogger(l *slog.Logger) asynq.Logger { return asynqLogger{l.With("component", "asynq")} }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...)) }
