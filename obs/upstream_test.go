package obs_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/marketscreener/market/obs"
)

// TestUpstreamSeries: the provider budget series are exported per host
// from the start (a 418 rate is defined before the first 418), pass
// promlint, and count what they are told.
func TestUpstreamSeries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs.Register(reg)
	obs.ExportUpstreamHosts([]string{"test-upstream-a", "test-upstream-b"})
	obs.UpstreamWeight("test-upstream-a", 20)
	obs.UpstreamRefused("test-upstream-a", 418)
	obs.UpstreamUsedWeight("test-upstream-a", 4200)
	problems, err := testutil.GatherAndLint(reg, "marketd_upstream_weight_total", "marketd_upstream_refusals_total",
		"marketd_upstream_used_weight", "marketd_upstream_budget_local_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(reg, "marketd_upstream_refusals_total")
	if err != nil || n < 4 {
		t.Errorf("%d refusal series (%v), want 429 and 418 for each host", n, err)
	}
}
