package worker_test

import (
	"errors"
	"log/slog"

	"github.com/hibiken/asynq"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func isSkipRetry(err error) bool { return errors.Is(err, asynq.SkipRetry) }
