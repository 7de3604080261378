// Package exchangesim is a local simulator of Binance's public market-data
// API for tests and benchmarks, written from Binance's documentation (no
// code or recorded traffic of Binance's): the paths feeds' Binance adapter
// calls, their documented payload shapes, a deterministic universe of
// spot pairs and USDT-M perpetuals, candles that follow the wall clock,
// and the documented limits: request weights counted per IP and window,
// X-MBX-USED-WEIGHT-1M on every response, 429 with Retry-After over the
// limit, and a 418 ban, escalating from 2 minutes to 3 days, for an IP
// that sends during a 429's back-off.
//
// Sim is an http.Handler: mount it in an httptest.Server, or run the
// e2e/cmd/exchangesim binary. GET /sim/stats reports the peak weight per
// window and the 429 and 418 counts (for benchmarks). Market streams
// (websocket) are served by routes added in Sim.routes beside the REST
// ones.
package exchangesim

import (
	"encoding/json"
	"net"
	"net/http"
	"time"
)

// Config sets the simulated exchange. Zero values take the defaults.
type Config struct {
	// Seed makes the universe's prices and volumes reproducible.
	Seed int64
	// Spot and Perpetual are the sizes of the universe (1,200 and 400).
	Spot, Perpetual int
	// Window is the weight-counting window (Binance: a minute). Tests
	// shorten it; the header keeps Binance's name (X-MBX-USED-WEIGHT-1M).
	Window time.Duration
	// SpotLimit and FuturesLimit are the weights allowed per IP and window
	// (Binance: 6,000 and 2,400).
	SpotLimit, FuturesLimit int
	// FuturesDataLimit is the requests allowed per IP in 5 windows on
	// /futures/data/* (Binance: 1,000 per 5 minutes).
	FuturesDataLimit int
	// FirstBan is the first 418 ban of an IP (Binance: 2 minutes); each
	// next ban doubles, up to MaxBan (3 days).
	FirstBan, MaxBan time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Spot, 1200)
	def(&c.Perpetual, 400)
	def(&c.SpotLimit, 6000)
	def(&c.FuturesLimit, 2400)
	def(&c.FuturesDataLimit, 1000)
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.FirstBan <= 0 {
		c.FirstBan = 2 * time.Minute
	}
	if c.MaxBan <= 0 {
		c.MaxBan = 72 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Sim is the simulated exchange.
type Sim struct {
	cfg      Config
	universe *universe
	mux      *http.ServeMux
	limits   map[family]*limiter
}

// New returns a simulator of cfg.
func New(cfg Config) *Sim {
	cfg = cfg.withDefaults()
	s := &Sim{cfg: cfg, universe: newUniverse(cfg), mux: http.NewServeMux()}
	s.limits = map[family]*limiter{
		spotAPI:     newLimiter(cfg.Window, cfg.SpotLimit, cfg),
		futuresAPI:  newLimiter(cfg.Window, cfg.FuturesLimit, cfg),
		futuresData: newLimiter(5*cfg.Window, cfg.FuturesDataLimit, cfg),
	}
	s.routes()
	return s
}

// routes registers every path. Streams (websocket: /ws, /stream) belong
// here too, beside the REST routes.
func (s *Sim) routes() {
	s.rest("GET /api/v3/exchangeInfo", spotAPI, s.spotExchangeInfo)
	s.rest("GET /api/v3/ticker/24hr", spotAPI, s.spotTickers)
	s.rest("GET /api/v3/klines", spotAPI, s.spotKlines)
	s.rest("GET /fapi/v1/exchangeInfo", futuresAPI, s.futuresExchangeInfo)
	s.rest("GET /fapi/v1/ticker/24hr", futuresAPI, s.futuresTickers)
	s.rest("GET /fapi/v1/klines", futuresAPI, s.futuresKlines)
	s.rest("GET /fapi/v1/continuousKlines", futuresAPI, s.continuousKlines)
	s.rest("GET /fapi/v1/premiumIndex", futuresAPI, s.premiumIndex)
	s.rest("GET /fapi/v1/fundingInfo", futuresAPI, s.fundingInfo)
	s.rest("GET /futures/data/openInterestHist", futuresData, s.openInterestHist)
	s.mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Stats())
	})
}

// ServeHTTP implements http.Handler.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// endpoint answers one REST request; it returns the documented weight of
// the request (checked against the IP's budget before the body is
// written) and a function writing the response.
type endpoint func(r *http.Request) (weight int, respond func(w http.ResponseWriter), err *apiError)

// rest mounts an endpoint behind its family's limiter. A request with a
// bad parameter is counted too, as Binance counts it.
func (s *Sim) rest(pattern string, f family, e endpoint) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		weight, respond, aerr := e(r)
		d := s.limits[f].admit(clientIP(r), weight)
		w.Header().Set("X-MBX-USED-WEIGHT-1M", itoa(d.used))
		switch {
		case d.status != http.StatusOK:
			w.Header().Set("Retry-After", itoa(int(d.retryAfter.Seconds())))
			writeError(w, d.status, d.err)
		case aerr != nil:
			writeError(w, http.StatusBadRequest, aerr)
		default:
			respond(w)
		}
	})
}

// Stats are the simulator's counters since it started, per API family.
type Stats struct {
	Spot        FamilyStats `json:"spot"`
	Futures     FamilyStats `json:"futures"`
	FuturesData FamilyStats `json:"futures_data"`
}

// FamilyStats count one family's traffic (every IP together).
type FamilyStats struct {
	Limit      int   `json:"limit"`
	WindowMS   int64 `json:"window_ms"`
	PeakWeight int   `json:"peak_weight"` // the most any IP used in one window
	Requests   int64 `json:"requests"`
	Refused429 int64 `json:"refused_429"`
	Banned418  int64 `json:"banned_418"`
}

// Stats returns the counters.
func (s *Sim) Stats() Stats {
	return Stats{Spot: s.limits[spotAPI].stats(), Futures: s.limits[futuresAPI].stats(), FuturesData: s.limits[futuresData].stats()}
}

// family is a set of paths sharing one budget per IP.
type family int

const (
	spotAPI family = iota
	futuresAPI
	futuresData
)

// clientIP is the "IP" a budget is kept for: the connection's address.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// apiError is Binance's error body.
type apiError struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

func writeError(w http.ResponseWriter, status int, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
