package migrations_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/marketscreener/market/migrations"
)

// compatBaseline is the newest migration that landed before the rule
// "backward compatible for one release"; the ones after it are checked.
const compatBaseline = 13

// reviewedMarker exempts a migration from the check. It is written by the
// reviewer, followed by why the previous release no longer needs what the
// migration removes or changes (it stopped using it one release earlier).
const reviewedMarker = "-- destructive-change-reviewed:"

var (
	sqlComment = regexp.MustCompile(`--[^\n]*`)
	spaces     = regexp.MustCompile(`\s+`)
	// Each pattern is a change the previous release's binary may fail on.
	destructivePatterns = []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`(?i)\bDROP\s+(?:NOT\s+NULL\b)?`), "DROP (of a table, column, function, index, default...)"},
		{regexp.MustCompile(`(?i)\bRENAME\b`), "RENAME"},
		{regexp.MustCompile(`(?i)\bALTER\s+(?:COLUMN\s+)?[\w"]+\s+(?:SET\s+DATA\s+)?TYPE\b`), "a column's TYPE changed"},
		{regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`), "SET NOT NULL"},
		{regexp.MustCompile(`(?i)\bTRUNCATE\b`), "TRUNCATE"},
	}
	dropNotNull = regexp.MustCompile(`(?i)^DROP\s+NOT\s+NULL`)
	// An ALTER TABLE action adding a column; the word after ADD tells a
	// column (or the COLUMN keyword) from a constraint.
	addColumn      = regexp.MustCompile(`(?i)\bADD\s+(COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?([\w"]+)`)
	constraintWord = regexp.MustCompile(`(?i)^(?:CONSTRAINT|PRIMARY|UNIQUE|CHECK|FOREIGN|EXCLUDE)$`)
	notNull        = regexp.MustCompile(`(?i)\bNOT\s+NULL\b`)
	hasValue       = regexp.MustCompile(`(?i)\b(?:DEFAULT|GENERATED)\b`)
)

// upSection is a migration's SQL run by migrate: before "-- +goose Down",
// without comments.
func upSection(text string) string {
	up, _, _ := strings.Cut(text, "-- +goose Down")
	return sqlComment.ReplaceAllString(up, "")
}

// destructive lists the statements of up that a binary of the previous
// release may fail on: drops, renames, type changes, new NOT NULL
// constraints without a value for the rows that release inserts.
func destructive(up string) []string {
	var found []string
	for _, stmt := range strings.Split(up, ";") {
		stmt = strings.TrimSpace(spaces.ReplaceAllString(stmt, " "))
		if stmt == "" {
			continue
		}
		for _, p := range destructivePatterns {
			for _, m := range p.re.FindAllString(stmt, -1) {
				if !dropNotNull.MatchString(m) { // DROP NOT NULL relaxes a constraint
					found = append(found, fmt.Sprintf("%s in %q", p.what, stmt))
				}
			}
		}
		if strings.HasPrefix(strings.ToUpper(stmt), "ALTER TABLE") {
			for _, action := range topLevelCommaSplit(stmt) {
				if addsNotNullColumn(action) {
					found = append(found, fmt.Sprintf("a NOT NULL column without DEFAULT (%q) in %q", strings.TrimSpace(action), stmt))
				}
			}
		}
	}
	return found
}

// addsNotNullColumn reports whether an ALTER TABLE action adds a NOT NULL
// column with no value for the rows the previous release inserts.
func addsNotNullColumn(action string) bool {
	m := addColumn.FindStringSubmatch(action)
	if m == nil || m[1] == "" && constraintWord.MatchString(m[2]) {
		return false
	}
	return notNull.MatchString(action) && !hasValue.MatchString(action)
}

// topLevelCommaSplit splits an ALTER TABLE statement into its actions (the
// commas outside parentheses).
func topLevelCommaSplit(stmt string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range stmt {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, stmt[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, stmt[start:])
}

// TestMigrationsBackwardCompatible: every migration after the baseline is
// additive, so the previous release keeps serving on the schema during a
// rolling upgrade (README, "Migrations and rolling upgrades"). A
// destructive change waits one release after the code stopped using what
// it removes, and carries the reviewer's marker.
func TestMigrationsBackwardCompatible(t *testing.T) {
	checkMigrationsAfter(t, compatBaseline, reviewedMarker, "why the previous release no longer needs what it changes",
		func(text string) []string { return destructive(upSection(text)) },
		func(name, d string) {
			t.Errorf("%s: %s: the previous release's binary may fail on it during a rolling upgrade. Make the change "+
				"additive now and destructive one release after the code stopped using it, with a reviewed %q line saying so",
				name, d, reviewedMarker+" <why>")
		})
}

// checkMigrationsAfter reports what find finds in every migration after
// baseline (its whole text) that lacks marker; a marker must be followed
// by a reason (why).
func checkMigrationsAfter(t *testing.T, baseline int64, marker, why string, find func(text string) []string, report func(name, finding string)) {
	t.Helper()
	files, err := migrations.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Version <= baseline {
			continue
		}
		b, err := fs.ReadFile(migrations.FS, f.Name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if i := strings.Index(text, marker); i >= 0 {
			reason, _, _ := strings.Cut(text[i+len(marker):], "\n")
			if strings.TrimSpace(reason) == "" {
				t.Errorf("%s: %s must say %s", f.Name, marker, why)
			}
			continue
		}
		for _, d := range find(text) {
			report(f.Name, d)
		}
	}
}

// TestDestructive: the check finds what it should and lets additive
// changes through.
func TestDestructive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql  string
		want int
	}{
		{"CREATE TABLE t (a int NOT NULL, b text NOT NULL DEFAULT '')", 0},
		{"ALTER TABLE t ADD COLUMN c int", 0},
		{"ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 0, ADD COLUMN d int", 0},
		{"ALTER TABLE t ADD c int NOT NULL", 1},
		{"ALTER TABLE t ADD COLUMN c numeric(10, 2) NOT NULL, ADD COLUMN d bigint GENERATED ALWAYS AS IDENTITY", 1},
		{"ALTER TABLE t ALTER COLUMN c DROP NOT NULL", 0},
		{"CREATE INDEX i ON t (a); CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", 0},
		{"DROP TABLE t", 1},
		{"alter table t drop column c", 1},
		{"ALTER TABLE t DROP c", 1},
		{"DROP INDEX i; DROP FUNCTION f()", 2},
		{"ALTER TABLE t ALTER COLUMN c DROP DEFAULT", 1},
		{"ALTER TABLE t RENAME COLUMN a TO b", 1},
		{"ALTER TABLE t RENAME TO u", 1},
		{"ALTER TABLE t ALTER COLUMN c TYPE bigint", 1},
		{"ALTER TABLE t ALTER c SET DATA TYPE bigint", 1},
		{"ALTER TABLE t ALTER COLUMN c SET NOT NULL", 1},
		{"TRUNCATE t", 1},
		{"ALTER TYPE mood ADD VALUE 'meh'", 0},
		{"ALTER TABLE IF EXISTS ONLY t ADD COLUMN c int NOT NULL", 1},
		{"ALTER TABLE t ADD CONSTRAINT c CHECK (a IS NOT NULL), ADD PRIMARY KEY (a)", 0},
	}
	for _, tt := range tests {
		if got := destructive(tt.sql); len(got) != tt.want {
			t.Errorf("destructive(%q) = %q, want %d finding(s)", tt.sql, got, tt.want)
		}
	}
	up := upSection("-- +goose Up\n-- DROP TABLE in a comment\nALTER TABLE t ADD COLUMN c int;\n-- +goose Down\nALTER TABLE t DROP COLUMN c;\n")
	if got := destructive(up); len(got) != 0 {
		t.Errorf("comments or the Down section were checked: %q", got)
	}
}
