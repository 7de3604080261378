package store_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/marketscreener/market/migrations"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// lockBaseline is the newest migration allowed to hold a lock that stops
// reads for long (migrations' TestMigrationsTakeShortLocks has the same).
const lockBaseline = 23

// Modes that stop a plain read (SELECT takes ACCESS SHARE), and a write
// (INSERT/UPDATE/DELETE take ROW EXCLUSIVE).
var (
	blocksReads  = []string{"AccessExclusiveLock"}
	blocksWrites = []string{"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
)

// tableLocks is what the probe saw of one table during one migration.
type tableLocks struct {
	modes                   map[string]bool
	readStretch, readFrom   time.Duration // the longest stretch a read-blocking lock was held, and the current one's start
	writeStretch, writeFrom time.Duration
	readOn, writeOn         bool
}

// lockProbe samples pg_locks every few ms for the relations of a schema
// locked by other sessions (the migrator), and records per table the
// modes held and the longest stretch a mode stopping reads, or writes,
// was held without a gap.
type lockProbe struct {
	mu     sync.Mutex
	tables map[string]*tableLocks
	start  time.Time
	stop   chan struct{}
	done   chan struct{}
}

func startLockProbe(t testing.TB, schema string) *lockProbe {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	p := &lockProbe{tables: map[string]*tableLocks{}, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer conn.Close(ctx)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			rows, err := conn.Query(ctx, `SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
				WHERE l.granted AND c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p') AND l.pid <> pg_backend_pid()`, schema)
			if err != nil {
				continue
			}
			now := time.Since(p.start)
			held := map[string][]string{}
			for rows.Next() {
				var rel, mode string
				if rows.Scan(&rel, &mode) == nil {
					held[rel] = append(held[rel], mode)
				}
			}
			rows.Close()
			p.observe(now, held)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return p
}

func (p *lockProbe) observe(now time.Duration, held map[string][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for rel := range held {
		if p.tables[rel] == nil {
			p.tables[rel] = &tableLocks{modes: map[string]bool{}}
		}
	}
	for rel, tl := range p.tables {
		modes := held[rel]
		reads, writes := false, false
		for _, m := range modes {
			tl.modes[m] = true
			reads = reads || slices.Contains(blocksReads, m)
			writes = writes || slices.Contains(blocksWrites, m)
		}
		stretch := func(on bool, was *bool, from, longest *time.Duration) {
			switch {
			case on && !*was:
				*from = now
			case on:
				*longest = max(*longest, now-*from)
			}
			*was = on
		}
		stretch(reads, &tl.readOn, &tl.readFrom, &tl.readStretch)
		stretch(writes, &tl.writeOn, &tl.writeFrom, &tl.writeStretch)
	}
}

func (p *lockProbe) finish() map[string]*tableLocks {
	close(p.stop)
	<-p.done
	return p.tables
}

// lockScale multiplies the seeded sizes (MARKET_LOCKS_SCALE, default 1).
func lockScale(t testing.TB) int {
	s := os.Getenv("MARKET_LOCKS_SCALE")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("MARKET_LOCKS_SCALE=%q: want a positive integer", s)
	}
	return n
}

type lockFigure struct {
	version  int64
	name     string
	duration time.Duration
	tables   map[string]*tableLocks
}

func (f lockFigure) String() string {
	var parts []string
	names := make([]string, 0, len(f.tables))
	for n := range f.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tl := f.tables[n]
		if n == "goose_db_version" || n == "migration_checksums" {
			continue // the migrator's own bookkeeping
		}
		var modes []string
		for m := range tl.modes {
			modes = append(modes, strings.TrimSuffix(m, "Lock"))
		}
		slices.Sort(modes)
		parts = append(parts, fmt.Sprintf("%s [%s] reads blocked %s, writes %s", n, strings.Join(modes, " "),
			tl.readStretch.Round(time.Millisecond), tl.writeStretch.Round(time.Millisecond)))
	}
	return fmt.Sprintf("%-36s %8s  %s", f.name, f.duration.Round(time.Millisecond), strings.Join(parts, "; "))
}

// migrateMeasured applies the migrations up to target (each one pending
// from the current version) one at a time under the lock probe.
func migrateMeasured(t *testing.T, db *store.DB, schema string, target int64, o store.MigrateOptions,
	seed map[int64]func()) []lockFigure {
	t.Helper()
	files, err := migrations.Files()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := db.Schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var figs []lockFigure
	for _, f := range files {
		if f.Version <= cur.Version || f.Version > target {
			continue
		}
		if s := seed[f.Version]; s != nil {
			s()
		}
		o.Target = f.Version
		p := startLockProbe(t, schema)
		start := time.Now()
		if _, err := db.MigrateWith(context.Background(), o); err != nil {
			p.finish()
			t.Fatalf("migrate %s: %v", f.Name, err)
		}
		figs = append(figs, lockFigure{f.Version, f.Name, time.Since(start), p.finish()})
	}
	return figs
}

// TestMigrationLocks measures each migration's locks on seeded tables: the
// modes it takes on each table and the longest stretch it held a mode
// that stops reads (ACCESS EXCLUSIVE) or writes, sampled from pg_locks
// every few ms. The report archive and the current reports are seeded
// before 00019/00020 (7 kB results), the candles before 00003.
// MARKET_LOCKS_SCALE multiplies the sizes (make bench-migrate-locks; the
// default keeps the test to seconds). It asserts that no migration after
// lockBaseline holds a read-blocking lock on a seeded table for more than
// a second (a catalog change takes milliseconds; a scan or rewrite
// grows with the table), and that the probe sees 00020's rewrite when the
// batched step is off.
func TestMigrationLocks(t *testing.T) {
	t.Parallel()
	scale := lockScale(t)
	assets, perAsset, candlesPer := 40*scale, 50, 500
	ctx := context.Background()
	open := func() (*store.DB, string) {
		schema := storetest.CreateSchema(t)
		db, err := store.Open(ctx, storetest.DatabaseURL(), store.Options{Schema: schema, MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		return db, schema
	}
	seeds := func(db *store.DB) map[int64]func() {
		return map[int64]func(){
			3: func() {
				if _, err := db.Pool.Exec(ctx, `INSERT INTO candles (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
					SELECT 'crypto', 'binance', 'S' || a || '_USDT', '1m', timestamptz '2026-11-01' + n * interval '1 minute', 1, 2, 0.5, 1.5, 10
					FROM generate_series(1, $1) a, generate_series(1, $2) n`, assets, candlesPer); err != nil {
					t.Fatal(err)
				}
			},
			19: func() { seedCurrentReports(t, db, assets) },
			20: func() { seedArchive(t, db, assets, perAsset) },
		}
	}
	o := store.MigrateOptions{LockTimeout: 5 * time.Second}
	db, schema := open()
	figs := migrateMeasured(t, db, schema, 1<<62, o, seeds(db))

	// 00020 as it landed, without the batched step, on the same sizes.
	plainDB, plainSchema := open()
	if err := store.MigrateTo(plainDB, ctx, 19); err != nil {
		t.Fatal(err)
	}
	ps := seeds(plainDB)
	ps[3]()
	ps[19]()
	o.NoBatchedSteps = true
	plain := migrateMeasured(t, plainDB, plainSchema, 20, o, map[int64]func(){20: ps[20]})

	t.Logf("seeded: %d candles before 00003, %d current reports before 00019, %d archived reports before 00020 (scale %d)",
		assets*candlesPer, assets*4, assets*perAsset, scale)
	for _, f := range figs {
		t.Logf("%s", f)
	}
	t.Logf("as landed: %s", plain[0])
	seeded := []string{"candles", "analytics_reports", "analytics_report_archive"}
	for _, f := range figs {
		for _, n := range seeded {
			if tl := f.tables[n]; f.version > lockBaseline && tl != nil && tl.readStretch > time.Second {
				t.Errorf("%s held %s with a lock stopping reads for %s (%v)", f.name, n, tl.readStretch, tl.modes)
			}
		}
	}
	if tl := plain[0].tables["analytics_report_archive"]; tl == nil || !tl.modes["AccessExclusiveLock"] {
		t.Errorf("the probe did not see 00020's rewrite lock the archive exclusively: %v", plain[0])
	}
}

// TestBatchedBackfillMigration: the batched backfill that
// TestMigrationsTakeShortLocks asks for (NO TRANSACTION, a DO block that
// commits each batch) runs under goose as the migrator runs it, and fills
// every row.
func TestBatchedBackfillMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	fsys := fstest.MapFS{"00001_t.sql": {Data: []byte(`-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE t (id int PRIMARY KEY, c int);
INSERT INTO t (id) SELECT generate_series(1, 2500);
-- +goose StatementBegin
DO $$
DECLARE n int;
BEGIN
    LOOP
        UPDATE t SET c = id * 2 WHERE id IN (SELECT id FROM t WHERE c IS NULL ORDER BY id LIMIT 1000);
        GET DIAGNOSTICS n = ROW_COUNT;
        COMMIT;
        EXIT WHEN n = 0;
    END LOOP;
END $$;
-- +goose StatementEnd
`)}}
	p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(db.Pool), fsys, goose.WithTableName("t_versions"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("the batched backfill under goose: %v", err)
	}
	var missing int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM t WHERE c IS DISTINCT FROM id * 2`).Scan(&missing); err != nil || missing != 0 {
		t.Fatalf("%d rows not backfilled (%v)", missing, err)
	}
}
