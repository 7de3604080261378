package store

import (
	"context"
	"time"

	"github.com/marketscreener/market/obs"
)

// OpsSnapshot reads the database-backed operational series (package obs):
// every feed's health and the webhook backlog. A few cheap statements (the
// pending and unfanned counts use their partial indexes).
func (db *DB) OpsSnapshot(ctx context.Context) (obs.Snapshot, error) {
	var s obs.Snapshot
	health, err := db.FeedHealthAll(ctx)
	if err != nil {
		return s, err
	}
	for _, h := range health {
		f := obs.FeedState{Market: string(h.Combination.Market), Exchange: h.Combination.Exchange,
			Instrument: h.Combination.Instrument, Kind: h.Kind, Failing: h.Failing()}
		if h.LastSuccessAt != nil {
			f.LastSuccess = *h.LastSuccessAt
		}
		s.Feeds = append(s.Feeds, f)
	}
	var oldest float64
	err = db.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'),
			(SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 FROM webhook_deliveries WHERE status = 'pending'),
			(SELECT count(*) FROM verdict_events WHERE NOT fanned_out),
			(SELECT count(*) FROM webhooks WHERE status = 'disabled')`).
		Scan(&s.PendingDeliveries, &oldest, &s.UnfannedEvents, &s.DisabledSubscriptions)
	s.OldestPendingAge = time.Duration(oldest * float64(time.Second))
	return s, translate(err, "ops snapshot")
}
