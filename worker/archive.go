package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/store"
)

// TypeAnalyticsRetention thins the archive of published reports and
// statistics computations.
const TypeAnalyticsRetention = "analytics:retention"

// DefaultReportRetentionDays is how many days every published report is
// kept; after them, the last report of each UTC day per asset and style
// is kept for good.
const DefaultReportRetentionDays = 7

// Batches of the analytics retention task: short statements, at most
// archiveMaxBatches a run (a backlog is worked off over a few ticks).
const (
	archiveBatch      = 5000
	archiveMaxBatches = 200
)

// ArchiveStore is what the analytics retention task thins.
type ArchiveStore interface {
	ThinArchive(ctx context.Context, cut time.Time, limit int) (store.ThinResult, error)
}

// NewAnalyticsRetentionTask returns the analytics retention task of a tick.
func NewAnalyticsRetentionTask(tick time.Time) *asynq.Task {
	return newTask(TypeAnalyticsRetention, RetentionPayload{Tick: tick.UTC()})
}

// AnalyticsRetentionJob keeps every archived report and statistics
// computation of the last Days days and, before them, the last of each
// UTC day. Deciding on what was decided on changes nothing, so a run
// repeated, or run by two workers at once, is harmless.
type AnalyticsRetentionJob struct {
	Store  ArchiveStore
	Days   int // 0: DefaultReportRetentionDays
	Logger *slog.Logger
	Now    func() time.Time
	// Batch and MaxBatches override archiveBatch and archiveMaxBatches.
	Batch, MaxBatches int
}

// Register adds the analytics retention handler to w.
func (j *AnalyticsRetentionJob) Register(w *Worker) {
	w.Handle(TypeAnalyticsRetention, asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		_, err := j.Run(ctx)
		return err
	}))
}

// ArchiveCutoff is the instant before which only the last archived
// report of each UTC day is kept: the UTC midnight days before now's
// day, so every row of a day is thinned in one state of that day.
func ArchiveCutoff(now time.Time, days int) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -days)
}

// Run thins the archive in batches and returns the total it did.
func (j *AnalyticsRetentionJob) Run(ctx context.Context) (store.ThinResult, error) {
	batch, maxBatches, days := j.Batch, j.MaxBatches, j.Days
	if batch <= 0 {
		batch = archiveBatch
	}
	if maxBatches <= 0 {
		maxBatches = archiveMaxBatches
	}
	if days <= 0 {
		days = DefaultReportRetentionDays
	}
	cut := ArchiveCutoff(j.Now(), days)
	var total store.ThinResult
	for range maxBatches {
		r, err := j.Store.ThinArchive(ctx, cut, batch)
		if err != nil {
			return total, fmt.Errorf("worker: analytics retention before %s: %w", cut.Format(time.RFC3339), err)
		}
		total.Deleted, total.Kept = total.Deleted+r.Deleted, total.Kept+r.Kept
		if total.More = r.More; !r.More {
			break
		}
	}
	if total.Deleted+total.Kept > 0 && j.Logger != nil {
		j.Logger.Info("thinned the analytics archive", "before", cut, "deleted", total.Deleted, "kept_daily", total.Kept)
	}
	return total, nil
}
