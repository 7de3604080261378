package app

import (
	"strings"
	"testing"
)

// MARKET_STREAM_DB_CONNS: 4 by default; below 2 (no connection left for
// replays beside the hub's) or not a number is refused, naming it.
func TestStreamDBConnsConfig(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "MARKET_STREAM_DB_CONNS" {
				return v
			}
			return ""
		}
	}
	if c, err := LoadConfig(env("")); err != nil || c.StreamDBConns != 4 {
		t.Fatalf("default: %d (%v), want 4", c.StreamDBConns, err)
	}
	if c, err := LoadConfig(env("8")); err != nil || c.StreamDBConns != 8 {
		t.Fatalf("8: %d (%v)", c.StreamDBConns, err)
	}
	for _, bad := range []string{"1", "65", "many"} {
		if _, err := LoadConfig(env(bad)); err == nil || !strings.HasPrefix(err.Error(), "MARKET_STREAM_DB_CONNS:") {
			t.Fatalf("%q: %v, want an error naming MARKET_STREAM_DB_CONNS", bad, err)
		}
	}
}
