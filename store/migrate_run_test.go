package store_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/migrations"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// logBuffer is a logger whose lines a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// openUnmigrated is a DB on a fresh schema of its own, migrated up to
// version (0: not at all).
func openUnmigrated(t testing.TB, version int64) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), storetest.DatabaseURL(), store.Options{Schema: storetest.CreateSchema(t), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if version > 0 {
		if err := store.MigrateTo(db, context.Background(), version); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// versionsAfter lists the binary's migrations after version v.
func versionsAfter(t *testing.T, v int64) []int64 {
	t.Helper()
	files, err := migrations.Files()
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, f := range files {
		if f.Version > v {
			out = append(out, f.Version)
		}
	}
	return out
}

// holdLock holds mode on table in a transaction of its own until the
// returned func is called.
func holdLock(t *testing.T, db *store.DB, table, mode string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN `+mode+` MODE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// TestMigrateRetriesOnLockTimeout: a migration that waits for a lock
// longer than the lock timeout is rolled back and retried, each retry
// logged, until the lock is free; the migration is applied once.
func TestMigrateRetriesOnLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openUnmigrated(t, 22)
	// An ingest transaction writing candles: 00023's triggers on candles
	// need a lock that waits for it.
	release := holdLock(t, db, "candles", "ROW EXCLUSIVE")
	time.AfterFunc(700*time.Millisecond, release)
	var logs logBuffer
	start := time.Now()
	applied, err := db.MigrateWith(ctx, store.MigrateOptions{LockTimeout: 100 * time.Millisecond, LockRetries: 30,
		RetryBackoff: 50 * time.Millisecond, Logger: logs.logger()})
	if want := versionsAfter(t, 22); err != nil || !cmp.Equal(applied, want) {
		t.Fatalf("MigrateWith = %v %v, want %v\n%s", applied, err, want, logs.String())
	}
	if time.Since(start) < 600*time.Millisecond {
		t.Errorf("migrated in %s while the lock was held for 700 ms", time.Since(start))
	}
	if n := strings.Count(logs.String(), "lock timeout; rolled back, retrying"); n < 1 || !strings.Contains(logs.String(), "00023_candle_series_versions.sql") {
		t.Errorf("%d retries logged, want at least one naming 00023:\n%s", n, logs.String())
	}
}

// TestMigrateGivesUpOnLockTimeout: a lock held for longer than the retries
// last fails migrate with what to do, and leaves the migration unapplied
// (rolled back: none of its statements stays).
func TestMigrateGivesUpOnLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openUnmigrated(t, 22)
	holdLock(t, db, "candles", "ROW EXCLUSIVE")
	var logs logBuffer
	_, err := db.MigrateWith(ctx, store.MigrateOptions{LockTimeout: 50 * time.Millisecond, LockRetries: 2,
		RetryBackoff: 10 * time.Millisecond, Logger: logs.logger()})
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 lock timeouts") || !store.IsLockTimeout(err) {
		t.Fatalf("MigrateWith = %v, want it to give up after 3 lock timeouts", err)
	}
	s, err := db.Schema(ctx)
	if err != nil || s.Version != 22 {
		t.Fatalf("schema version %d %v, want 22", s.Version, err)
	}
	var exists bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('candle_series_versions') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Fatalf("candle_series_versions exists = %v %v after the rollback", exists, err)
	}
}

