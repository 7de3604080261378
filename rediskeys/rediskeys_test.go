package rediskeys_test

import (
	"strings"
	"testing"

	"github.com/marketscreener/market/rediskeys"
)

// family is one kind of key or channel: its fixed head, and a name built
// by the Space method that owns it.
type family struct {
	name    string
	channel bool
	head    string
	build   func(s rediskeys.Space) string
}

func families() []family {
	return []family{
		{"rate limit window", false, "ratelimit:{", func(s rediskeys.Space) string { return s.RateLimit("c1") }},
		{"stream slots", false, "marketd:streams:", func(s rediskeys.Space) string { return s.StreamSlots("c1") }},
		{"host budget", false, "marketd:budget:", func(s rediskeys.Space) string { return s.HostBudget("binance") }},
		{"push lease", false, "push:lease", func(s rediskeys.Space) string { return s.PushLease() }},
		{"push live mark", false, "push:live:", func(s rediskeys.Space) string { return s.PushLive("crypto", "binance") }},
		{"pushed series", false, "push:series:", func(s rediskeys.Space) string { return s.PushSeries("stocks", "nasdaq", "1m") }},
		{"catch-up starts", false, "push:catchup:", func(s rediskeys.Space) string { return s.PushCatchUp("crypto", "binance", "1h") }},
		{"score pending set", false, "pipeline:score:pending:", func(s rediskeys.Space) string { return s.ScorePending("crypto", "swing") }},
		{"score generation", false, "pipeline:score:gen:", func(s rediskeys.Space) string { return s.ScoreGeneration("crypto", "swing") }},
		{"pipeline claim", false, "pipeline:claim:", func(s rediskeys.Space) string { return s.PipelineClaim("webhooks:wake:1") }},
		{"invalidation channel", true, "marketd:invalidate", func(s rediskeys.Space) string { return s.Invalidations() }},
		{"sandbox invalidation channel", true, "marketd:sandbox:invalidate", func(s rediskeys.Space) string { return s.SandboxInvalidations() }},
	}
}

// Every name starts with the space's prefix and its family's head, and no
// head is a prefix of another's (nor of asynq's namespace, nor it of
// theirs, nor of the tests' prefixes): whatever their variable parts, two
// families never name the same key or channel, in any one space.
func TestFamiliesDisjoint(t *testing.T) {
	t.Parallel()
	fs := families()
	for _, prefix := range []rediskeys.Space{"", "test:0123abcd:"} {
		for _, f := range fs {
			if got := f.build(prefix); !strings.HasPrefix(got, string(prefix)+f.head) {
				t.Errorf("%s in space %q = %q, want it to start with %q", f.name, prefix, got, string(prefix)+f.head)
			}
		}
	}
	heads := map[string]string{rediskeys.AsynqNamespace: "asynq's namespace", "test:": "the tests' prefixes"}
	for _, f := range fs {
		heads[f.head] = f.name
	}
	for a, an := range heads {
		for b, bn := range heads {
			if a != b && strings.HasPrefix(b, a) {
				t.Errorf("%s (%q) is a prefix of %s (%q): their names can meet", an, a, bn, b)
			}
		}
	}
	if len(heads) != len(fs)+2 {
		t.Errorf("%d distinct heads for %d families and 2 reserved names: two share a head", len(heads), len(fs))
	}
	if !strings.HasPrefix(rediskeys.AsynqQueues, rediskeys.AsynqNamespace) {
		t.Errorf("asynq's queue registry %q is outside its namespace", rediskeys.AsynqQueues)
	}
}

// The sandbox is kept apart from the service: its pipeline's keys live in
// a Redis database of its own (asynq's cannot be prefixed), and pub/sub
// channels, which span databases, differ by name, in every space: a
// sandbox write never reaches the live read caches, nor a live one the
// sandbox's.
func TestSandboxChannelsApart(t *testing.T) {
	t.Parallel()
	for _, a := range []rediskeys.Space{"", "test:0123abcd:"} {
		for _, b := range []rediskeys.Space{"", "test:0123abcd:"} {
			if a.SandboxInvalidations() == b.Invalidations() {
				t.Errorf("the sandbox's channel in %q is the service's in %q: %q", a, b, a.Invalidations())
			}
		}
	}
}
