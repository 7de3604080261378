package app_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/redistest"
)

// TestCatalogueSaysWhatIsServed: with binance alone, the catalogue marks
// binance's combinations served by binance and the others unserved.
func TestCatalogueSaysWhatIsServed(t *testing.T) {
	t.Parallel()
	out, errs, code := run(t, map[string]string{"MARKET_FEEDS": "binance"}, "catalogue", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []struct {
		Market, Exchange, Instrument, Feed string
		Served                             bool
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	served := 0
	for _, r := range rows {
		if r.Served != (r.Exchange == "binance") || (r.Served && r.Feed != "binance") || (!r.Served && r.Feed != "") {
			t.Errorf("row %+v: want served by binance exactly when on binance", r)
		}
		if r.Served {
			served++
		}
	}
	if served != 3 || len(rows) != len(domain.Catalogue("global")) {
		t.Errorf("%d rows, %d served; want the %d global combinations, binance's 3 served", len(rows), served, len(domain.Catalogue("global")))
	}
	text, _, _ := run(t, map[string]string{"MARKET_FEEDS": "binance"}, "catalogue")
	if !strings.Contains(text, "SERVED BY") || !strings.Contains(text, "no feed of MARKET_FEEDS") {
		t.Errorf("text catalogue does not say what is served:\n%s", text)
	}
}

// TestKeysAndClientsShowServedCombinations: keys issue and clients show
// name the combinations this deployment serves for the client's markets;
// the key alone stays on stdout. A sandbox key reads the synthetic feed.
func TestKeysAndClientsShowServedCombinations(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["MARKET_FEEDS"] = "binance,okx"
	mustRun(t, env, "migrate")
	id := mustRun(t, env, "clients", "create", "--org", "Desk", "--tier", "business", "--markets", "crypto,forex")

	key, errs, code := run(t, env, "keys", "issue", "--client", id)
	if code != 0 || !strings.HasPrefix(key, "msk_") || strings.Count(strings.TrimSpace(key), "\n") != 0 {
		t.Fatalf("keys issue: exit %d, stdout %q: want the key alone", code, key)
	}
	for _, want := range []string{"crypto/binance/spot", "crypto/okx/perpetual"} {
		if !strings.Contains(errs, want) {
			t.Errorf("keys issue does not name %s:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "forex/") || strings.Contains(errs, "stocks/") {
		t.Errorf("keys issue names unserved or foreign combinations:\n%s", errs)
	}

	type combination struct{ Market, Exchange, Instrument, Feed string }
	var issued struct {
		Key          string        `json:"key"`
		Combinations []combination `json:"combinations"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "keys", "issue", "--client", id, "--json")), &issued); err != nil {
		t.Fatal(err)
	}
	if len(issued.Combinations) != 5 || issued.Combinations[0] != (combination{"crypto", "binance", "spot", "binance"}) {
		t.Errorf("keys issue --json: %+v, want binance's 3 and okx's 2 crypto combinations", issued.Combinations)
	}
	var sandbox struct {
		Combinations []combination `json:"combinations"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "keys", "issue", "--client", id, "--sandbox", "--json")), &sandbox); err != nil {
		t.Fatal(err)
	}
	if len(sandbox.Combinations) != 7 || sandbox.Combinations[6].Feed != "synthetic" {
		t.Errorf("sandbox key: %+v, want crypto and forex of the catalogue from the synthetic feed", sandbox.Combinations)
	}

	show := mustRun(t, env, "clients", "show", id)
	if !strings.Contains(show, "crypto/okx/spot") || strings.Contains(show, "forex/oanda") {
		t.Errorf("clients show:\n%s\nwant the served crypto combinations and no forex (no feed serves it)", show)
	}
	var shown struct {
		Combinations []combination `json:"combinations"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "clients", "show", id, "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shown.Combinations, issued.Combinations) {
		t.Errorf("clients show --json: %+v, want %+v", shown.Combinations, issued.Combinations)
	}
}

// TestReadyzSaysWhatIsServed: /readyz maps each served combination to its
// feed and lists the unserved ones.
func TestReadyzSaysWhatIsServed(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["MARKET_FEEDS"] = "okx,synthetic"
	env["MARKET_REGION"] = "eu"
	mustRun(t, env, "migrate")
	srv := startServer(t, env, "api")
	_, body := readyzProbed(t, srv)
	if body.Served["crypto/okx/spot"] != "okx" || body.Served["crypto/binance/spot"] != "synthetic" || len(body.Unserved) != 0 {
		t.Errorf("readyz served %v, unserved %v: want okx/spot from okx, the rest from synthetic", body.Served, body.Unserved)
	}
	if got := slices.Sorted(maps.Keys(body.Served)); len(got) != len(domain.Catalogue("eu")) {
		t.Errorf("served %v, want the eu catalogue's %d combinations", got, len(domain.Catalogue("eu")))
	}

	env2 := testEnv(t)
	env2["MARKET_FEEDS"] = "okx"
	env2["MARKET_REGION"] = "eu"
	env2["MARKET_REDIS_URL"] = redistest.LeaseDB(t) // the scheduler's queues of its own
	mustRun(t, env2, "migrate")
	srv2 := startServer(t, env2, "scheduler")
	_, body2 := readyzProbed(t, srv2)
	if len(body2.Served) != 1 || !slices.Contains(body2.Unserved, "forex/oanda/major") || !slices.Contains(body2.Unserved, "crypto/binance/spot") {
		t.Errorf("scheduler readyz with okx alone: served %v, unserved %v", body2.Served, body2.Unserved)
	}
}
