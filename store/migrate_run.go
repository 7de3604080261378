package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/marketscreener/market/migrations"
)

// MigrateOptions tune MigrateWith. The zero value is the default.
type MigrateOptions struct {
	// LockTimeout is every migration statement's lock_timeout: a statement
	// that waits longer for a table lock fails (SQLSTATE 55P03) instead of
	// queueing every later reader and writer of the table behind itself.
	// Default 3 s.
	LockTimeout time.Duration
	// ConcurrentLockTimeout is the lock_timeout of the migrations that
	// only build or drop indexes CONCURRENTLY, and of the rebuild of an
	// INVALID index. Such a build waits for every older transaction of
	// the database, but the lock it holds meanwhile blocks no read and no
	// write (only DDL and vacuum of the table): a short timeout would only
	// make it fail and leave an INVALID index. Default 10 minutes.
	ConcurrentLockTimeout time.Duration
	// LockRetries is how many times a migration (or a step of the
	// migrator's own) whose lock wait timed out is rolled back and run
	// again before migrate gives up. Default 10.
	LockRetries int
	// RetryBackoff is the first wait before a retry; it doubles, up to
	// 30 s. Default 1 s.
	RetryBackoff time.Duration
	// Logger receives the progress: each migration started and applied,
	// each retry, each backfill's rows, each index rebuilt. Default: the
	// DB's logger.
	Logger *slog.Logger
	// Target, when set, is the newest migration to apply.
	Target int64
	// NoBatchedSteps turns off the batched steps that stand in for a landed
	// migration's table rewrite (the lock figures' baseline).
	NoBatchedSteps bool
}

