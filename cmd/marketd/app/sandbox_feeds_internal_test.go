package app

import (
	"strings"
	"testing"

	"github.com/marketscreener/market/feeds"
)

// A sandbox pipeline runs the synthetic feed only: any other MARKET_FEEDS
// is refused at start in one line naming the variable, and the pipeline's
// feeds are built from the synthetic feed alone whatever the Config holds
// (no real provider, credential or budget reaches it).
func TestSandboxPipelineRunsTheSyntheticFeedOnly(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, fs := range []string{"binance", "synthetic,binance", "binance,synthetic", "okx"} {
		_, err := LoadConfig(env(map[string]string{"MARKET_SANDBOX_PIPELINE": "true", "MARKET_FEEDS": fs}))
		if err == nil || !strings.HasPrefix(err.Error(), "MARKET_FEEDS:") || strings.Contains(err.Error(), "\n") {
			t.Errorf("MARKET_FEEDS=%s on a sandbox pipeline: %v, want a one-line error naming MARKET_FEEDS", fs, err)
		}
	}
	if _, err := LoadConfig(env(map[string]string{"MARKET_SANDBOX_PIPELINE": "true", "MARKET_FEEDS": "synthetic"})); err != nil {
		t.Fatalf("synthetic: %v", err)
	}
	// The live role may run real feeds.
	if _, err := LoadConfig(env(map[string]string{"MARKET_FEEDS": "binance"})); err != nil {
		t.Fatalf("live binance: %v", err)
	}

	// Past Validate too: a Config built in code cannot give the sandbox a real feed.
	cfg := Config{SandboxPipeline: true, Feeds: []string{feeds.NameBinance, feeds.NameOanda}, OandaToken: "t", OandaAccountID: "a"}
	fc := cfg.feedsConfig(nil, nil)
	if len(fc.Names) != 1 || fc.Names[0] != feeds.NameSynthetic || fc.OandaToken != "" || fc.Budget != nil || fc.BaseURLs != nil {
		t.Fatalf("sandbox feeds config %+v, want the synthetic feed alone", fc)
	}
	reg, err := feeds.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.Providers(); len(ps) != 1 || ps[0].Name() != feeds.NameSynthetic {
		t.Fatalf("sandbox providers %v, want synthetic only", ps)
	}
	// And sandboxPipelineConfig (marketd all) is such a Config.
	s := sandboxPipelineConfig(Config{Feeds: []string{feeds.NameBinance}, SandboxDatabaseURL: "postgres://h/db?search_path=sandbox", SandboxRedisURL: "redis://h/1"})
	if err := s.Validate(); err != nil || !s.SandboxPipeline {
		t.Fatalf("marketd all's sandbox config: %v (pipeline %v)", err, s.SandboxPipeline)
	}
}
