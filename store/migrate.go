package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/marketscreener/market/migrations"
)

func (db *DB) migrator(ctx context.Context) (*goose.Provider, error) {
	// The advisory lock id is derived from the schema, so migrators of one
	// schema serialise while tests on schemas of their own run in parallel.
	var schema string
	if err := db.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte("marketd-migrate:" + schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, err
	}
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	return goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
}

// Migrate applies every pending migration; running it twice is a no-op.
// A Postgres advisory lock keeps concurrent migrators from racing.
func (db *DB) Migrate(ctx context.Context) (applied []int64, err error) {
	p, err := db.migrator(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrator: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// Schema is the database's applied migrations against this binary's.
//
// A binary serves on a schema that has every migration it has, and on one
// ahead of it: migrations stay backward compatible for one release, so
// during a rolling upgrade the previous release keeps serving on the new
// release's schema.
type Schema struct {
	Version int64   // newest applied migration (0: none)
	Binary  int64   // newest migration this binary has
	Missing []int64 // the binary's migrations not applied (marketd migrate applies them)
	Newer   []int64 // applied migrations newer than the binary's newest (a newer release's)
	// Unknown are applied migrations the binary does not have although it
	// has newer ones: the database was migrated by another build.
	Unknown []int64
}

// Problem says why this binary cannot serve on the schema; nil when it can.
func (s Schema) Problem() error {
	switch {
	case len(s.Missing) > 0:
		return fmt.Errorf("schema at version %d lacks migration %s of this binary (version %d): run marketd migrate",
			s.Version, versions(s.Missing), s.Binary)
	case len(s.Unknown) > 0:
		return fmt.Errorf("schema has migration %s, which this binary (version %d) does not have: the database was migrated by another build",
			versions(s.Unknown), s.Binary)
	}
	return nil
}

// Skew describes a schema ahead of the binary ("" when it is not).
func (s Schema) Skew() string {
	if len(s.Newer) == 0 {
		return ""
	}
	return fmt.Sprintf("schema %d, binary %d: schema ahead by %d (migration %s): fine during a rolling upgrade",
		s.Version, s.Binary, len(s.Newer), versions(s.Newer))
}

func versions(vs []int64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%05d", v)
	}
	return strings.Join(parts, ", ")
}

// Schema compares the applied migrations with the binary's. It only reads
// (readiness calls it every probe): a database never migrated has none.
func (db *DB) Schema(ctx context.Context) (Schema, error) {
	files, err := migrations.Files()
	if err != nil {
		return Schema{}, fmt.Errorf("store: %w", err)
	}
	applied, err := db.appliedMigrations(ctx)
	if err != nil {
		return Schema{}, fmt.Errorf("store: schema version: %w", err)
	}
	return compareSchema(files, applied), nil
}

func compareSchema(files []migrations.File, applied []int64) Schema {
	var s Schema
	has := make(map[int64]bool, len(files))
	for _, f := range files {
		has[f.Version] = true
		s.Binary = max(s.Binary, f.Version)
	}
	done := make(map[int64]bool, len(applied))
	for _, v := range applied {
		done[v] = true
		s.Version = max(s.Version, v)
		switch {
		case v > s.Binary:
			s.Newer = append(s.Newer, v)
		case !has[v]:
			s.Unknown = append(s.Unknown, v)
		}
	}
	for _, f := range files {
		if !done[f.Version] {
			s.Missing = append(s.Missing, f.Version)
		}
	}
	return s
}

// appliedMigrations reads goose's version table directly, in version order:
// goose's own reads create the table when it is missing, and readiness
// must not write.
func (db *DB) appliedMigrations(ctx context.Context) ([]int64, error) {
	var exists bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	// A version's newest row says whether it is applied (a down migration
	// may leave a row with is_applied false); version 0 is goose's own.
	rows, err := db.Pool.Query(ctx, `
		SELECT version_id FROM (
			SELECT DISTINCT ON (version_id) version_id, is_applied
			FROM goose_db_version ORDER BY version_id, id DESC) v
		WHERE is_applied AND version_id > 0 ORDER BY version_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