func (o MigrateOptions) withDefaults(db *DB) MigrateOptions {
	if o.LockTimeout <= 0 {
		o.LockTimeout = 3 * time.Second
	}
	if o.ConcurrentLockTimeout <= 0 {
		o.ConcurrentLockTimeout = 10 * time.Minute
	}
	if o.LockRetries <= 0 {
		o.LockRetries = 10
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	if o.Logger == nil {
		o.Logger = db.logger
	}
	return o
}

// MigrateWith is Migrate with options. Under the migrate lock it applies
// the pending migrations one at a time, each statement with a short
// lock_timeout: a migration that timed out waiting for a lock is rolled
// back (goose runs it in one transaction) and retried with back-off, so a
// long transaction of the service delays the migration instead of the
// migration's queued lock stopping the service's reads. Before a landed
// migration that would rewrite a large table under an exclusive lock
// (00020), it does the rewrite's work in small batches first (see
// batchedSteps). After migrating it rebuilds every INVALID index that a
// migration builds CONCURRENTLY (a failed or interrupted build leaves one,
// and "IF NOT EXISTS" then skips it), then records the checksums.
func (db *DB) MigrateWith(ctx context.Context, o MigrateOptions) (applied []int64, err error) {
	o = o.withDefaults(db)
	before, err := db.Schema(ctx)
	if err != nil {
		return nil, err
	}
	if err := before.differs(); err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	unlock, err := db.lockMigrations(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	defer unlock()
	mp, err := db.migrationPool(ctx, o.LockTimeout)
	if err != nil {
		return nil, fmt.Errorf("store: migrator: %w", err)
	}
	defer mp.Close()
	cp, err := db.migrationPool(ctx, o.ConcurrentLockTimeout)
	if err != nil {
		return nil, fmt.Errorf("store: migrator: %w", err)
	}
	defer cp.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(mp), migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("store: migrator: %w", err)
	}
	defer p.Close()
	pc, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(cp), migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("store: migrator: %w", err)
	}
	defer pc.Close()

	for {
		next, err := nextPending(ctx, p)
		if err != nil {
			return applied, fmt.Errorf("store: migrate: %w", err)
		}
		if next == nil || o.Target > 0 && next.Version > o.Target {
			break
		}
		name := next.Path
		if step, ok := batchedSteps[next.Version]; ok && !o.NoBatchedSteps {
			if err := step(ctx, mp, o); err != nil {
				return applied, fmt.Errorf("store: migrate: batched step before %s: %w", name, err)
			}
		}
		prov, timeout := p, o.LockTimeout
		if concurrentOnly, err := ConcurrentOnly(name); err != nil {
			return applied, fmt.Errorf("store: migrate: %w", err)
		} else if concurrentOnly {
			prov, timeout = pc, o.ConcurrentLockTimeout
		}
		o.Logger.Info("migrate: applying", "migration", name, "lock_timeout", timeout.String())
		var res *goose.MigrationResult
		err = retryOnLockTimeout(ctx, o, name, func() (err error) {
			res, err = prov.UpByOne(ctx)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("store: migrate: %w", err)
		}
		applied = append(applied, res.Source.Version)
		o.Logger.Info("migrate: applied", "migration", name, "duration", res.Duration.Round(time.Millisecond).String())
	}
	if err := db.rebuildInvalidIndexes(ctx, cp, o); err != nil {
		return applied, fmt.Errorf("store: migrate: %w", err)
	}
	if err := db.recordChecksums(ctx, applied); err != nil {
		return applied, fmt.Errorf("store: migrate: record checksums: %w", err)
	}
	return applied, nil
}

// concurrentStatement is an index statement that blocks no read and no
// write.
var concurrentStatement = regexp.MustCompile(`(?is)^(?:CREATE\s+(?:UNIQUE\s+)?INDEX|DROP\s+INDEX|REINDEX\s+(?:INDEX|TABLE))\s+CONCURRENTLY\b`)

// ConcurrentOnly reports whether every statement of a migration's Up
// section builds, drops or rebuilds an index CONCURRENTLY (goose runs it
// outside a transaction): the migrations that get ConcurrentLockTimeout.
func ConcurrentOnly(name string) (bool, error) {
	b, err := fs.ReadFile(migrations.FS, name)
	if err != nil {
		return false, err
	}
	up, _, _ := strings.Cut(string(b), "-- +goose Down")
	if !strings.Contains(up, "-- +goose NO TRANSACTION") {
		return false, nil
	}
	n := 0
	for _, stmt := range strings.Split(sqlComment.ReplaceAllString(up, ""), ";") {
		if stmt = strings.TrimSpace(stmt); stmt == "" {
			continue
		}
		if !concurrentStatement.MatchString(stmt) {
			return false, nil
		}
		n++
	}
	return n > 0, nil
}

var sqlComment = regexp.MustCompile(`--[^\n]*`)

// nextPending is the migration UpByOne applies next (nil: none).
func nextPending(ctx context.Context, p *goose.Provider) (*goose.Source, error) {
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range p.ListSources() {
		if s.Version > cur {
			return s, nil
		}
	}
	return nil, nil
}

// lockMigrations takes the migrate lock on a connection of its own,
// trying every second for 5 minutes (as goose's locker did), and returns
// its release.
func (db *DB) lockMigrations(ctx context.Context, o MigrateOptions) (func(), error) {
	id, err := db.migrateLockID(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, id).Scan(&ok); err != nil {
			conn.Release()
			return nil, err
		}
		if ok {
			break
		}
		if try == 300 {
			conn.Release()
			return nil, errors.New("another migrate of this schema has held the migrate lock for 5 minutes")
		}
		if try == 1 || try%30 == 0 {
			o.Logger.Info("migrate: waiting for another migrate of this schema to finish")
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return func() {
		// Unlocked even when ctx is done; a connection that cannot unlock
		// is closed, which releases the lock.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, id); err != nil {
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, nil
}

// migrationPool is a small pool on db's server and settings whose every
// session has lock_timeout set.
func (db *DB) migrationPool(ctx context.Context, lockTimeout time.Duration) (*pgxpool.Pool, error) {
	cfg := db.Pool.Config()
	cfg.MaxConns = 2
	cfg.MinConns = 0
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(lockTimeout.Milliseconds(), 10)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// IsLockTimeout reports whether err is Postgres's lock_timeout (SQLSTATE
// 55P03, lock_not_available).
func IsLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// retryOnLockTimeout runs step until it succeeds, fails otherwise than by
// a lock timeout, or has timed out LockRetries+1 times, waiting with
// doubling back-off between tries. step must leave nothing behind when it
// fails (one transaction, or statements that are safe to run again).
func retryOnLockTimeout(ctx context.Context, o MigrateOptions, what string, step func() error) error {
	wait := o.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || !IsLockTimeout(err) {
			return err
		}
		if attempt > o.LockRetries {
			return fmt.Errorf("%s: gave up after %d lock timeouts of %s (a transaction holds a lock it needs: "+
				"see pg_locks and pg_stat_activity, then run marketd migrate again): %w", what, attempt, o.LockTimeout, err)
		}
		o.Logger.Warn("migrate: lock timeout; rolled back, retrying", "step", what, "attempt", attempt,
			"of", o.LockRetries+1, "lock_timeout", o.LockTimeout.String(), "retry_in", wait.String(), "err", oneLine(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// concurrentIndex finds the indexes a migration builds CONCURRENTLY.
var concurrentIndex = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)"?`)

// ConcurrentIndexes are the indexes the migrations build CONCURRENTLY
// (their Up sections).
func ConcurrentIndexes() ([]string, error) {
	files, err := migrations.Files()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		b, err := fs.ReadFile(migrations.FS, f.Name)
		if err != nil {
			return nil, err
		}
		up, _, _ := strings.Cut(string(b), "-- +goose Down")
		for _, m := range concurrentIndex.FindAllStringSubmatch(up, -1) {
			names = append(names, strings.ToLower(m[1]))
		}
	}
	return names, nil
}

// rebuildInvalidIndexes rebuilds the INVALID indexes of the schema that a
// migration builds CONCURRENTLY: a CREATE INDEX CONCURRENTLY that failed
// (a lock timeout, a cancel, a unique violation) leaves the index invalid,
// unused by reads but maintained by writes, and "IF NOT EXISTS" skips it on
// the next run. It is rebuilt with REINDEX INDEX CONCURRENTLY; the
// "_ccnew"/"_ccold" copies a failed REINDEX CONCURRENTLY leaves are
// dropped first (DROP INDEX CONCURRENTLY). Neither blocks reads or writes.
func (db *DB) rebuildInvalidIndexes(ctx context.Context, mp *pgxpool.Pool, o MigrateOptions) error {
	ours, err := ConcurrentIndexes()
	if err != nil {
		return err
	}
	rows, err := mp.Query(ctx, `
		SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relnamespace = current_schema()::regnamespace AND NOT i.indisvalid ORDER BY c.relname`)
	if err != nil {
		return fmt.Errorf("invalid indexes: %w", err)
	}
	invalid, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("invalid indexes: %w", err)
	}
	var drop, rebuild []string
	for _, name := range invalid {
		switch base := leftoverCopy.ReplaceAllString(name, ""); {
		case slices.Contains(ours, name):
			rebuild = append(rebuild, name)
		case base != name && slices.Contains(ours, base):
			drop = append(drop, name)
		}
	}
	for _, name := range drop {
		o.Logger.Warn("migrate: dropping the copy a failed concurrent rebuild left", "index", name)
		if err := retryOnLockTimeout(ctx, o, "drop index "+name, func() error {
			_, err := mp.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{name}.Sanitize())
			return err
		}); err != nil {
			return err
		}
	}
	for _, name := range rebuild {
		o.Logger.Warn("migrate: rebuilding an INVALID index (a concurrent build failed)", "index", name)
		start := time.Now()
		if err := retryOnLockTimeout(ctx, o, "reindex "+name, func() error {
			_, err := mp.Exec(ctx, `REINDEX INDEX CONCURRENTLY `+pgx.Identifier{name}.Sanitize())
			if IsLockTimeout(err) {
				// The failed rebuild's copy: dropped before the next try.
				_, _ = mp.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{name + "_ccnew"}.Sanitize())
			}
			return err
		}); err != nil {
			return err
		}
		o.Logger.Info("migrate: rebuilt index", "index", name, "duration", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}

// leftoverCopy is the suffix of the copies REINDEX CONCURRENTLY makes.
var leftoverCopy = regexp.MustCompile(`_cc(?:new|old)\d*$`)