func indexValid(t *testing.T, db *store.DB, name string) (exists, valid bool) {
	t.Helper()
	err := db.Pool.QueryRow(context.Background(), `
		SELECT true, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = $1`, name).Scan(&exists, &valid)
	if err == pgx.ErrNoRows {
		return false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return exists, valid
}

// TestMigrateRebuildsIndexOfFailedConcurrentBuild: 00017's CREATE INDEX
// CONCURRENTLY times out waiting for a writer of candles after it created
// the index: the index is left INVALID and the retry's "IF NOT EXISTS"
// skips it. migrate rebuilds it once the migrations are applied.
func TestMigrateRebuildsIndexOfFailedConcurrentBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openUnmigrated(t, 16)
	release := holdLock(t, db, "candles", "ROW EXCLUSIVE")
	time.AfterFunc(700*time.Millisecond, release)
	var logs logBuffer
	// Short timeouts for the concurrent build too, to make it fail; many
	// retries, as a concurrent build also waits for the transactions of
	// the tests running beside this one.
	if _, err := db.MigrateWith(ctx, store.MigrateOptions{LockTimeout: 100 * time.Millisecond, ConcurrentLockTimeout: 100 * time.Millisecond,
		LockRetries: 60, RetryBackoff: 50 * time.Millisecond, Logger: logs.logger()}); err != nil {
		t.Fatalf("MigrateWith: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "rebuilding an INVALID index") {
		t.Errorf("the index was not left invalid (no rebuild logged): the test no longer makes the case\n%s", logs.String())
	}
	if exists, valid := indexValid(t, db, "candles_timeframe_open_time"); !exists || !valid {
		t.Fatalf("candles_timeframe_open_time exists %v, valid %v after migrate", exists, valid)
	}
}

// TestMigrateRebuildsInvalidIndex: an INVALID index that a migration
// builds CONCURRENTLY (made so by hand here) is rebuilt by the next
// migrate, with nothing to apply; the copy a failed REINDEX CONCURRENTLY
// leaves is dropped; an invalid index no migration builds concurrently is
// left alone.
func TestMigrateRebuildsInvalidIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	for _, q := range []string{
		`CREATE INDEX candles_timeframe_open_time_ccnew ON candles (timeframe, open_time)`,
		`CREATE INDEX someone_elses ON candles (open_time)`,
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid IN ('candles_timeframe_open_time'::regclass,
			'candles_timeframe_open_time_ccnew'::regclass, 'someone_elses'::regclass)`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, valid := indexValid(t, db, "candles_timeframe_open_time"); valid {
		t.Fatal("the index is valid after marking it invalid")
	}
	var logs logBuffer
	applied, err := db.MigrateWith(ctx, store.MigrateOptions{Logger: logs.logger()})
	if err != nil || len(applied) != 0 {
		t.Fatalf("MigrateWith = %v %v", applied, err)
	}
	if exists, valid := indexValid(t, db, "candles_timeframe_open_time"); !exists || !valid {
		t.Errorf("candles_timeframe_open_time exists %v, valid %v after migrate\n%s", exists, valid, logs.String())
	}
	if exists, _ := indexValid(t, db, "candles_timeframe_open_time_ccnew"); exists {
		t.Errorf("the leftover _ccnew copy was not dropped\n%s", logs.String())
	}
	if exists, valid := indexValid(t, db, "someone_elses"); !exists || valid {
		t.Errorf("an index no migration builds: exists %v, valid %v, want left as it was", exists, valid)
	}
	var def string
	if err := db.Pool.QueryRow(ctx, `SELECT pg_get_indexdef('candles_timeframe_open_time'::regclass)`).Scan(&def); err != nil ||
		!strings.Contains(def, "(timeframe, open_time)") {
		t.Errorf("rebuilt index: %q %v", def, err)
	}
}

// reportResult is a result of ≈ 7 kB of JSON, as a scored report's.
const reportResult = `(SELECT jsonb_build_object('technical_score', 12, 'summary', repeat('a summary ', 30), 'factors',
	jsonb_agg(jsonb_build_object('name', 'factor_' || f, 'value', round((random() * 100)::numeric, 4), 'sentiment', 'bullish',
		'weight', 0.04, 'explanation', 'factor ' || f || ' ' || md5(random()::text) || repeat(' explained', 8))))
	FROM generate_series(1, 28) f)`

// seedCurrentReports fills analytics_reports with assets × 4 styles.
func seedCurrentReports(t testing.TB, db *store.DB, assets int) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO analytics_reports (market, style, symbol, exchange, overall_score,
		verdict, price, change_pct, sparkline, result, candle_time, candle_close, updated_at)
		SELECT 'crypto', st, 'S' || a || '_USDT', 'binance', 10, 'neutral', 1, 0, '{}', `+reportResult+`, now(), 1, now()
		FROM generate_series(1, $1) a, unnest(ARRAY['scalp', 'intraday', 'swing', 'position']) st`, assets); err != nil {
		t.Fatalf("seed reports: %v", err)
	}
}

