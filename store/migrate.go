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

// migrateLockID is the advisory lock that serialises the migrators of a
// schema: derived from the schema, so migrators of one schema serialise
// while tests on schemas of their own run in parallel. Every release since
// 00015 takes the same id (through goose's session locker before this
// one), so an older binary's migrate waits for a newer one's and back.
func (db *DB) migrateLockID(ctx context.Context) (int64, error) {
	var schema string
	if err := db.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return 0, err
	}
	h := fnv.New64a()
	h.Write([]byte("marketd-migrate:" + schema))
	return int64(h.Sum64() >> 1), nil
}

// migrator is a goose provider on db's pool holding the migrate lock while
// it runs (the tests' MigrateTo and MigrateDownTo).
func (db *DB) migrator(ctx context.Context) (*goose.Provider, error) {
	id, err := db.migrateLockID(ctx)
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(id), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, err
	}
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	return goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
}

// Migrate applies every pending migration; running it twice is a no-op.
// A Postgres advisory lock keeps concurrent migrators from racing. It is
// MigrateWith with the default options (MigrateOptions), logging to the
// DB's logger.
//
// It refuses a database whose applied migrations differ from the binary's
// (a recorded checksum that is not the binary's file, or a migration the
// binary does not have), before applying anything. Afterwards it records
// the checksum of every applied migration not recorded yet.
func (db *DB) Migrate(ctx context.Context) (applied []int64, err error) {
	return db.MigrateWith(ctx, MigrateOptions{})
}

// recordChecksums records the binary's checksum of every applied migration
// it has that has none yet. Those applied by this run (appliedNow) are
// what ran; the others were applied before checksums were recorded (by a
// binary without the table, or by a run that stopped before recording)
// and are adopted: this binary's file is recorded, unverified.
func (db *DB) recordChecksums(ctx context.Context, appliedNow []int64) error {
	files, err := migrations.Files()
	if err != nil {
		return err
	}
	s, err := db.Schema(ctx)
	if err != nil {
		return err
	}
	now := make(map[int64]bool, len(appliedNow))
	for _, v := range appliedNow {
		now[v] = true
	}
	var (
		vs      []int64
		sums    []string
		adopted []bool
	)
	for _, f := range files {
		if s.applied[f.Version] && s.recorded[f.Version] == "" {
			vs, sums, adopted = append(vs, f.Version), append(sums, f.SHA256), append(adopted, !now[f.Version])
		}
	}
	if len(vs) == 0 {
		return nil
	}
	var hasTable bool // not before 00015 (MigrateOptions.Target)
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('migration_checksums') IS NOT NULL`).Scan(&hasTable); err != nil || !hasTable {
		return err
	}
	// A concurrent migrate that waited for this one's migrations records
	// them too, as adopted; whichever records second, the row ends as
	// applied by the run that applied it.
	_, err = db.Pool.Exec(ctx, `
		INSERT INTO migration_checksums AS m (version, sha256, adopted)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::boolean[])
		ON CONFLICT (version) DO UPDATE SET adopted = false
		WHERE m.adopted AND NOT excluded.adopted AND m.sha256 = excluded.sha256`, vs, sums, adopted)
	return err
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
	// Mismatched are applied migrations recorded with another file than
	// the binary's: a landed migration was edited, and the database keeps
	// the definitions it was migrated with.
	Mismatched []ChecksumMismatch

	applied  map[int64]bool
	recorded map[int64]string // version → recorded SHA-256
}

// ChecksumMismatch is a migration the database recorded with another file
// than this binary's.
type ChecksumMismatch struct {
	Version          int64
	Name             string // the binary's file
	Recorded, Binary string // SHA-256 in hex
}

// Problem says why this binary cannot serve on the schema; nil when it can.
func (s Schema) Problem() error {
	if err := s.differs(); err != nil {
		return err
	}
	if len(s.Missing) > 0 {
		return fmt.Errorf("schema at version %d lacks migration %s of this binary (version %d): run marketd migrate",
			s.Version, versions(s.Missing), s.Binary)
	}
	return nil
}

// differs says how the applied migrations differ from the binary's (nil
// when they do not): neither migrate nor serving can fix that.
func (s Schema) differs() error {
	if len(s.Mismatched) > 0 {
		m := s.Mismatched[0]
		return fmt.Errorf("migration %05d was applied from another file than this binary's %s (recorded sha256 %.12s…, binary %.12s…): "+
			"a landed migration was edited and this database keeps the definitions it was migrated with; "+
			"deploy a build whose migrations match, or repair the schema by hand (README: Migrations and rolling upgrades)",
			m.Version, m.Name, m.Recorded, m.Binary)
	}
	if len(s.Unknown) > 0 {
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
	applied, recorded, err := db.appliedMigrations(ctx)
	if err != nil {
		return Schema{}, fmt.Errorf("store: schema version: %w", err)
	}
	return compareSchema(files, applied, recorded), nil
}

// compareSchema compares applied versions (in order) and their recorded
// checksums with the binary's files. A recorded version the binary does
// not have (a newer release's) is no mismatch.
func compareSchema(files []migrations.File, applied []int64, recorded map[int64]string) Schema {
	s := Schema{applied: make(map[int64]bool, len(applied)), recorded: recorded}
	has := make(map[int64]bool, len(files))
	for _, f := range files {
		has[f.Version] = true
		s.Binary = max(s.Binary, f.Version)
	}
	for _, v := range applied {
		s.applied[v] = true
		s.Version = max(s.Version, v)
		switch {
		case v > s.Binary:
			s.Newer = append(s.Newer, v)
		case !has[v]:
			s.Unknown = append(s.Unknown, v)
		}
	}
	for _, f := range files {
		if !s.applied[f.Version] {
			s.Missing = append(s.Missing, f.Version)
		}
		if sum, ok := recorded[f.Version]; ok && sum != f.SHA256 {
			s.Mismatched = append(s.Mismatched, ChecksumMismatch{Version: f.Version, Name: f.Name, Recorded: sum, Binary: f.SHA256})
		}
	}
	return s
}

// appliedMigrations reads goose's version table and the recorded
// checksums directly: goose's own reads create its table when it is
// missing, and readiness must not write. Versions come in order.
func (db *DB) appliedMigrations(ctx context.Context) (applied []int64, recorded map[int64]string, err error) {
	var hasVersions, hasChecksums bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL, to_regclass('migration_checksums') IS NOT NULL`).
		Scan(&hasVersions, &hasChecksums); err != nil {
		return nil, nil, err
	}
	if !hasVersions {
		return nil, nil, nil
	}
	// A version's newest row says whether it is applied (a down migration
	// may leave a row with is_applied false); version 0 is goose's own.
	rows, err := db.Pool.Query(ctx, `
		SELECT version_id FROM (
			SELECT DISTINCT ON (version_id) version_id, is_applied
			FROM goose_db_version ORDER BY version_id, id DESC) v
		WHERE is_applied AND version_id > 0 ORDER BY version_id`)
	if err != nil {
		return nil, nil, err
	}
	if applied, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || !hasChecksums {
		return applied, nil, err
	}
	rows, err = db.Pool.Query(ctx, `SELECT version, sha256 FROM migration_checksums`)
	if err != nil {
		return nil, nil, err
	}
	recorded = map[int64]string{}
	var (
		v   int64
		sum string
	)
	_, err = pgx.ForEachRow(rows, []any{&v, &sum}, func() error { recorded[v] = sum; return nil })
	return applied, recorded, err
}
