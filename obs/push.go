package obs

import "github.com/prometheus/client_golang/prometheus"

var (
	pushConnections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_push_connections", Help: "Open exchange push connections by endpoint (websockets binance-spot, binance-futures, okx-public, okx-business, alpaca; OANDA's streaming HTTP oanda-pricing); two per shard while one replaces the other.",
	}, []string{"endpoint"})
	pushReconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_push_reconnects_total", Help: "Exchange websocket connections re-established after a drop (planned replacements before the 24 h cut are not counted), by endpoint.",
	}, []string{"endpoint"})
	pushGapRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_push_gap_repairs_total", Help: "Candle series whose gap after a reconnect was fetched over REST, by endpoint and outcome (success, error).",
	}, []string{"endpoint", "outcome"})
	pushRetryCandles = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "marketd_push_closed_candles_pending",
		Help: "Closed pushed candles this worker keeps for a retry because Postgres refused their write (0 when every closed candle is stored).",
	})
	pushDroppedCandles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketd_push_closed_candles_reloaded_total",
		Help: "Closed pushed candles dropped from the retries past their bound (the newest 120 per series) and read again over REST once writes succeeded.",
	})
)

// pushCollectors are the push series Register adds.
var pushCollectors = []prometheus.Collector{pushConnections, pushReconnects, pushGapRepairs, pushRetryCandles, pushDroppedCandles}

// PushRetryCandles sets how many closed candles wait for a retried write.
func PushRetryCandles(n int) { pushRetryCandles.Set(float64(n)) }

// PushCandlesReloaded counts closed candles read again over REST after
// they were dropped from the retries.
func PushCandlesReloaded(n int) { pushDroppedCandles.Add(float64(n)) }

// Push records the exchange websockets' events; it is the Metrics of
// feeds/push.Manager and feeds/push.Alpaca.
type Push struct{}

// Connections adds delta to the open connections of an endpoint.
func (Push) Connections(endpoint string, delta int) {
	pushConnections.WithLabelValues(endpoint).Add(float64(delta))
}

// Reconnect counts a connection re-established after a drop.
func (Push) Reconnect(endpoint string) { pushReconnects.WithLabelValues(endpoint).Inc() }

// GapRepair counts one gap repair and its outcome.
func (Push) GapRepair(endpoint string, err error) {
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeError
	}
	pushGapRepairs.WithLabelValues(endpoint, outcome).Inc()
}

// PushEndpoints lists every endpoint label of the push series.
var PushEndpoints = []string{"binance-spot", "binance-futures", "okx-public", "okx-business", "oanda-pricing", "alpaca"}

func init() {
	// Every endpoint is exported from the start (at 0), so an alert on
	// reconnects or on no connection is defined before the first event.
	for _, ep := range PushEndpoints {
		pushConnections.WithLabelValues(ep)
		pushReconnects.WithLabelValues(ep)
		pushGapRepairs.WithLabelValues(ep, OutcomeSuccess)
		pushGapRepairs.WithLabelValues(ep, OutcomeError)
	}
}
