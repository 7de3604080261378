package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readOnlyTransaction is SQLSTATE 25006: a write on a server that is (or
// has become) read-only, such as a former primary demoted by a failover
// that still holds the pool's connections.
const readOnlyTransaction = "25006"

// IsReadOnly reports whether err is a write refused by a read-only server.
func IsReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == readOnlyTransaction
}

// failover watches every statement's outcome (a pgx tracer) and, when one
// is refused as a write on a read-only server, drops every connection of
// the pool: new ones are opened through the URL's hosts again, and with
// target_session_attrs=read-write (a multi-host MARKET_DATABASE_URL) they
// reach the promoted primary. A pool whose server died needs nothing of
// this (its broken connections are dropped as they fail); a former
// primary that stays up read-only would otherwise keep every pooled
// connection, and every write would fail until the process restarts.
type failover struct {
	pool   atomic.Pointer[pgxpool.Pool]
	logger *slog.Logger
	mu     sync.Mutex
	last   time.Time // the last reset, at most one a second
}

func (f *failover) check(err error) {
	if err == nil || !IsReadOnly(err) {
		return
	}
	p := f.pool.Load()
	if p == nil {
		return
	}
	f.mu.Lock()
	if time.Since(f.last) < time.Second {
		f.mu.Unlock()
		return
	}
	f.last = time.Now()
	f.mu.Unlock()
	f.logger.Warn("store: a write found its server read-only (a failover?): dropping the pool's connections to reconnect to the primary")
	go p.Reset() // not from inside a statement's trace: Reset closes idle connections and waits for none
}

func (f *failover) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (f *failover) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	f.check(d.Err)
}
func (f *failover) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (f *failover) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	f.check(d.Err)
}
func (f *failover) TraceBatchEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	f.check(d.Err)
}
func (f *failover) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return ctx
}
func (f *failover) TraceCopyFromEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceCopyFromEndData) {
	f.check(d.Err)
}
