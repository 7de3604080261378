package rediskeys_test

import (
	"testing"

	"github.com/marketscreener/market/rediskeys"
)

// SameTarget compares what two Redis URLs point at, not their text.
func TestSameTarget(t *testing.T) {
	t.Parallel()
	s := rediskeys.Sentinel{Addrs: []string{"10.0.0.1:26379"}, Master: "mymaster"}
	sentinel := func(u string) string {
		out, err := rediskeys.WithSentinel(u, s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"redis://localhost", "redis://127.0.0.1:6379/0", true},
		{"redis://r:6379/1", "redis://user:pw@R/1?dial_timeout=3s", true},
		{"redis://r/1", "redis://r/2", false},
		{"redis://r", "redis://q", false},
		{"redis://r:6379", "redis://r:6380", false},
		{sentinel("redis://a/1"), sentinel("redis://b:6379/1"), true}, // the host is not dialled: the primary is
		{sentinel("redis://a/1"), sentinel("redis://a/2"), false},
	} {
		got, err := rediskeys.SameTarget(tc.a, tc.b)
		if err != nil || got != tc.same {
			t.Errorf("SameTarget(%q, %q) = %v, %v; want %v", tc.a, tc.b, got, err, tc.same)
		}
	}
}
