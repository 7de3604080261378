package app

import (
	"context"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// opsMetrics fills the registry of a role's /metrics: the process-wide
// series of package obs (every role's), the database-backed ones (feed
// freshness, webhook backlog), asynq's queue collector, the markets'
// states by their calendars (hours) and, with a gate, the gate's counters. reg is nil for a role without the api: it gets a
// registry of its own with the Go and process collectors. It returns the
// handler and a function releasing the queue collector's connections.
func opsMetrics(reg *prometheus.Registry, redisURL string, db *store.DB, gate *admission.Gate, up *obs.Up, hours domain.MarketHours) (http.Handler, func(), error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	queues, closeQueues, err := worker.QueueCollector(redisURL)
	if err != nil {
		return nil, nil, err
	}
	obs.Register(reg)
	obs.ExportUpstreamHosts(feeds.BudgetHosts())
	reg.MustRegister(queues, obs.NewDBCollector(db.OpsSnapshot), up.Collector(), obs.NewMarketCollector(hours, nil))
	if gate != nil {
		reg.MustRegister(obs.NewGateCollector(gate.Stats))
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), closeQueues, nil
}

// upProbe wraps a readiness probe so that its outcome also sets
// marketd_dependency_up{dependency}; down tells which errors mean the
// dependency itself did not answer (nil: any error).
func upProbe(up *obs.Up, dependency string, probe func(context.Context) error, down func(error) bool) func(context.Context) error {
	return func(ctx context.Context) error {
		err := probe(ctx)
		up.Set(dependency, err == nil || down != nil && !down(err))
		return err
	}
}

// errPostgresUnreachable is the postgres check's answer when Postgres does
// not answer (a schema behind the binary is another failure).
var errPostgresUnreachable = errors.New("postgres unreachable")

func postgresDown(err error) bool { return errors.Is(err, errPostgresUnreachable) }

func redisDown(err error) bool { return errors.Is(err, admission.ErrRedisUnreachable) }

// registerReadRouter exports the read replica's lag and where the api's
// reads went.
func registerReadRouter(reg *prometheus.Registry, r *store.ReadRouter) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marketd_db_replica_lag_seconds",
			Help: "The read replica's last measured lag behind the primary (WAL positions); -1 while unknown or unreachable."},
			func() float64 {
				if lag, ok := r.Lag(); ok {
					return lag.Seconds()
				}
				return -1
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "marketd_db_reads_total",
			Help: "The api's market-data and analytics reads, by the database that answered.", ConstLabels: prometheus.Labels{"database": "primary"}},
			func() float64 { p, _ := r.Routed(); return float64(p) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "marketd_db_reads_total",
			Help: "The api's market-data and analytics reads, by the database that answered.", ConstLabels: prometheus.Labels{"database": "replica"}},
			func() float64 { _, rep := r.Routed(); return float64(rep) }),
	)
}
