package migrations_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/marketscreener/market/migrations"
)

// lockBaseline is the newest migration that landed before the rule "no
// migration holds a lock that stops the service's reads or writes for
// longer than a moment"; the ones after it are checked. (00019 and 00020
// broke it; the migrator converts 00020's column in batches first:
// store.ConvertColumnInBatches.)
const lockBaseline = 23

// lockReviewedMarker exempts a migration from the check, followed by why
// its long lock is harmless (e.g. the table is new, or always small).
const lockReviewedMarker = "-- lock-reviewed:"

var (
	dollarBody = regexp.MustCompile(`(?s)\$\$.*?\$\$`)
	doBefore   = regexp.MustCompile(`(?i)\bDO\s*$`)
	noTx       = regexp.MustCompile(`(?m)^--\s*\+goose\s+NO\s+TRANSACTION\b`)
	// Each pattern is a statement that holds a lock blocking reads or
	// writes for as long as it reads or rewrites the whole table.
	lockPatterns = []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`(?i)\bALTER\s+(?:COLUMN\s+)?[\w"]+\s+(?:SET\s+DATA\s+)?TYPE\b`),
			"a column's TYPE changed (rewrites the table under ACCESS EXCLUSIVE: convert in batches, store.ConvertColumnInBatches)"},
		{regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`),
			"SET NOT NULL (scans the table under ACCESS EXCLUSIVE: add CHECK (c IS NOT NULL) NOT VALID, VALIDATE it, then SET NOT NULL)"},
		{regexp.MustCompile(`(?i)\bADD\s+(?:CONSTRAINT\s+[\w"]+\s+)?(?:CHECK|FOREIGN\s+KEY)\b`),
			"a CHECK or FOREIGN KEY constraint added valid (scans the table under a lock blocking writes: add it NOT VALID, then VALIDATE CONSTRAINT)"},
		{regexp.MustCompile(`(?i)\b(?:VACUUM\s+FULL|CLUSTER)\b`), "VACUUM FULL or CLUSTER (rewrites under ACCESS EXCLUSIVE)"},
		{regexp.MustCompile(`(?i)^REINDEX\b(?:\s+\w+)?\s+(?:[\w".]+)\s*$`), "REINDEX without CONCURRENTLY (blocks writes)"},
		{regexp.MustCompile(`(?i)^LOCK\b`), "LOCK TABLE"},
	}
	notValid = regexp.MustCompile(`(?i)\bNOT\s+VALID\b`)
	// A statement that reads or writes every row of a table: a backfill.
	backfill     = regexp.MustCompile(`(?i)^(?:WITH\b.*\b)?(?:UPDATE|DELETE\s+FROM)\b|^INSERT\s+INTO\b.*\bSELECT\b`)
	createIndex  = regexp.MustCompile(`(?i)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?[\w"]*\s*ON\s+(?:ONLY\s+)?"?(\w+)"?`)
	createTable  = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)"?`)
	alterTable   = regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?"?(\w+)"?`)
	plpgsqlLead  = regexp.MustCompile(`(?i)^(?:(?:BEGIN|LOOP|THEN|ELSE|DECLARE)\s+)+`)
	concurrently = regexp.MustCompile(`(?i)\bCONCURRENTLY\b`)
	commitStmt   = regexp.MustCompile(`(?i)\bCOMMIT\b`)
	limitClause  = regexp.MustCompile(`(?i)\bLIMIT\b`)
)

// longLocks lists the statements of a migration's text (whole file) that
// would hold a lock stopping the service's reads or writes for the length
// of a scan, a rewrite or a backfill of an existing table.
func longLocks(text string) []string {
	batchedOK := noTx.MatchString(text)
	up := upSection(text)
	created := map[string]bool{}
	for _, m := range createTable.FindAllStringSubmatch(up, -1) {
		created[strings.ToLower(m[1])] = true
	}
	// In a transaction, an ALTER TABLE of an existing table holds it
	// ACCESS EXCLUSIVE until the commit: a copy into a new table then
	// keeps it for the copy's length (00019).
	altered := ""
	for _, m := range alterTable.FindAllStringSubmatch(up, -1) {
		if !created[strings.ToLower(m[1])] && !batchedOK {
			altered = m[1]
		}
	}
	isFree := func(stmt string) bool { return altered == "" && createdTarget(stmt, created) }
	var found []string
	// DO blocks run now: a backfill in one is batched when it commits as
	// it goes (NO TRANSACTION) and takes a LIMIT a batch. A function's
	// body runs later, when called: not checked here.
	rest := dollarBody.ReplaceAllStringFunc(up, func(body string) string { return "$$ $$" })
	for _, loc := range dollarBody.FindAllStringIndex(up, -1) {
		body := up[loc[0]:loc[1]]
		if !doBefore.MatchString(up[:loc[0]]) {
			continue
		}
		batched := batchedOK && commitStmt.MatchString(body) && limitClause.MatchString(body)
		for _, stmt := range strings.Split(body[2:len(body)-2], ";") {
			stmt = plpgsqlLead.ReplaceAllString(strings.TrimSpace(spaces.ReplaceAllString(stmt, " ")), "")
			if backfill.MatchString(stmt) && !batched && !isFree(stmt) {
				found = append(found, fmt.Sprintf("a backfill in one transaction (%q in a DO block): batch it, committing "+
					"each batch (-- +goose NO TRANSACTION, a DO block with LIMIT and COMMIT in its loop)", stmt))
			}
			found = append(found, lockStatements(stmt, created)...)
		}
	}
	for _, stmt := range strings.Split(rest, ";") {
		stmt = strings.TrimSpace(spaces.ReplaceAllString(stmt, " "))
		if stmt == "" {
			continue
		}
		if backfill.MatchString(stmt) && !isFree(stmt) {
			found = append(found, fmt.Sprintf("a whole-table backfill or copy in one statement (%q%s): batch it, committing "+
				"each batch (-- +goose NO TRANSACTION, a DO block with LIMIT and COMMIT in its loop)", stmt, heldBy(altered)))
		}
		found = append(found, lockStatements(stmt, created)...)
	}
	if concurrently.MatchString(up) && !batchedOK {
		found = append(found, "CONCURRENTLY in a migration without -- +goose NO TRANSACTION (Postgres refuses it in a transaction)")
	}
	return found
}

func heldBy(altered string) string {
	if altered == "" {
		return ""
	}
	return ", while the transaction holds " + altered + " ACCESS EXCLUSIVE"
}

// createdTarget reports whether a backfill writes a table the migration
// creates (empty until the migration commits: nobody waits for it).
func createdTarget(stmt string, created map[string]bool) bool {
	m := regexp.MustCompile(`(?i)^(?:WITH\b.*?\b)?(?:UPDATE\s+(?:ONLY\s+)?|DELETE\s+FROM\s+(?:ONLY\s+)?|INSERT\s+INTO\s+)"?(\w+)"?`).FindStringSubmatch(stmt)
	return m != nil && created[strings.ToLower(m[1])]
}

func lockStatements(stmt string, created map[string]bool) []string {
	var found []string
	for _, p := range lockPatterns {
		if p.re.MatchString(stmt) && !notValid.MatchString(stmt) {
			found = append(found, fmt.Sprintf("%s in %q", p.what, stmt))
		}
	}
	if m := createIndex.FindStringSubmatch(stmt); m != nil && m[1] == "" && !created[strings.ToLower(m[2])] {
		found = append(found, fmt.Sprintf("CREATE INDEX without CONCURRENTLY on an existing table (blocks its writes "+
			"for the build: CREATE INDEX CONCURRENTLY IF NOT EXISTS, in a migration of its own with -- +goose NO TRANSACTION) in %q", stmt))
	}
	return found
}

// TestMigrationsTakeShortLocks: no migration after the baseline holds a
// lock that stops the service's reads or writes for the length of a
// table's scan, rewrite or backfill (README, "Migrations and rolling
// upgrades"): type changes, whole-table UPDATEs and copies, valid
// constraints and plain index builds on existing tables are done in
// batches, NOT VALID + VALIDATE, or CONCURRENTLY. The migrator's
// lock_timeout keeps a short lock from queueing the service behind a long
// transaction.
func TestMigrationsTakeShortLocks(t *testing.T) {
	checkMigrationsAfter(t, lockBaseline, lockReviewedMarker, "why the long lock is harmless", longLocks, func(name, l string) {
		t.Errorf("%s: %s; or, when the lock is harmless, a reviewed %q line saying why", name, l, lockReviewedMarker+" <why>")
	})
}

// TestLongLocks: the check finds what it should (including what 00019 and
// 00020 did) and lets the short-lock forms through.
func TestLongLocks(t *testing.T) {
	t.Parallel()
	const noTxUp = "-- +goose NO TRANSACTION\n-- +goose Up\n"
	tests := []struct {
		sql  string
		want int
	}{
		{"-- +goose Up\nCREATE TABLE t (a int); CREATE INDEX t_a ON t (a); INSERT INTO t SELECT 1", 0},
		{"-- +goose Up\nCREATE TABLE a (x int); INSERT INTO a SELECT x FROM r", 0},
		{"-- +goose Up\nALTER TABLE r ADD COLUMN c int NOT NULL DEFAULT 0; CREATE TABLE a (x int); INSERT INTO a SELECT x FROM r", 1}, // 00019
		{"-- +goose Up\nALTER TABLE r ADD COLUMN c int; INSERT INTO archive (a) SELECT a FROM r", 1},
		{"-- +goose Up\nALTER TABLE r ALTER COLUMN result TYPE json USING result::json", 1}, // 00020
		{"-- +goose Up\nDO $$ BEGIN ALTER TABLE r ALTER COLUMN x TYPE json USING x::json; END $$;", 1},
		{"-- +goose Up\nUPDATE candles SET volume = 0", 1},
		{"-- +goose Up\nWITH x AS (SELECT 1) UPDATE candles SET volume = 0", 1},
		{"-- +goose Up\nDELETE FROM candles WHERE volume < 0", 1},
		{"-- +goose Up\nCREATE INDEX i ON candles (open_time)", 1},
		{noTxUp + "CREATE INDEX CONCURRENTLY IF NOT EXISTS i ON candles (open_time)", 0},
		{"-- +goose Up\nCREATE INDEX CONCURRENTLY i ON candles (open_time)", 1},
		{"-- +goose Up\nALTER TABLE t ALTER COLUMN c SET NOT NULL", 1},
		{"-- +goose Up\nALTER TABLE t ADD CONSTRAINT c CHECK (a > 0)", 1},
		{"-- +goose Up\nALTER TABLE t ADD CONSTRAINT c CHECK (a > 0) NOT VALID; ALTER TABLE t VALIDATE CONSTRAINT c", 0},
		{"-- +goose Up\nALTER TABLE t ADD FOREIGN KEY (a) REFERENCES u (a)", 1},
		{"-- +goose Up\nVACUUM FULL t; CLUSTER t USING i; REINDEX TABLE t; LOCK TABLE t IN ACCESS EXCLUSIVE MODE", 4},
		{noTxUp + "REINDEX INDEX CONCURRENTLY i", 0},
		// A function's body runs when called, not at migration time.
		{"-- +goose Up\nCREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE v SET n = n + 1; RETURN NULL; END $$;", 0},
		// A batched backfill: each batch commits.
		{noTxUp + "DO $$ DECLARE n int; BEGIN LOOP UPDATE t SET c = 0 WHERE id IN (SELECT id FROM t WHERE c IS NULL LIMIT 1000); " +
			"GET DIAGNOSTICS n = ROW_COUNT; COMMIT; EXIT WHEN n = 0; END LOOP; END $$;", 0},
		{"-- +goose Up\nDO $$ DECLARE n int; BEGIN LOOP UPDATE t SET c = 0 WHERE id IN (SELECT id FROM t WHERE c IS NULL LIMIT 1000); " +
			"GET DIAGNOSTICS n = ROW_COUNT; COMMIT; EXIT WHEN n = 0; END LOOP; END $$;", 1},
		{"-- +goose Up\nSELECT 1;\n-- +goose Down\nUPDATE t SET c = 0", 0},
	}
	for _, tt := range tests {
		if got := longLocks(tt.sql); len(got) != tt.want {
			t.Errorf("longLocks(%q) = %q, want %d finding(s)", tt.sql, got, tt.want)
		}
	}
	// The landed migrations it would have refused.
	for name, want := range map[string]bool{"00017_candle_retention.sql": false, "00019_report_archive.sql": true,
		"00020_report_result_json.sql": true, "00021_listings.sql": false, "00023_candle_series_versions.sql": false} {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := longLocks(string(b)); (len(got) > 0) != want {
			t.Errorf("%s: long locks %q, want found = %v", name, got, want)
		}
	}
}
