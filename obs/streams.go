package obs

import "github.com/prometheus/client_golang/prometheus"

var (
	streamConnections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "marketd_stream_connections", Help: "Open exchange stream connections by endpoint (websockets binance-spot, binance-futures, okx-public, okx-business, alpaca; OANDA's streaming HTTP oanda-pricing); two per shard while one replaces the other.",
	}, []string{"endpoint"})
	streamReconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_stream_reconnects_total", Help: "Exchange websocket connections re-established after a drop (planned replacements before the 24 h cut are not counted), by endpoint.",
	}, []string{"endpoint"})
	streamGapRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketd_stream_gap_repairs_total", Help: "Candle series whose gap after a reconnect was fetched over REST, by endpoint and outcome (success, error).",
	}, []string{"endpoint", "outcome"})
)

// streamCollectors are the stream series Register adds.
var streamCollectors = []prometheus.Collector{streamConnections, streamReconnects, streamGapRepairs}

// Streams records the exchange websockets' events; it is the Metrics of
// feeds/streams.Manager and feeds/streams.Alpaca.
type Streams struct{}

// StreamConnections adds delta to the open connections of an endpoint.
func (Streams) StreamConnections(endpoint string, delta int) {
	streamConnections.WithLabelValues(endpoint).Add(float64(delta))
}

// StreamReconnect counts a connection re-established after a drop.
func (Streams) StreamReconnect(endpoint string) { streamReconnects.WithLabelValues(endpoint).Inc() }

// GapRepair counts one gap repair and its outcome.
func (Streams) GapRepair(endpoint string, err error) {
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeError
	}
	streamGapRepairs.WithLabelValues(endpoint, outcome).Inc()
}

// StreamEndpoints lists every endpoint label of the stream series.
var StreamEndpoints = []string{"binance-spot", "binance-futures", "okx-public", "okx-business", "oanda-pricing", "alpaca"}

func init() {
	// Every endpoint is exported from the start (at 0), so an alert on
	// reconnects or on no connection is defined before the first event.
	for _, ep := range StreamEndpoints {
		streamConnections.WithLabelValues(ep)
		streamReconnects.WithLabelValues(ep)
		streamGapRepairs.WithLabelValues(ep, OutcomeSuccess)
		streamGapRepairs.WithLabelValues(ep, OutcomeError)
	}
}
