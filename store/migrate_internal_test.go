package store

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/marketscreener/market/migrations"
)

// compareSchema: a binary serves on every migration it has, with or
// without newer ones; a missing or unknown one, or one recorded with
// another checksum, is a problem. A newer release's checksums are not.
func TestCompareSchema(t *testing.T) {
	t.Parallel()
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	files := []migrations.File{{Version: 1, SHA256: a}, {Version: 2, SHA256: b, Name: "00002_two.sql"}, {Version: 4, SHA256: c}}
	tests := []struct {
		name     string
		applied  []int64
		recorded map[int64]string
		want     Schema
		problem  string
		skew     string
	}{
		{"unmigrated", nil, nil, Schema{Binary: 4, Missing: []int64{1, 2, 4}}, "lacks migration 00001, 00002, 00004", ""},
		{"current", []int64{1, 2, 4}, map[int64]string{1: a, 2: b, 4: c}, Schema{Version: 4, Binary: 4}, "", ""},
		{"behind", []int64{1, 2}, nil, Schema{Version: 2, Binary: 4, Missing: []int64{4}}, "run marketd migrate", ""},
		{"ahead", []int64{1, 2, 4, 5, 6}, map[int64]string{1: a, 5: a}, Schema{Version: 6, Binary: 4, Newer: []int64{5, 6}}, "",
			"schema 6, binary 4: schema ahead by 2 (migration 00005, 00006)"},
		{"another build's", []int64{1, 2, 3, 4}, nil, Schema{Version: 4, Binary: 4, Unknown: []int64{3}}, "migration 00003, which this binary", ""},
		{"edited", []int64{1, 2, 4}, map[int64]string{1: a, 2: c, 4: c},
			Schema{Version: 4, Binary: 4, Mismatched: []ChecksumMismatch{{Version: 2, Name: "00002_two.sql", Recorded: c, Binary: b}}},
			"migration 00002 was applied from another file than this binary's 00002_two.sql (recorded sha256 cccccccccccc…, binary bbbbbbbbbbbb…)", ""},
	}
	for _, tt := range tests {
		got := compareSchema(files, tt.applied, tt.recorded)
		if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(Schema{})); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
		}
		if err := got.Problem(); (err == nil) != (tt.problem == "") || err != nil && !strings.Contains(err.Error(), tt.problem) {
			t.Errorf("%s: Problem() = %v, want %q", tt.name, err, tt.problem)
		}
		if !strings.HasPrefix(got.Skew(), tt.skew) || (got.Skew() == "") != (tt.skew == "") {
			t.Errorf("%s: Skew() = %q, want %q...", tt.name, got.Skew(), tt.skew)
		}
	}
}
