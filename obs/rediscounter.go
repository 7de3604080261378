package obs

import "github.com/prometheus/client_golang/prometheus"

// Series of the Redis-backed counters' outage policy (rediskeys.Outage).
// The counter label is one of a fixed set: rate_window, host_budget,
// stream_slots.
var (
	redisCounterOutage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_redis_counter_outage", Help: "1 while a Redis-backed counter answers from this process's local fallback because Redis did not answer, else 0.",
	}, []string{"counter"})
	redisCounterOutages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_redis_counter_outages_total", Help: "Outages of a Redis-backed counter seen by this process (each one logged once when it starts and once when it ends).",
	}, []string{"counter"})
	redisCounterFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_redis_counter_fallback_total", Help: "Decisions a Redis-backed counter took from this process's local fallback during an outage.",
	}, []string{"counter"})
)

var redisCounterCollectors = []prometheus.Collector{redisCounterOutage, redisCounterOutages, redisCounterFallbacks}

// RedisCounterOutage records the start (true) or the end (false) of an
// outage of a Redis-backed counter.
func RedisCounterOutage(counter string, down bool) {
	if down {
		redisCounterOutage.WithLabelValues(counter).Set(1)
		redisCounterOutages.WithLabelValues(counter).Inc()
		return
	}
	redisCounterOutage.WithLabelValues(counter).Set(0)
}

// RedisCounterFallback counts a decision taken from the local fallback.
func RedisCounterFallback(counter string) { redisCounterFallbacks.WithLabelValues(counter).Inc() }

// ExportRedisCounters exports every counter's series from the start (at 0).
func ExportRedisCounters(counters ...string) {
	for _, c := range counters {
		redisCounterOutage.WithLabelValues(c)
		redisCounterOutages.WithLabelValues(c)
		redisCounterFallbacks.WithLabelValues(c)
	}
}
