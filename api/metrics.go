package api

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
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
	// The series of each operation (and status), resolved once: looking a
	// series up by its label values hashes them on every request.
	counters  sync.Map // opStatus → prometheus.Counter
	observers sync.Map // operation id → prometheus.Observer
	fast      [len(fastOpIDs)]fastSeries
}

type opStatus struct {
	op     string
	status int
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
	start := infoFrom(ctx.Context()).Start
	if start.IsZero() {
		start = time.Now()
	}
	next(ctx)
	s.metrics.observe(ctx.Operation().OperationID, ctx.Status(), time.Since(start))
}

// fastSeries are the series of one fast-path operation, each resolved on
// its first use (as observe's), then read without a map lookup.
type fastSeries struct {
	ok, notModified atomic.Pointer[counterRef]
	duration        atomic.Pointer[observerRef]
}

type (
	counterRef  struct{ prometheus.Counter }
	observerRef struct{ prometheus.Observer }
)

// observeFast is observe for the fast path's operation op (a 200 or a 304).
func (m *metrics) observeFast(op fastOp, status int, d time.Duration) {
	fs := &m.fast[op]
	var p *atomic.Pointer[counterRef]
	switch status {
	case http.StatusOK:
		p = &fs.ok
	case http.StatusNotModified:
		p = &fs.notModified
	default:
		m.observe(fastOpIDs[op], status, d)
		return
	}
	c := p.Load()
	if c == nil {
		c = &counterRef{m.counter(fastOpIDs[op], status)}
		p.Store(c)
	}
	c.Inc()
	o := fs.duration.Load()
	if o == nil {
		o = &observerRef{m.observer(fastOpIDs[op])}
		fs.duration.Store(o)
	}
	o.Observe(d.Seconds())
}

func (m *metrics) counter(op string, status int) prometheus.Counter {
	k := opStatus{op, status}
	c, ok := m.counters.Load(k)
	if !ok {
		c, _ = m.counters.LoadOrStore(k, m.requests.WithLabelValues(op, strconv.Itoa(status)))
	}
	return c.(prometheus.Counter)
}

func (m *metrics) observer(op string) prometheus.Observer {
	o, ok := m.observers.Load(op)
	if !ok {
		o, _ = m.observers.LoadOrStore(op, m.duration.WithLabelValues(op))
	}
	return o.(prometheus.Observer)
}

func (m *metrics) observe(op string, status int, d time.Duration) {
	m.counter(op, status).Inc()
	m.observer(op).Observe(d.Seconds())
}
