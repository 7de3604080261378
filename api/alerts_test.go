package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
)

func alertServer(t *testing.T) (newClient func(tier domain.Tier, markets ...domain.Market) hookClient) {
	t.Helper()
	db := storetest.New(t)
	srv := httptest.NewServer(api.New(api.Config{Region: "global"}, db, storeGate{db}).Handler())
	t.Cleanup(srv.Close)
	return func(tier domain.Tier, markets ...domain.Market) hookClient {
		c := &domain.Client{OrgName: "Alerts", Tier: tier, Markets: markets}
		if err := db.CreateClient(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		key, _, err := db.IssueKey(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return hookClient{srv: srv, key: key}
	}
}

// Create, list, read and delete alerts; one client never sees another's.
func TestAlertEndpoints(t *testing.T) {
	t.Parallel()
	newClient := alertServer(t)
	a := newClient(domain.Business, domain.Markets...)
	b := newClient(domain.Starter, domain.Crypto)

	status, body := a.do(t, http.MethodPost, "/alerts",
		`{"name":"oversold growth","market":"crypto","where":"swing.verdict == \"growth\" && factors.rsi_14.value < 30","symbols":["btc/usdt","BTC_USDT","ETH_USDT"],"cooldown_seconds":3600}`)
	var created api.AlertDefinition
	if status != http.StatusCreated || json.Unmarshal(body, &created) != nil || created.ID == "" || created.CooldownSeconds != 3600 ||
		strings.Join(created.Symbols, ",") != "BTC_USDT,ETH_USDT" || len(created.Variables) != 2 {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body = a.do(t, http.MethodPost, "/alerts", `{"name":"any","market":"stocks","where":"overall_score > 50"}`)
	var all api.AlertDefinition
	if status != http.StatusCreated || json.Unmarshal(body, &all) != nil || all.Symbols != nil || all.CooldownSeconds != 0 {
		t.Fatalf("create without symbols: %d %s", status, body)
	}
	status, body = a.do(t, http.MethodGet, "/alerts", "")
	var list []api.AlertDefinition
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 2 || list[0].ID != created.ID {
		t.Fatalf("list: %d %s", status, body)
	}
	if status, body := b.do(t, http.MethodGet, "/alerts", ""); status != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("b's list: %d %s; want []", status, body)
	}
	if status, _ := b.do(t, http.MethodGet, "/alerts/"+created.ID, ""); status != http.StatusNotFound {
		t.Fatalf("b reads a's alert: %d, want 404", status)
	}
	if status, _ := b.do(t, http.MethodDelete, "/alerts/"+created.ID, ""); status != http.StatusNotFound {
		t.Fatalf("b deletes a's alert: %d, want 404", status)
	}
	if status, body := a.do(t, http.MethodGet, "/alerts/"+created.ID, ""); status != http.StatusOK || !strings.Contains(string(body), created.ID) {
		t.Fatalf("get: %d %s", status, body)
	}
	if status, _ := a.do(t, http.MethodDelete, "/alerts/"+created.ID, ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if status, _ := a.do(t, http.MethodGet, "/alerts/"+created.ID, ""); status != http.StatusNotFound {
		t.Fatalf("get after delete: %d", status)
	}
	// A market outside the tier is 403.
	if status, body := b.do(t, http.MethodPost, "/alerts", `{"name":"x","market":"stocks","where":"true"}`); status != http.StatusForbidden {
		t.Fatalf("market outside the tier: %d %s", status, body)
	}
}

// Bad input is a 400 naming the parameter: a condition that does not
// compile names body.where with its position and the library's message.
func TestAlertBadInput(t *testing.T) {
	t.Parallel()
	a := alertServer(t)(domain.Business, domain.Markets...)
	for _, tc := range []struct{ body, location, contains string }{
		{`{"name":"x","market":"crypto","where":"verdict == "}`, "body.where", "line 1, column"},
		{`{"name":"x","market":"crypto","where":"overall_score + 1"}`, "body.where", "type"},
		{`{"name":"x","market":"crypto","where":"no_such_field > 1"}`, "body.where", "no_such_field"},
		{`{"name":"x","market":"crypto","where":"` + strings.Repeat("(", 40) + "true" + strings.Repeat(")", 40) + `"}`, "body.where", ""},
		{`{"name":"x","market":"crypto","where":"` + strings.Repeat("overall_score > 1 && ", 120) + `true"}`, "body.where", ""},
		{`{"name":"x","market":"crypto","where":"` + strings.Repeat("a", 3000) + `"}`, "body.where", ""},
		{`{"name":"","market":"crypto","where":"true"}`, "body.name", ""},
		{`{"name":"x","market":"bonds","where":"true"}`, "body.market", ""},
		{`{"name":"x","market":"crypto","where":"true","cooldown_seconds":-1}`, "body.cooldown_seconds", ""},
		{`{"name":"x","market":"crypto","where":"true","symbols":["not a symbol"]}`, "body.symbols", ""},
		{`{"name":"x","market":"crypto","where":"true","symbols":[]}`, "body.symbols", ""},
	} {
		status, body := a.do(t, http.MethodPost, "/alerts", tc.body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), tc.location) || !strings.Contains(string(body), tc.contains) {
			t.Errorf("%.80s: %d %s; want 400 naming %s", tc.body, status, body, tc.location)
		}
	}
}

// The tier caps the number of alerts: one more is 409.
func TestAlertTierCap(t *testing.T) {
	t.Parallel()
	a := alertServer(t)(domain.Starter, domain.Crypto)
	for i := range domain.Starter.MaxAlerts() + 1 {
		status, body := a.do(t, http.MethodPost, "/alerts", `{"name":"n","market":"crypto","where":"overall_score > 50"}`)
		want := http.StatusCreated
		if i == domain.Starter.MaxAlerts() {
			want = http.StatusConflict
		}
		if status != want {
			t.Fatalf("alert %d: %d %s; want %d", i+1, status, body, want)
		}
	}
}

// FuzzCreateAlertBody: no request body makes a 500 or hangs.
func FuzzCreateAlertBody(f *testing.F) {
	for _, s := range []string{`verdict == "growth"`, `factors.rsi_14.value < 30`, `(((`, `"a" * 3`, `size("x") > 1`,
		`[1,2,3].all(x, x > 0)`, `swing.overall_score / 0 > 1`, "\x00", `matches(verdict, "(a+)+$")`} {
		f.Add(s)
	}
	db := storetest.New(f)
	srv := httptest.NewServer(api.New(api.Config{Region: "global"}, db, storeGate{db}).Handler())
	f.Cleanup(srv.Close)
	c := &domain.Client{OrgName: "Fuzz", Tier: domain.Enterprise, Markets: domain.Markets, QuotaUnlimited: true}
	if err := db.CreateClient(context.Background(), c); err != nil {
		f.Fatal(err)
	}
	key, _, err := db.IssueKey(context.Background(), c.ID)
	if err != nil {
		f.Fatal(err)
	}
	cl := hookClient{srv: srv, key: key}
	f.Fuzz(func(t *testing.T, where string) {
		b, _ := json.Marshal(map[string]any{"name": "f", "market": "crypto", "where": where})
		status, body := cl.do(t, http.MethodPost, "/alerts", string(b))
		if status >= 500 {
			t.Fatalf("where %q: %d %s", where, status, body)
		}
		if status == http.StatusCreated {
			var a api.AlertDefinition
			if json.Unmarshal(body, &a) == nil {
				cl.do(t, http.MethodDelete, "/alerts/"+a.ID, "")
			}
		}
	})
}
