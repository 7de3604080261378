package app

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketscreener/market/rediskeys"
)

var update = flag.Bool("update", false, "rewrite the documentation's configuration tables from the option table")

// TestREADMEConfigTable: the documentation's configuration tables (the
// block between the config markers, in README.md or a file of docs/) are
// the ones the option table renders, so they list every variable with its
// real default. -update rewrites them.
func TestREADMEConfigTable(t *testing.T) {
	path := configDocFile(t)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceConfigDoc(doc, configMarkdown())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(want, doc) {
		t.Fatalf("%s: the configuration tables differ from the option table's (cmd/marketd/app/config.go); run\n"+
			"  go test ./cmd/marketd/app -run TestREADMEConfigTable -update\nand commit the file", path)
	}
}

// configDocFile is the one documentation file holding the config block.
func configDocFile(t *testing.T) string {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	var found []string
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(configDocBegin)) {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one of README.md and docs/*.md with a %s … %s block, found %q", configDocBegin, configDocEnd, found)
	}
	return found[0]
}

// TestConfigOptionsAreDocumented: every option has a documentation and a
// name of its own, and the defaults are accepted.
func TestConfigOptionsAreDocumented(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, o := range configOptions() {
		if seen[o.name] {
			t.Errorf("%s is listed twice", o.name)
		}
		seen[o.name] = true
		if strings.TrimSpace(o.doc) == "" || strings.Contains(o.doc, "\n") {
			t.Errorf("%s: documentation %q must be one non-empty line", o.name, o.doc)
		}
		if o.parse == nil && o.def != "" {
			t.Errorf("%s: an option read elsewhere shows its default in shownDef", o.name)
		}
	}
	if _, err := LoadConfig(func(string) string { return "" }); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}

// With sentinels, every Redis URL a role is given (the queues' and the
// sandbox's) carries them; the sentinels are refused without the
// primary's name.
func TestConfigRedisSentinel(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"MARKET_REDIS_URL":             "rediss://u:p@ignored:6379/0",
		"MARKET_SANDBOX_REDIS_URL":     "rediss://u:p@ignored:6379/1",
		"MARKET_REDIS_SENTINEL_ADDRS":  "10.0.0.1:26379, 10.0.0.2:26379",
		"MARKET_REDIS_SENTINEL_MASTER": "mymaster",
	}
	c, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{c.RedisURL, c.SandboxRedisURL} {
		o, err := rediskeys.ClientOptions(u)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(o.Sentinel.Addrs, ",") != "10.0.0.1:26379,10.0.0.2:26379" || o.Sentinel.Master != "mymaster" || o.TLSConfig == nil || o.Username != "u" {
			t.Errorf("%s: sentinel %+v, options %+v", u, o.Sentinel, o.Options)
		}
	}
	delete(env, "MARKET_REDIS_SENTINEL_MASTER")
	if _, err := LoadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "MARKET_REDIS_SENTINEL_MASTER") {
		t.Errorf("sentinels without a master: %v", err)
	}
}
