package obs

import "github.com/prometheus/client_golang/prometheus"

// Series of the request budgets of market-data provider hosts (package
// hostbudget). The host label is a budget's logical name ("binance",
// "binance-futures", "okx", ...): a small fixed set, never a URL.
var (
	upstreamWeight = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_upstream_weight_total", Help: "Request weight this process spent on each provider host (the host's documented weight of every request sent).",
	}, []string{"host"})
	upstreamUsedWeight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_upstream_used_weight", Help: "The provider's own count of the deployment's weight in its current window, from its last response (Binance: X-MBX-USED-WEIGHT-1M).",
	}, []string{"host"})
	upstreamRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_upstream_refusals_total", Help: "Responses refusing a request for its rate, by provider host and status (429: over the limit; 418: the IP is banned).",
	}, []string{"host", "status"})
	upstreamBudgetLocal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_upstream_budget_local_total", Help: "Requests paced by this process's own conservative share of a host's budget because the shared budget (Redis) did not answer.",
	}, []string{"host"})
)

func upstreamCollectors() []prometheus.Collector {
	return []prometheus.Collector{upstreamWeight, upstreamUsedWeight, upstreamRefusals, upstreamBudgetLocal}
}

// UpstreamWeight counts weight spent on a provider host.
func UpstreamWeight(host string, weight int) {
	if weight > 0 {
		upstreamWeight.WithLabelValues(host).Add(float64(weight))
	}
}

// UpstreamUsedWeight records the provider's own count of the used weight.
func UpstreamUsedWeight(host string, used int) {
	upstreamUsedWeight.WithLabelValues(host).Set(float64(used))
}

// UpstreamRefused counts a 429 or 418 from a provider host.
func UpstreamRefused(host string, status int) {
	upstreamRefusals.WithLabelValues(host, statusLabel(status)).Inc()
}

// UpstreamBudgetLocal counts a request paced by the in-process fallback.
func UpstreamBudgetLocal(host string) { upstreamBudgetLocal.WithLabelValues(host).Inc() }

func statusLabel(status int) string {
	switch status {
	case 418:
		return "418"
	case 429:
		return "429"
	}
	return "other"
}

// ExportUpstreamHosts exports every series of the named hosts from the
// start (at 0), so a rate of refusals is defined before the first one.
func ExportUpstreamHosts(hosts []string) {
	for _, h := range hosts {
		upstreamWeight.WithLabelValues(h)
		upstreamUsedWeight.WithLabelValues(h)
		upstreamBudgetLocal.WithLabelValues(h)
		for _, status := range []int{429, 418} {
			upstreamRefusals.WithLabelValues(h, statusLabel(status))
		}
	}
}
