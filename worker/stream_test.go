package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// The prune task deletes the log's rows past the retention, in a
// transaction of its own, and leaves the others.
func TestStreamPruneDeletesOnlyRowsPastTheRetention(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	for _, symbol := range []string{"OLD", "NEW"} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
			VALUES ('crypto', $1, 'neutral', 'growth', 30, now())`, symbol); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if _, err := db.Pool.Exec(ctx, `UPDATE stream_events s SET at = $1 FROM verdict_events e
		WHERE e.id = s.verdict_event_id AND e.symbol = 'OLD'`, now.Add(-domain.StreamRetention-time.Minute)); err != nil {
		t.Fatal(err)
	}
	p := &worker.StreamPruner{Store: db, Now: func() time.Time { return now }}
	for range 2 { // twice: the second deletes nothing more
		if err := p.HandleStreamPrune(ctx, worker.NewStreamPruneTask(now)); err != nil {
			t.Fatal(err)
		}
	}
	events, err := db.StreamEvents(ctx, domain.StreamPos{}, 10)
	if err != nil || len(events) != 1 || events[0].Verdict.Symbol != "NEW" {
		t.Fatalf("log after the prune: %+v (%v), want NEW only", events, err)
	}
}
