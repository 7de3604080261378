package store

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/migrations"
)

// compareSchema: a binary serves on every migration it has, with or
// without newer ones; a missing or unknown one is a problem.
func TestCompareSchema(t *testing.T) {
	t.Parallel()
	files := []migrations.File{{Version: 1}, {Version: 2}, {Version: 4}}
	tests := []struct {
		name    string
		applied []int64
		want    Schema
		problem string
		skew    string
	}{
		{"unmigrated", nil, Schema{Binary: 4, Missing: []int64{1, 2, 4}}, "lacks migration 00001, 00002, 00004", ""},
		{"current", []int64{1, 2, 4}, Schema{Version: 4, Binary: 4}, "", ""},
		{"behind", []int64{1, 2}, Schema{Version: 2, Binary: 4, Missing: []int64{4}}, "run marketd migrate", ""},
		{"ahead", []int64{1, 2, 4, 5, 6}, Schema{Version: 6, Binary: 4, Newer: []int64{5, 6}}, "",
			"schema 6, binary 4: schema ahead by 2 (migration 00005, 00006)"},
		{"another build's", []int64{1, 2, 3, 4}, Schema{Version: 4, Binary: 4, Unknown: []int64{3}}, "migration 00003, which this binary", ""},
	}
	for _, tt := range tests {
		got := compareSchema(files, tt.applied)
		if diff := cmp.Diff(tt.want, got); diff != "" {
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
