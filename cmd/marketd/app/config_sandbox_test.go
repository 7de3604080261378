package app

import (
	"strings"
	"testing"
)

// The sandbox's database and Redis are compared with the live ones by
// what they point at: another spelling of the live target is refused,
// naming the variable; the same database with another schema (or another
// Redis database) is fine.
func TestSandboxTargetsComparedByWhatTheyPointAt(t *testing.T) {
	load := func(kv map[string]string) error {
		_, err := LoadConfig(func(k string) string { return kv[k] })
		return err
	}
	for _, tc := range []struct {
		live, sandbox, variable string
	}{
		{"postgres://a:5432/db", "postgres://user@a/db?sslmode=disable", "MARKET_SANDBOX_DATABASE_URL"},
		{"postgres://localhost/db?search_path=public", "postgres://127.0.0.1:5432/db", "MARKET_SANDBOX_DATABASE_URL"},
		{"redis://localhost:6379", "redis://127.0.0.1/0", "MARKET_SANDBOX_REDIS_URL"},
		{"redis://r/1", "redis://u:p@r:6379/1", "MARKET_SANDBOX_REDIS_URL"},
	} {
		env := map[string]string{}
		if strings.Contains(tc.variable, "DATABASE") {
			env["MARKET_DATABASE_URL"], env["MARKET_SANDBOX_DATABASE_URL"] = tc.live, tc.sandbox
		} else {
			env["MARKET_REDIS_URL"], env["MARKET_SANDBOX_REDIS_URL"] = tc.live, tc.sandbox
		}
		if err := load(env); err == nil || !strings.HasPrefix(err.Error(), tc.variable+":") {
			t.Errorf("live %s, sandbox %s: %v, want an error naming %s", tc.live, tc.sandbox, err, tc.variable)
		}
	}
	for _, env := range []map[string]string{
		{"MARKET_DATABASE_URL": "postgres://a:5432/db", "MARKET_SANDBOX_DATABASE_URL": "postgres://user@a/db?sslmode=disable&search_path=sandbox"},
		{"MARKET_DATABASE_URL": "postgres://a/db", "MARKET_SANDBOX_DATABASE_URL": "postgres://a/sandbox"},
		{"MARKET_REDIS_URL": "redis://r:6379", "MARKET_SANDBOX_REDIS_URL": "redis://r:6379/1"},
	} {
		if err := load(env); err != nil {
			t.Errorf("%v: %v, want accepted", env, err)
		}
	}
}
