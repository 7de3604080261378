package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/migrations"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

type recordedChecksum struct {
	Version int64
	SHA256  string
	Adopted bool
}

func recordedChecksums(t *testing.T, db *store.DB) []recordedChecksum {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT version, sha256, adopted FROM migration_checksums ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []recordedChecksum
	for rows.Next() {
		var r recordedChecksum
		if err := rows.Scan(&r.Version, &r.SHA256, &r.Adopted); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// binaryChecksums is what migrate records for the binary's files;
// adopted(v) says which were applied before recording.
func binaryChecksums(t *testing.T, adopted func(int64) bool) []recordedChecksum {
	t.Helper()
	files, err := migrations.Files()
	if err != nil {
		t.Fatal(err)
	}
	var want []recordedChecksum
	for _, f := range files {
		want = append(want, recordedChecksum{f.Version, f.SHA256, adopted(f.Version)})
	}
	return want
}

// TestMigrateRecordsChecksums: a fresh migrate records the checksum of
// every migration it applied.
func TestMigrateRecordsChecksums(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	want := binaryChecksums(t, func(int64) bool { return false })
	if diff := cmp.Diff(want, recordedChecksums(t, db)); diff != "" {
		t.Fatalf("recorded checksums (-want +got):\n%s", diff)
	}
}

// TestMigrateAdoptsEarlierMigrations: on a database migrated before
// checksums were recorded, migrate records the binary's checksums of the
// migrations it found applied, marked adopted (unverifiable), and the ones
// it applied itself as they ran.
func TestMigrateAdoptsEarlierMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	s, err := db.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// As a database migrated by the release before the checksum table
	// (00015), with the newest migrations not applied yet.
	if err := db.MigrateDownTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	applied, err := db.Migrate(ctx)
	if err != nil || len(applied) == 0 || applied[0] != 15 || applied[len(applied)-1] != s.Binary {
		t.Fatalf("Migrate = %v %v, want 15 to %d applied", applied, err, s.Binary)
	}
	want := binaryChecksums(t, func(v int64) bool { return v < 15 })
	if diff := cmp.Diff(want, recordedChecksums(t, db)); diff != "" {
		t.Fatalf("recorded checksums (-want +got):\n%s", diff)
	}
}

// TestMigrateRefusesEditedMigration: a database that recorded another
// checksum for one of the binary's migrations is refused by migrate and by
// readiness, naming the version; a newer release's checksums are not.
func TestMigrateRefusesEditedMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	s, err := db.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newer := s.Binary + 1
	for _, q := range []string{`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`,
		`INSERT INTO migration_checksums (version, sha256, adopted) VALUES ($1, repeat('e', 64), false)`} {
		if _, err := db.Pool.Exec(ctx, q, newer); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with a newer release's migration: %v", err)
	}
	if s, err = db.Schema(ctx); err != nil || s.Problem() != nil {
		t.Fatalf("Schema with a newer release's migration: %+v %v", s, err)
	}

	if _, err := db.Pool.Exec(ctx, `UPDATE migration_checksums SET sha256 = repeat('0', 64) WHERE version = 4`); err != nil {
		t.Fatal(err)
	}
	const want = "migration 00004 was applied from another file than this binary's 00004_analytics.sql"
	if _, err := db.Migrate(ctx); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Migrate after 00004 was recorded with another checksum: %v, want %q", err, want)
	}
	s, err = db.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Problem(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Schema().Problem() = %v, want %q", err, want)
	}
}

// TestConcurrentMigrateRecordsOnce: two migrates of a fresh schema at once
// both succeed, and every migration ends recorded as applied, not adopted.
func TestConcurrentMigrateRecordsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := storetest.CreateSchema(t)
	var dbs [2]*store.DB
	for i := range dbs {
		db, err := store.Open(ctx, storetest.DatabaseURL(), store.Options{Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		dbs[i] = db
	}
	errs := make(chan error, len(dbs))
	for _, db := range dbs {
		go func() { _, err := db.Migrate(ctx); errs <- err }()
	}
	for range dbs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := binaryChecksums(t, func(int64) bool { return false })
	if diff := cmp.Diff(want, recordedChecksums(t, dbs[0])); diff != "" {
		t.Fatalf("recorded checksums (-want +got):\n%s", diff)
	}
}
