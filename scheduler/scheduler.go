// Package scheduler runs the asynq periodic scheduler: it only enqueues.
// Every periodic task carries a deterministic task id per tick, so several
// scheduler replicas enqueue each tick once.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/worker"
)

// Config configures a Scheduler.
type Config struct {
	RedisURL string
	Logger   *slog.Logger
}

// Scheduler is an asynq scheduler with the service's periodic entries.
type Scheduler struct {
	cfg   Config
	sched *asynq.Scheduler
}

// New returns a scheduler; entries are added with Register before Run.
func New(cfg Config) (*Scheduler, error) {
	opt, err := asynq.ParseRedisURI(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("scheduler: redis url: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := asynq.NewScheduler(opt, &asynq.SchedulerOpts{
		Logger: worker.NewAsynqLogger(cfg.Logger),
		EnqueueErrorHandler: func(t *asynq.Task, _ []asynq.Option, err error) {
			cfg.Logger.Debug("enqueue skipped", "type", t.Type(), "err", err)
		},
	})
	return &Scheduler{cfg: cfg, sched: s}, nil
}

// Run enqueues on schedule until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.sched.Start(); err != nil {
		return fmt.Errorf("scheduler: start: %w", err)
	}
	s.cfg.Logger.Info("scheduler started")
	<-ctx.Done()
	s.sched.Shutdown()
	s.cfg.Logger.Info("scheduler stopped")
	return nil
}
