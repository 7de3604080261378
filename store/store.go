// Package store is the Postgres side of the service: the only package that
// imports pgx. It applies the embedded migrations, stores clients, keys,
// usage and market data, and turns driver errors into domain errors at its
// boundary.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketscreener/market/domain"
)

// Options tune Open.
type Options struct {
	// Schema, when set, is used as the search_path of every connection
	// (tests get a schema of their own this way).
	Schema   string
	MaxConns int32
	// StatementTimeout, when set, is every statement's limit on the
	// server (Postgres statement_timeout): a budget no caller can forget.
	StatementTimeout time.Duration
	Logger           *slog.Logger
}

// DB is the application's handle on Postgres.
type DB struct {
	Pool        *pgxpool.Pool
	logger      *slog.Logger
	listenCheck atomic.Int64 // nanoseconds; 0: listenCheckEvery's default
	results     reportResults
	alerts      alertIndex
	states      alertStateCache
	onFired     atomic.Pointer[func(n int)] // OnAlertsFired
}

// Open connects a pool to url. It does not wait for the server: readiness
// is checked with Ping and Schema.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: parse database url: %w", err)
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	// The service's statements are short, and JIT compiling one costs more
	// than it saves: the rescoring decision over 3,000 stocks, planned as
	// 9,000 index lookups (a cost above jit_above_cost), ran in 7 ms and
	// compiled 53 functions for 80 ms more. A jit parameter in the URL
	// (?jit=on) is kept.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fo := &failover{logger: logger}
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = fo
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open pool: %w", err)
	}
	fo.pool.Store(pool)
	return &DB{Pool: pool, logger: logger}, nil
}

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// Ping checks that Postgres answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// translate turns driver errors into domain errors.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Errorf(domain.ENOTFOUND, "%s not found", what)
	}
	// An unreachable or overloaded database is the service being
	// unavailable (503 with Retry-After), not an internal error.
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		// The cause stays in the chain for the logs; clients see the message.
		return fmt.Errorf("store: %s: %v: %w", what, err,
			&domain.Error{Code: domain.EUNAVAILABLE, Message: "the database is unavailable; retry later"})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return domain.Errorf(domain.ECONFLICT, "%s already exists", what)
		case "23514", "22P02", "23503":
			return domain.Errorf(domain.EINVALID, "invalid %s: %s", what, pgErr.Message)
		}
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// retryDeadlock runs f, and once more when Postgres ended it as the victim
// of a deadlock (40P01): the writers take rows in one order, so this is
// for a deadlock with some other path; the statement rolled back whole.
func retryDeadlock(f func() error) error {
	err := f()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
		err = f()
	}
	return err
}

// translateNoRows is nil for pgx.ErrNoRows (an expected "nothing changed")
// and translate(err) otherwise.
func translateNoRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return translate(err, "row")
}

// minSharedBuffers is the shared_buffers under which a process warns at
// start (WarnSmallSharedBuffers): Postgres's default (128 MB) holds a
// small part of what a close reads and writes at the three markets'
// scale: every other page read is copied in from the kernel's page cache,
// and every dirty one evicted is written back to it.
const minSharedBuffers = 1 << 30

// WarnSmallSharedBuffers logs a warning when the server's shared_buffers
// is under minSharedBuffers (README, Operations). As for autovacuum,
// nothing depends on it for correctness; a close's speed does.
func (db *DB) WarnSmallSharedBuffers(ctx context.Context) {
	size, err := db.SharedBuffers(ctx)
	if err != nil || size >= minSharedBuffers {
		return
	}
	db.logger.Warn("Postgres runs with a small shared_buffers: the pages a close reads that do not fit are copied in from "+
		"the kernel's cache at every read, and dirty ones written back when evicted; give it about a quarter of the server's memory",
		"shared_buffers_mb", size>>20, "want_at_least_mb", minSharedBuffers>>20)
}

// SharedBuffers is the server's shared_buffers in bytes.
func (db *DB) SharedBuffers(ctx context.Context) (int64, error) {
	var size int64
	err := db.Pool.QueryRow(ctx, `SELECT setting::bigint * pg_size_bytes(coalesce(unit, '1')) FROM pg_settings WHERE name = 'shared_buffers'`).Scan(&size)
	return size, translate(err, "settings")
}

// WarnWithoutAutovacuum logs a warning when the server runs without
// autovacuum: its tables are then never analyzed, so every statement is
// planned on no statistics, and never vacuumed, so every update of a hot
// table (the screener rows, the reports, the open candles) leaves a dead
// row behind. Nothing here depends on it for correctness; the service's
// speed at scale does.
func (db *DB) WarnWithoutAutovacuum(ctx context.Context) {
	var on string
	if err := db.Pool.QueryRow(ctx, "SHOW autovacuum").Scan(&on); err != nil || on == "on" {
		return
	}
	db.logger.Warn("Postgres runs with autovacuum off: tables are never analyzed or vacuumed, so statements are planned " +
		"without statistics and updated tables keep growing; set autovacuum = on (the default)")
}
