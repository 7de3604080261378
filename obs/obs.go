// Package obs holds the service's Prometheus series in one place: the
// collectors of every role (ingest, scoring, statistics, webhooks,
// admission, dependencies) and the scrape-time collectors reading Postgres.
// Call sites stay one line (obs.IngestRun, obs.Delivery, ...).
//
// Event series (counters and histograms) are process-wide: one process is
// one Prometheus target, whatever roles it runs. Register adds them to a
// registry; a registry may hold them once. No label carries a symbol, a
// client, a key or a URL: every label value comes from a small fixed set
// (markets, catalogue combinations, styles, task kinds, categories).
package obs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketscreener/market/domain"
)

// Label values of outcomes.
const (
	OutcomeSuccess = "success"
	OutcomeError   = "error"
)

// Buckets of task durations: 10 ms to 10 min.
var taskBuckets = []float64{.01, .05, .25, 1, 5, 15, 60, 180, 600}

var (
	ingestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marketd_ingest_duration_seconds", Help: "Duration of ingest tasks by feed combination and kind (tickers, candles:<timeframe>, fundamentals), successful or not.",
		Buckets: taskBuckets,
	}, []string{"market", "exchange", "instrument", "kind"})
	ingestRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_ingest_runs_total", Help: "Ingest tasks run, by feed combination, kind and outcome (success, error).",
	}, []string{"market", "exchange", "instrument", "kind", "outcome"})
	ingestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_ingest_errors_total", Help: "Failed ingest tasks by feed combination, kind and category (timeout, network, upstream_status, rate_limited, invalid_data, no_data, store, other).",
	}, []string{"market", "exchange", "instrument", "kind", "category"})
	ingestRows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_ingest_rows_stored_total", Help: "Rows stored by ingest (screener rows, candles, fundamental rows) by feed combination and kind.",
	}, []string{"market", "exchange", "instrument", "kind"})
	ingestLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_ingest_last_success_timestamp_seconds", Help: "Unix time of this process's last successful ingest by feed combination and kind (see marketd_feed_last_success_timestamp_seconds for every process's).",
	}, []string{"market", "exchange", "instrument", "kind"})

	scoreDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marketd_scoring_duration_seconds", Help: "Duration of scoring runs by market and style.", Buckets: taskBuckets,
	}, []string{"market", "style"})
	scoreRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_scoring_runs_total", Help: "Scoring runs by market, style and outcome (success, error).",
	}, []string{"market", "style", "outcome"})
	scoreAssets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_scoring_assets_total", Help: "Assets considered by scoring runs by market, style and result (scored; skipped: nothing new since the last report, or too little history).",
	}, []string{"market", "style", "result"})
	verdictChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_scoring_verdict_changes_total", Help: "Verdict changes (verdict events written) by market and style.",
	}, []string{"market", "style"})
	alertsFired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_alerts_fired_total", Help: "Alerts fired (alert.triggered events committed, sandbox pushes excepted) by market.",
	}, []string{"market"})
	scoreLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_scoring_last_success_timestamp_seconds", Help: "Unix time of this process's last successful scoring run by market and style.",
	}, []string{"market", "style"})

	statsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marketd_statistics_duration_seconds", Help: "Duration of statistics runs by market.", Buckets: taskBuckets,
	}, []string{"market"})
	statsRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_statistics_runs_total", Help: "Statistics runs by market and outcome (success, error).",
	}, []string{"market", "outcome"})

	deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome (success, http_4xx, http_5xx, http_other, timeout, dns, tls, refused, address_not_allowed, invalid_response, internal, unknown).",
	}, []string{"outcome"})
	deliveryLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "marketd_webhook_delivery_latency_seconds", Help: "Time from a verdict event's commit to its successful delivery.",
		Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 14400},
	})

	admissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_admission_requests_total", Help: "Public requests decided by the gate, by decision (admitted, refused, error) and reason.",
	}, []string{"decision", "reason"})
	keyLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_admission_key_cache_lookups_total", Help: "API key lookups in the gate's key cache by result (hit, miss).",
	}, []string{"result"})
	authThrottled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketd_admission_auth_throttled_total", Help: "Requests refused (429) by the failed-authentication throttle.",
	})
	quotaProvisional = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketd_admission_quota_provisional_total", Help: "Metered requests admitted provisionally while the quota ledger (the Postgres primary) could not commit; each is counted in the ledger once it can.",
	})
	quotaLedgerAway = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "marketd_admission_quota_ledger_away", Help: "1 while this api process admits metered requests provisionally because the quota ledger cannot commit, else 0.",
	})
	streamQuery = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marketd_stream_query_duration_seconds", Help: "Queries of the event stream (GET /stream) by query: hub (the replica's read of the log), last (where the log ends), position (of a Last-Event-ID), replay (a page of a resume). Each has a 2 s budget.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5},
	}, []string{"query"})
	quotaSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "marketd_admission_quota_duration_seconds", Help: "Time a request waits for the monthly quota ledger (Postgres).",
		Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
)

