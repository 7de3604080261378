package store_test

import (
	"testing"

	"github.com/marketscreener/market/store"
)

// SameTarget compares what two Postgres URLs point at, not their text.
func TestSameTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"postgres://a:5432/db", "postgres://user@a/db?sslmode=disable", true},
		{"postgres://a/db", "postgresql://u:p@A:5432/db?application_name=x", true},
		{"postgres://localhost/db", "postgres://127.0.0.1:5432/db", true},
		{"postgres://a/db?search_path=public", "postgres://a/db", true},
		{"postgres://a/db?search_path=sandbox", "postgres://a/db?search_path=Sandbox,public", true},
		{"postgres://a/db?search_path=sandbox", "postgres://a/db", false}, // same database, another schema: allowed
		{"postgres://a/db", "postgres://a/other", false},
		{"postgres://a/db", "postgres://b/db", false},
		{"postgres://a:5432/db", "postgres://a:5433/db", false},
		{"postgres://a,b/db", "postgres://b/db", true},
	} {
		got, err := store.SameTarget(tc.a, tc.b)
		if err != nil || got != tc.same {
			t.Errorf("SameTarget(%q, %q) = %v, %v; want %v", tc.a, tc.b, got, err, tc.same)
		}
	}
}
