package obs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FeedState is the stored health of one feed combination and kind.
type FeedState struct {
	Market, Exchange, Instrument, Kind string
	LastSuccess                        time.Time // zero: never
	Failing                            bool      // the last attempt failed
}

// Snapshot is what the scrape-time database collector reads: state every
// process shares, so every role's /metrics shows the same values.
type Snapshot struct {
	Feeds []FeedState
	// Webhooks: deliveries waiting (pending), the age of the oldest, the
	// verdict events not yet fanned out to subscriptions, and the
	// subscriptions disabled after consecutive failures.
	PendingDeliveries     int64
	OldestPendingAge      time.Duration
	UnfannedEvents        int64
	DisabledSubscriptions int64
}

var (
	feedLastSuccessDesc = prometheus.NewDesc("marketd_feed_last_success_timestamp_seconds",
		"Unix time of the last successful ingest of a feed combination and kind, by any worker (feed_health).",
		[]string{"market", "exchange", "instrument", "kind"}, nil)
	feedAgeDesc = prometheus.NewDesc("marketd_feed_last_success_age_seconds",
		"Seconds since the last successful ingest of a feed combination and kind, by any worker (feed_health).",
		[]string{"market", "exchange", "instrument", "kind"}, nil)
	feedFailingDesc = prometheus.NewDesc("marketd_feed_failing",
		"1 when the last ingest attempt of a feed combination and kind failed (feed_health), else 0.",
		[]string{"market", "exchange", "instrument", "kind"}, nil)
	pendingDesc = prometheus.NewDesc("marketd_webhook_pending_deliveries",
		"Webhook deliveries waiting to be sent (first attempt or retry).", nil, nil)
	oldestPendingDesc = prometheus.NewDesc("marketd_webhook_oldest_pending_delivery_age_seconds",
		"Age of the oldest pending webhook delivery (0 when none).", nil, nil)
	unfannedDesc = prometheus.NewDesc("marketd_webhook_unfanned_events",
		"Verdict events not yet turned into deliveries.", nil, nil)
	disabledDesc = prometheus.NewDesc("marketd_webhook_disabled_subscriptions",
		"Webhook subscriptions disabled after consecutive failures (or an unreadable secret).", nil, nil)
	scrapeErrorDesc = prometheus.NewDesc("marketd_database_scrape_error",
		"1 when the last scrape could not read the database-backed series (they are then missing), else 0.", nil, nil)
)

// DBCollector reads a Snapshot at every scrape (bounded by a 2 s time-out,
// so a frozen database never hangs a scrape).
type DBCollector struct {
	read func(ctx context.Context) (Snapshot, error)
	now  func() time.Time
}

// NewDBCollector returns the collector of read.
func NewDBCollector(read func(ctx context.Context) (Snapshot, error)) *DBCollector {
	return &DBCollector{read: read, now: time.Now}
}

// Describe implements prometheus.Collector.
func (c *DBCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{feedLastSuccessDesc, feedAgeDesc, feedFailingDesc, pendingDesc,
		oldestPendingDesc, unfannedDesc, disabledDesc, scrapeErrorDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *DBCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	now := c.now()
	for _, f := range s.Feeds {
		l := []string{f.Market, f.Exchange, f.Instrument, f.Kind}
		failing := 0.0
		if f.Failing {
			failing = 1
		}
		ch <- prometheus.MustNewConstMetric(feedFailingDesc, prometheus.GaugeValue, failing, l...)
		if f.LastSuccess.IsZero() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(feedLastSuccessDesc, prometheus.GaugeValue, float64(f.LastSuccess.UnixNano())/1e9, l...)
		ch <- prometheus.MustNewConstMetric(feedAgeDesc, prometheus.GaugeValue, now.Sub(f.LastSuccess).Seconds(), l...)
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.PendingDeliveries))
	ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, s.OldestPendingAge.Seconds())
	ch <- prometheus.MustNewConstMetric(unfannedDesc, prometheus.GaugeValue, float64(s.UnfannedEvents))
	ch <- prometheus.MustNewConstMetric(disabledDesc, prometheus.GaugeValue, float64(s.DisabledSubscriptions))
}

// GateStats are the admission gate's counters since it started.
type GateStats struct {
	// Lease slots taken ahead and given back, of the rolling window
	// (Redis) and of the monthly quota ledger (Postgres).
	WindowLeased, WindowReturned int64
	QuotaLeased, QuotaReturned   int64
	// QuotaReturnsPending are unused quota slots whose give-back to
	// Postgres has not succeeded yet (they count against clients until it
	// does): the ledger lagging behind.
	QuotaReturnsPending int64
	// RateLimiterDegraded: limits are per replica (Redis unreachable).
	RateLimiterDegraded bool
	// KeysCached is how many keys the cache holds.
	KeysCached int
}

var (
	leasedDesc = prometheus.NewDesc("marketd_admission_lease_slots_granted_total",
		"Request slots taken ahead by leases, by limiter (window: the per-minute rate limit in Redis; quota: the monthly ledger in Postgres).",
		[]string{"limiter"}, nil)
	returnedDesc = prometheus.NewDesc("marketd_admission_lease_slots_returned_total",
		"Unused lease slots given back, by limiter.", []string{"limiter"}, nil)
	returnsPendingDesc = prometheus.NewDesc("marketd_admission_quota_returns_pending",
		"Unused quota lease slots whose give-back to Postgres has not succeeded yet.", nil, nil)
	degradedDesc = prometheus.NewDesc("marketd_admission_rate_limiter_degraded",
		"1 while rate limits are per replica because Redis is unreachable, else 0.", nil, nil)
	keysCachedDesc = prometheus.NewDesc("marketd_admission_keys_cached",
		"API keys held in the gate's key cache.", nil, nil)
)

// GateCollector reads the gate's counters at every scrape.
type GateCollector struct{ stats func() GateStats }

// NewGateCollector returns the collector of stats.
func NewGateCollector(stats func() GateStats) *GateCollector { return &GateCollector{stats: stats} }

// Describe implements prometheus.Collector.
func (c *GateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leasedDesc, returnedDesc, returnsPendingDesc, degradedDesc, keysCachedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *GateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(leasedDesc, prometheus.CounterValue, float64(s.WindowLeased), "window")
	ch <- prometheus.MustNewConstMetric(leasedDesc, prometheus.CounterValue, float64(s.QuotaLeased), "quota")
	ch <- prometheus.MustNewConstMetric(returnedDesc, prometheus.CounterValue, float64(s.WindowReturned), "window")
	ch <- prometheus.MustNewConstMetric(returnedDesc, prometheus.CounterValue, float64(s.QuotaReturned), "quota")
	ch <- prometheus.MustNewConstMetric(returnsPendingDesc, prometheus.GaugeValue, float64(s.QuotaReturnsPending))
	degraded := 0.0
	if s.RateLimiterDegraded {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(degradedDesc, prometheus.GaugeValue, degraded)
	ch <- prometheus.MustNewConstMetric(keysCachedDesc, prometheus.GaugeValue, float64(s.KeysCached))
}