// Register adds the process-wide series to reg.
func Register(reg prometheus.Registerer) {
	reg.MustRegister(ingestDuration, ingestRuns, ingestErrors, ingestRows, ingestLastSuccess,
		scoreDuration, scoreRuns, scoreAssets, verdictChanges, alertsFired, scoreLastSuccess,
		statsDuration, statsRuns, deliveries, deliveryLatency,
		admissions, keyLookups, authThrottled, quotaSeconds, quotaProvisional, quotaLedgerAway, streamQuery)
	reg.MustRegister(upstreamCollectors()...)
	reg.MustRegister(pushCollectors...)
	reg.MustRegister(redisCounterCollectors...)
	// Every market's count exported from the start (at 0), so a rate over
	// it exists before the first alert fires.
	for _, m := range domain.Markets {
		alertsFired.WithLabelValues(string(m))
	}
}

// Feed names the ingest series of one feed combination and kind.
type Feed struct {
	Market, Exchange, Instrument, Kind string
}

func (f Feed) labels() []string { return []string{f.Market, f.Exchange, f.Instrument, f.Kind} }

// IngestRun records one ingest task: its duration and outcome; errCategory
// is "" on success.
func IngestRun(f Feed, took time.Duration, errCategory string) {
	l := f.labels()
	ingestDuration.WithLabelValues(l...).Observe(took.Seconds())
	if errCategory == "" {
		ingestRuns.WithLabelValues(append(l, OutcomeSuccess)...).Inc()
		ingestLastSuccess.WithLabelValues(l...).SetToCurrentTime()
		return
	}
	ingestRuns.WithLabelValues(append(l, OutcomeError)...).Inc()
	ingestErrors.WithLabelValues(append(l, errCategory)...).Inc()
}

// IngestRows counts rows stored by one ingest task.
func IngestRows(f Feed, n int) {
	if n > 0 {
		ingestRows.WithLabelValues(f.labels()...).Add(float64(n))
	}
}

// ScoreRun records one scoring run of a market and style.
func ScoreRun(market, style string, took time.Duration, err error) {
	scoreDuration.WithLabelValues(market, style).Observe(took.Seconds())
	if err != nil {
		scoreRuns.WithLabelValues(market, style, OutcomeError).Inc()
		return
	}
	scoreRuns.WithLabelValues(market, style, OutcomeSuccess).Inc()
	scoreLastSuccess.WithLabelValues(market, style).SetToCurrentTime()
}

// Scored counts the assets a scoring run scored and skipped and the
// verdict changes it wrote.
func Scored(market, style string, scored, skipped, changes int) {
	scoreAssets.WithLabelValues(market, style, "scored").Add(float64(scored))
	scoreAssets.WithLabelValues(market, style, "skipped").Add(float64(max(skipped, 0)))
	verdictChanges.WithLabelValues(market, style).Add(float64(changes))
}

// AlertsFired counts n alerts fired on market (committed in the outbox).
func AlertsFired(market string, n int) { alertsFired.WithLabelValues(market).Add(float64(n)) }

// StatsRun records one statistics run of a market.
func StatsRun(market string, took time.Duration, err error) {
	statsDuration.WithLabelValues(market).Observe(took.Seconds())
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeError
	}
	statsRuns.WithLabelValues(market, outcome).Inc()
}

// DeliveryOutcome is the outcome label of a delivery attempt with error
// category cat (domain.Err*; "" for success) and HTTP status.
func DeliveryOutcome(cat string, status int) string {
	switch cat {
	case "":
		return OutcomeSuccess
	case "http_status":
		switch status / 100 {
		case 4:
			return "http_4xx"
		case 5:
			return "http_5xx"
		}
		return "http_other"
	case "dns_failure":
		return "dns"
	case "tls_error":
		return "tls"
	case "connect_failed":
		return "refused"
	case "timeout", "address_not_allowed", "invalid_response":
		return cat
	case "internal_error":
		return "internal"
	}
	return "unknown"
}

