package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// Unavailable reports whether err says the database could not answer: a
// connection that could not be made, broke (EOF, reset) or froze until a
// deadline, or a server shutting down or refusing connections. Such a
// failure is the service being unavailable (503 with Retry-After), not an
// internal error; it says nothing about the request.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var (
		connErr *pgconn.ConnectError
		pgErr   *pgconn.PgError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &connErr), pgconn.Timeout(err), errors.As(err, &netErr):
		return true
	case errors.As(err, &pgErr):
		// Class 08: connection exception; 57P01-57P03: shutting down or
		// not accepting connections; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	return false
}
