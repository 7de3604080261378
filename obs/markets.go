package obs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketscreener/market/domain"
)

var (
	marketOpenDesc = prometheus.NewDesc("marketd_market_open",
		"1 while the market trades by its calendar (crypto always; also when the calendar does not know the instant), 0 while it is closed: a closed market's feeds are not stale.",
		[]string{"market"}, nil)
	calendarKnownDesc = prometheus.NewDesc("marketd_market_calendar_known",
		"1 when the market's calendar covers the instant (its stored sessions, or its rule), 0 when it does not and the market counts as open.",
		[]string{"market"}, nil)
)

// MarketCollector exports each market's state by its calendar at scrape
// time (calendar.Book: the same in every role): the stale-feed alert
// leaves a closed market's feeds alone.
type MarketCollector struct {
	hours domain.MarketHours
	now   func() time.Time
}

// NewMarketCollector returns the collector of hours; now nil means time.Now.
func NewMarketCollector(hours domain.MarketHours, now func() time.Time) *MarketCollector {
	if now == nil {
		now = time.Now
	}
	return &MarketCollector{hours: hours, now: now}
}

// Describe implements prometheus.Collector.
func (c *MarketCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- marketOpenDesc
	ch <- calendarKnownDesc
}

// Collect implements prometheus.Collector.
func (c *MarketCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, m := range domain.Markets {
		st := domain.StateAt(c.hours, m, now)
		ch <- prometheus.MustNewConstMetric(marketOpenDesc, prometheus.GaugeValue, boolValue(st.Open), string(m))
		ch <- prometheus.MustNewConstMetric(calendarKnownDesc, prometheus.GaugeValue, boolValue(st.Known), string(m))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