// DeliveryOutcomes lists every outcome label of marketd_webhook_deliveries_total.
var DeliveryOutcomes = []string{OutcomeSuccess, "http_4xx", "http_5xx", "http_other", "timeout", "dns", "tls",
	"refused", "address_not_allowed", "invalid_response", "internal", "unknown"}

func init() {
	// Every outcome is exported from the start (at 0), so a failure ratio
	// is defined before the first failure.
	for _, o := range DeliveryOutcomes {
		deliveries.WithLabelValues(o)
	}
}

// Delivery records one webhook delivery attempt; sinceCommit is the time
// since its event was committed (observed on success only).
func Delivery(cat string, status int, sinceCommit time.Duration) {
	o := DeliveryOutcome(cat, status)
	deliveries.WithLabelValues(o).Inc()
	if o == OutcomeSuccess {
		deliveryLatency.Observe(sinceCommit.Seconds())
	}
}

// Admission reasons.
const (
	ReasonOK            = "ok"
	ReasonMissingKey    = "missing_key"
	ReasonInvalidKey    = "invalid_key"
	ReasonThrottled     = "auth_throttled"
	ReasonSuspended     = "client_suspended"
	ReasonExpired       = "contract_expired"
	ReasonRateLimited   = "rate_limited"
	ReasonQuotaExceeded = "quota_exceeded"
	ReasonUnavailable   = "unavailable"
)

// Reasons lists every admission reason.
var Reasons = []string{ReasonOK, ReasonMissingKey, ReasonInvalidKey, ReasonThrottled, ReasonSuspended,
	ReasonExpired, ReasonRateLimited, ReasonQuotaExceeded, ReasonUnavailable}

// admissionSeries are resolved once: Admission runs on every request.
var admissionSeries = func() map[string]prometheus.Counter {
	m := make(map[string]prometheus.Counter, len(Reasons))
	for _, r := range Reasons {
		decision := "refused"
		switch r {
		case ReasonOK:
			decision = "admitted"
		case ReasonUnavailable:
			decision = "error"
		}
		m[r] = admissions.WithLabelValues(decision, r)
	}
	return m
}()

// Admission counts one gate decision: reason is one of Reasons (ReasonOK
// for an admitted request, ReasonUnavailable when the gate could not
// decide).
func Admission(reason string) {
	if c, ok := admissionSeries[reason]; ok {
		c.Inc()
	}
}

// Pre-resolved series of the request path (no label hashing per request).
var (
	keyHit  = keyLookups.WithLabelValues("hit")
	keyMiss = keyLookups.WithLabelValues("miss")
)

// KeyLookup counts a key-cache lookup.
func KeyLookup(hit bool) {
	if hit {
		keyHit.Inc()
	} else {
		keyMiss.Inc()
	}
}

// AuthThrottled counts a refusal by the failed-authentication throttle.
func AuthThrottled() { authThrottled.Inc() }

// QuotaWait observes the time a request spent in the quota ledger.
func QuotaWait(d time.Duration) { quotaSeconds.Observe(d.Seconds()) }

// QuotaProvisional counts a request admitted while the quota ledger is away.
func QuotaProvisional() { quotaProvisional.Inc() }

// QuotaLedgerAway sets whether this process admits provisionally.
func QuotaLedgerAway(away bool) {
	if away {
		quotaLedgerAway.Set(1)
	} else {
		quotaLedgerAway.Set(0)
	}
}

// Up is marketd_dependency_up of one running role (its own readiness
// probes set it).
type Up struct{ g *prometheus.GaugeVec }

// NewUp returns the gauge; register Collector in the role's registry.
func NewUp() *Up {
	return &Up{g: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_dependency_up", Help: "1 when the dependency (postgres, redis) answered this process's last readiness probe, else 0.",
	}, []string{"dependency"})}
}

// Set records whether a dependency answered.
func (u *Up) Set(dependency string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	u.g.WithLabelValues(dependency).Set(v)
}

// Collector is the gauge, for registration.
func (u *Up) Collector() prometheus.Collector { return u.g }

// StreamQuery records the duration of one query of the event stream.
func StreamQuery(query string, took time.Duration) {
	streamQuery.WithLabelValues(query).Observe(took.Seconds())
}
