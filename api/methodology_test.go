package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain/analytics"
)

func TestMethodologyListsTheVersionsTheEngineRuns(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	status, body := f.get(t, "/analytics/methodology")
	var got api.Methodology
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil {
		t.Fatalf("methodology: %d %s", status, body)
	}
	cur := analytics.CurrentMethod()
	if got.CurrentVersion != cur.Name || len(got.Versions) != len(analytics.Versions) {
		t.Fatalf("current %q with %d versions, want %q with %d", got.CurrentVersion, len(got.Versions), cur.Name, len(analytics.Versions))
	}
	last := got.Versions[len(got.Versions)-1]
	if diff := cmp.Diff(cur, last); diff != "" {
		t.Errorf("the current version as served differs from the engine's (-engine +served):\n%s", diff)
	}
	if last.Rules.Fingerprint() != last.Fingerprint {
		t.Errorf("the served rules hash to %s, the version says %s", last.Rules.Fingerprint(), last.Fingerprint)
	}
	// What the statistics include: the whole history, delisted assets.
	st := got.Statistics
	if !strings.Contains(st.History, "Every stored daily candle") || !strings.Contains(st.Delisted, "up to its last day") ||
		!strings.Contains(st.Window, "window_start") || !strings.Contains(st.Window, "delisted ones included") || st.Updates == "" || st.Neutral == "" {
		t.Errorf("statistics scope served incomplete: %+v", st)
	}
	for _, v := range got.Versions {
		if len(v.Rules.Votes) == 0 || len(v.Rules.Fundamentals) == 0 || v.Changelog == "" || v.Rules.Verdict.GrowthEnter == 0 {
			t.Errorf("version %s is served incomplete: %+v", v.Name, v)
		}
	}
}

// The path is an operation of its own, never a market of /analytics/{market}/…
// nor read without a key.
func TestMethodologyIsAnAuthenticatedReadOfItsOwn(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	resp, err := http.Get(f.srv.URL + "/api/v1/public/analytics/methodology")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/v1/public/analytics/methodology", nil)
	req.Header.Set("X-API-Key", f.key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || etag == "" || resp.Header.Get("Last-Modified") == "" {
		t.Fatalf("with a key: %d, ETag %q", resp.StatusCode, etag)
	}
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", resp.StatusCode)
	}
	op := f.apiS.OpenAPI().Paths["/analytics/methodology"]
	if op == nil || op.Get == nil || op.Get.OperationID != "get-analytics-methodology" {
		t.Fatalf("OpenAPI has no GET /analytics/methodology: %+v", op)
	}
	// Under a market, "methodology" stays a symbol (here not a valid pair).
	if status, body := f.get(t, "/analytics/crypto/methodology"); status != http.StatusBadRequest || !strings.Contains(string(body), "path.symbol") {
		t.Errorf("/analytics/crypto/methodology: %d %s, want the report's 400 on its symbol", status, body)
	}
}
