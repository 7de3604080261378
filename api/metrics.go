package api

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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

// routeSeries are a route's most frequent series (its 200s and 304s and
// its duration), each resolved on its first use, then read without a map
// lookup.
type routeSeries struct {
	ok, notModified atomic.Pointer[counterRef]
	duration        atomic.Pointer[observerRef]
}

type (
	counterRef  struct{ prometheus.Counter }
	observerRef struct{ prometheus.Observer }
)

// observeRoute counts a request of operation op and its duration.
func (m *metrics) observeRoute(rs *routeSeries, op string, status int, d time.Duration) {
	var p *atomic.Pointer[counterRef]
	switch status {
	case http.StatusOK:
		p = &rs.ok
	case http.StatusNotModified:
		p = &rs.notModified
	}
	if p == nil {
		m.counter(op, status).Inc()
	} else {
		c := p.Load()
		if c == nil {
			c = &counterRef{m.counter(op, status)}
			p.Store(c)
		}
		c.Inc()
	}
	o := rs.duration.Load()
	if o == nil {
		o = &observerRef{m.observer(op)}
		rs.duration.Store(o)
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