// seedArchive fills the report archive (00019) with perAsset reports of
// each of assets.
func seedArchive(t testing.TB, db *store.DB, assets, perAsset int) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO analytics_report_archive (market, style, symbol, published_at,
		exchange, instrument, overall_score, verdict, price, change_pct, candle_time, candle_close, candles_used, result)
		SELECT 'crypto', 'scalp', 'S' || a || '_USDT', now() - n * interval '1 minute', 'binance', 'spot', 10, 'neutral', 1, 0,
			now(), 1, 300, `+reportResult+`
		FROM generate_series(1, $1) a, generate_series(1, $2) n`, assets, perAsset); err != nil {
		t.Fatalf("seed archive: %v", err)
	}
}

type columnDef struct {
	Name, Type  string
	NotNull     bool
	Compression string
}

func columnDefs(t *testing.T, db *store.DB, table string) []columnDef {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT attname, format_type(atttypid, atttypmod), attnotnull, attcompression::text FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attname`, table)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[columnDef])
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

func tableText(t *testing.T, db *store.DB, table, key string) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(),
		fmt.Sprintf(`SELECT md5(string_agg(%s::text || result::text, ',' ORDER BY %[1]s)) FROM %s`, key, table)).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrate00020InBatches: on a database not yet at 00020, migrate
// converts the reports' result column in batches before 00020, which then
// rewrites nothing; the tables end as 00020 alone leaves them (types,
// nullability, compression, every value), and the batched step's
// temporary column, trigger and function are gone.
func TestMigrate00020InBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := [2]*store.DB{openUnmigrated(t, 19), openUnmigrated(t, 19)}
	seedCurrentReports(t, dbs[0], 20)
	seedArchive(t, dbs[0], 20, 250) // 5,000 rows: three batches of 2,000
	// The same rows in both.
	var s0 string
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&s0); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"analytics_reports", "analytics_report_archive"} {
		if _, err := dbs[1].Pool.Exec(ctx, `INSERT INTO `+table+` SELECT * FROM `+s0+`.`+table); err != nil {
			t.Fatal(err)
		}
	}
	var logs logBuffer
	if _, err := dbs[0].MigrateWith(ctx, store.MigrateOptions{Logger: logs.logger()}); err != nil {
		t.Fatalf("batched: %v\n%s", err, logs.String())
	}
	if got := strings.Count(logs.String(), "converted a column in batches"); got != 2 {
		t.Errorf("%d columns converted in batches, want 2\n%s", got, logs.String())
	}
	if _, err := dbs[1].MigrateWith(ctx, store.MigrateOptions{NoBatchedSteps: true}); err != nil {
		t.Fatalf("plain: %v", err)
	}
	for table, key := range map[string]string{"analytics_reports": "(market, style, symbol)",
		"analytics_report_archive": "(market, style, symbol, published_at)"} {
		if diff := cmp.Diff(columnDefs(t, dbs[1], table), columnDefs(t, dbs[0], table)); diff != "" {
			t.Errorf("%s's columns, batched against plain 00020 (-plain +batched):\n%s", table, diff)
		}
		if a, b := tableText(t, dbs[0], table, key), tableText(t, dbs[1], table, key); a != b {
			t.Errorf("%s's rows differ: batched %s, plain %s", table, a, b)
		}
	}
	var left int
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%\_batched')
		+ (SELECT count(*) FROM pg_proc WHERE proname LIKE 'marketd\_batched\_%' AND pronamespace = current_schema()::regnamespace)`).
		Scan(&left); err != nil || left != 0 {
		t.Errorf("%d triggers or functions of the batched step left (%v)", left, err)
	}
	// The service writes through the new column as before.
	if _, err := dbs[0].Pool.Exec(ctx, `INSERT INTO analytics_report_archive (market, style, symbol, published_at, exchange,
		instrument, overall_score, verdict, price, change_pct, candle_time, candle_close, candles_used, result)
		VALUES ('crypto', 'swing', 'X_USDT', now(), 'binance', 'spot', 1, 'neutral', 1, 0, now(), 1, 1, '{"a": 1}')`); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentOnly: the migrations that only build indexes CONCURRENTLY
// are told from the others.
func TestConcurrentOnly(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"00017_candle_retention.sql": true, "00020_report_result_json.sql": false,
		"00023_candle_series_versions.sql": false, "00002_market_data.sql": false, "00031_alert_states_by_symbol.sql": true,
		"00029_alerts_at_a_close.sql": false} {
		if got, err := store.ConcurrentOnly(name); err != nil || got != want {
			t.Errorf("ConcurrentOnly(%s) = %v %v, want %v", name, got, err, want)
		}
	}
	idx, err := store.ConcurrentIndexes()
	if err != nil || !cmp.Equal(idx, []string{"candles_timeframe_open_time", "alert_states_symbol"}) {
		t.Errorf("ConcurrentIndexes() = %v %v", idx, err)
	}
}
