package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the api's Prometheus series, on a registry of its own so
// several servers can live in one test process.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marketd_http_requests_total", Help: "Public API requests by operation and status.",
		}, []string{"operation", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "marketd_http_request_duration_seconds", Help: "Public API latency by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"operation"}),
	}
	m.registry.MustRegister(m.requests, m.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Registry exposes the registry so other components of the process can add series.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

func (s *Server) metricsMiddleware(ctx huma.Context, next func(huma.Context)) {
	start := time.Now()
	next(ctx)
	op := ctx.Operation().OperationID
	s.metrics.requests.WithLabelValues(op, strconv.Itoa(ctx.Status())).Inc()
	s.metrics.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
