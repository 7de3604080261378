package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]bool{
		fmt.Errorf("quota: %w", io.ErrUnexpectedEOF):           true,
		fmt.Errorf("x: %w", context.DeadlineExceeded):          true,
		fmt.Errorf("x: %w", pgconn.ErrConnClosed):              true,
		&pgconn.PgError{Code: "57P01"}:                         true,
		&pgconn.PgError{Code: "08006"}:                         true,
		&pgconn.PgError{Code: "23505"}:                         false,
		domain.Invalid("query.limit", 0, "must be at least 1"): false,
		errors.New("analytics: score out of range"):            false,
	} {
		if got := store.Unavailable(err); got != want {
			t.Errorf("Unavailable(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestOpsSnapshot reads the database-backed operational series.
func TestOpsSnapshot(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	c := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	if err := db.RecordFeedSuccess(ctx, c, "tickers", time.Now()); err != nil {
		t.Fatal(err)
	}
	s, err := db.OpsSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Feeds) != 1 || s.Feeds[0].Kind != "tickers" || s.Feeds[0].LastSuccess.IsZero() || s.Feeds[0].Failing {
		t.Fatalf("feeds %+v", s.Feeds)
	}
	if s.PendingDeliveries != 0 || s.UnfannedEvents != 0 || s.DisabledSubscriptions != 0 {
		t.Fatalf("an empty schema has a webhook backlog: %+v", s)
	}
}
