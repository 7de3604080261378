package obs_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/obs"
)

func TestDeliveryOutcome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cat    string
		status int
		want   string
	}{
		{"", 200, "success"},
		{domain.ErrHTTPStatus, 404, "http_4xx"},
		{domain.ErrHTTPStatus, 503, "http_5xx"},
		{domain.ErrHTTPStatus, 302, "http_other"},
		{domain.ErrTimeout, 0, "timeout"},
		{domain.ErrDNS, 0, "dns"},
		{domain.ErrTLS, 0, "tls"},
		{domain.ErrConnect, 0, "refused"},
		{domain.ErrAddressRefused, 0, "address_not_allowed"},
		{domain.ErrBadResponse, 0, "invalid_response"},
		{domain.ErrInternal, 0, "internal"},
		{domain.ErrUnknown, 0, "unknown"},
	} {
		if got := obs.DeliveryOutcome(c.cat, c.status); got != c.want {
			t.Errorf("DeliveryOutcome(%q, %d) = %q, want %q", c.cat, c.status, got, c.want)
		}
	}
	// Every category maps to a listed outcome (so it is exported from the start).
	for _, cat := range domain.DeliveryErrorCategories {
		found := false
		for _, o := range obs.DeliveryOutcomes {
			found = found || o == obs.DeliveryOutcome(cat, 500)
		}
		if !found {
			t.Errorf("category %s maps to an unlisted outcome", cat)
		}
	}
}

// TestRegisterLints: the series follow Prometheus' naming conventions
// (promlint) and register in a fresh registry.
func TestRegisterLints(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs.Register(reg)
	obs.Admission(obs.ReasonOK)
	obs.IngestRun(obs.Feed{Market: "crypto", Exchange: "binance", Instrument: "spot", Kind: "tickers"}, 1, "")
	obs.Push{}.Connections("binance-spot", 1)
	obs.Push{}.Reconnect("binance-spot")
	obs.Push{}.GapRepair("binance-spot", nil)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
