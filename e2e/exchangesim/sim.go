// Package exchangesim is a local simulator of Binance's public market-data
// API (and of OANDA's v20 REST and pricing stream: oanda.go) for tests and
// benchmarks, written from Binance's documentation (no
// code or recorded traffic of Binance's): the paths feeds' Binance adapter
// calls, their documented payload shapes, a deterministic universe of
// spot pairs and USDT-M perpetuals, candles that follow the wall clock,
// and the documented limits: request weights counted per IP and window,
// X-MBX-USED-WEIGHT-1M on every response, 429 with Retry-After over the
// limit, and a 418 ban, escalating from 2 minutes to 3 days, for an IP
// that sends during a 429's back-off.
//
// The market streams are served on the same listener: spot combined
// streams on /stream and USDⓈ-M on /market/stream (so the binance-stream
// and binance-futures-stream hosts are both ws://<addr>), speaking the
// protocol of feeds/push/pushtest with the documented limits
// (streams per connection, incoming messages a second, connection
// attempts per IP and window, the 24 h cut). Kline pushes come from the
// same candle model as the REST klines, the closed state within 100 ms of
// the close; !miniTicker@arr every second.
//
// The same listener serves Alpaca's stock APIs, also written from the
// documentation (alpaca*.go): the Trading API's assets, calendar and
// clock, Market Data v2 bars and snapshots, and the market-data
// websocket on /v2/{feed}, with Alpaca's per-key rate limits and plans.
//
// Sim is an http.Handler: mount it in an httptest.Server, or run the
// e2e/cmd/exchangesim binary. GET /sim/stats reports the peak weight per
// window, the 429 and 418 counts, and the stream connections and messages
// (for benchmarks). Close stops the streams.
package exchangesim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds/archivetest"
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

	// SpotStreams and FuturesStreams are the streams allowed on one
	// connection (Binance: 1,024 spot, 200 USDⓈ-M); SpotMessages and
	// FuturesMessages the incoming messages a second (5 and 10). A breach
	// closes the connection.
	SpotStreams, FuturesStreams   int
	SpotMessages, FuturesMessages int
	// StreamAttempts are the connection attempts allowed per IP in
	// StreamAttemptWindow (Binance: 300 per 5 minutes), per family.
	StreamAttempts      int
	StreamAttemptWindow time.Duration
	// StreamMaxAge is when the server cuts a connection (Binance: 24 h).
	StreamMaxAge time.Duration
	// KlineEvery spaces the pushes of open klines (Binance: 2 s);
	// TickerEvery those of !miniTicker@arr (1 s).
	KlineEvery, TickerEvery time.Duration

	// Alpaca sets the Alpaca part (alpaca.go); it follows Now too.
	Alpaca AlpacaConfig
	// Oanda sets the OANDA v20 account served on the same listener (oanda.go).
	Oanda OandaConfig

	// ArchiveMonths, when above 0, serves Binance's public data archive
	// under /archive (MARKET_FEED_URLS binance-archive=http://<addr>/archive):
	// the spot universe's 1d, 4h and 1h klines of the ArchiveMonths months
	// before the current one and the current month's daily files, one in
	// ten symbols delisted partway (feeds/archivetest.Universe).
	ArchiveMonths int
	// ArchiveSymbols limits the archive to the universe's first symbols
	// (0: every spot symbol). More than the spot universe adds symbols
	// that exist only in the archive, as delisted pairs do: listed from
	// the archive's first month and delisted in its last year.
	ArchiveSymbols int
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
	def(&c.SpotStreams, 1024)
	def(&c.FuturesStreams, 200)
	def(&c.SpotMessages, 5)
	def(&c.FuturesMessages, 10)
	def(&c.StreamAttempts, 300)
	durDef := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	durDef(&c.StreamAttemptWindow, 5*time.Minute)
	durDef(&c.StreamMaxAge, 24*time.Hour)
	durDef(&c.KlineEvery, 2*time.Second)
	durDef(&c.TickerEvery, time.Second)
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

	spotStreams, futuresStreams *streamHub
	hubs                        []*streamHub
	stop                        context.Context
	cancel                      context.CancelFunc
	pushOnce                    sync.Once // the push loop starts with the first stream connection
	alpaca                      *alpacaSim
	oanda                       *oandaSim
	markMu                      sync.Mutex
	markedAt                    *time.Time // the last Mark, on the simulator's clock
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
	s.stop, s.cancel = context.WithCancel(context.Background())
	s.oanda = newOandaSim(cfg, s.stop.Done())
	s.spotStreams = newStreamHub(cfg.SpotStreams, cfg.SpotMessages, cfg, s.universe.spotBy, s.universe.spot)
	s.futuresStreams = newStreamHub(cfg.FuturesStreams, cfg.FuturesMessages, cfg, s.universe.futuresBy, s.universe.futures)
	s.hubs = []*streamHub{s.spotStreams, s.futuresStreams}
	s.alpaca = newAlpacaSim(cfg.Alpaca, cfg.Seed, cfg.Now)
	s.routes()
	return s
}

// ConnState is the simulator's http.Server ConnState hook: OANDA counts a
// client's new connections when they are accepted, not at their first
// request (oandaSim.admit). A server without it counts them at their
// first request.
func (s *Sim) ConnState(c net.Conn, st http.ConnState) {
	s.oanda.connState(c.RemoteAddr().String(), st)
}

// routes registers every path.
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
	s.mux.HandleFunc("GET /stream", s.serveStream(s.spotStreams))
	s.mux.HandleFunc("GET /market/stream", s.serveStream(s.futuresStreams))
	s.alpaca.routes(s.mux)
	s.oanda.routes(s.mux)
	if s.cfg.ArchiveMonths > 0 {
		s.mux.Handle("GET /archive/", http.StripPrefix("/archive", s.archive()))
	}
	s.mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Stats())
	})
	s.mux.HandleFunc("POST /sim/stats/mark", func(w http.ResponseWriter, r *http.Request) {
		s.Mark()
		writeJSON(w, s.Stats())
	})
}

// archive is the generated archive of the spot universe.
func (s *Sim) archive() *archivetest.Archive {
	now := s.cfg.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for _, sym := range s.universe.spot {
		if s.cfg.ArchiveSymbols > 0 && len(names) == s.cfg.ArchiveSymbols {
			break
		}
		names = append(names, sym.name)
	}
	from := thisMonth.AddDate(0, -s.cfg.ArchiveMonths, 0)
	a := archivetest.Universe(names, from, now, []domain.Timeframe{domain.TF1d, domain.TF4h, domain.TF1h})
	for i := len(names); i < s.cfg.ArchiveSymbols; i++ {
		name := fmt.Sprintf("GONE%04dUSDT", i-len(names))
		until := thisMonth.AddDate(0, -1-int(hashString(name)%12), 0)
		if !until.After(from) {
			until = thisMonth
		}
		a.Symbols = append(a.Symbols, archivetest.Symbol{Market: "spot", Name: name, From: from, Until: until})
	}
	return a
}

// Mark starts the figures since a mark (each budget's since_mark, and
// MarkedAt): a benchmark marks the end of its warm-up, so the peaks and
// refusals after it are told apart from the cold start's. Marking again
// starts them over.
func (s *Sim) Mark() {
	for _, l := range s.limits {
		l.markNow()
	}
	s.alpaca.markNow()
	s.oanda.markNow()
	at := s.cfg.Now()
	s.markMu.Lock()
	s.markedAt = &at
	s.markMu.Unlock()
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
	// SpotStreams and FuturesStreams are the market streams' traffic.
	SpotStreams    StreamStats `json:"spot_streams"`
	FuturesStreams StreamStats `json:"futures_streams"`
	// Alpaca is the Alpaca part's traffic.
	Alpaca AlpacaStats `json:"alpaca"`
	// Oanda is the OANDA v20 traffic.
	Oanda OandaStats `json:"oanda"`
	// MarkedAt is the last Mark (POST /sim/stats/mark), on the simulator's
	// clock; the since_mark figures count from it.
	MarkedAt *time.Time `json:"marked_at,omitempty"`
}

// FamilyStats count one family's traffic (every IP together).
type FamilyStats struct {
	Limit      int   `json:"limit"`
	WindowMS   int64 `json:"window_ms"`
	PeakWeight int   `json:"peak_weight"` // the most any IP used in one window
	Requests   int64 `json:"requests"`
	Refused429 int64 `json:"refused_429"`
	Banned418  int64 `json:"banned_418"`
	// SinceMark are the figures since the last mark (POST /sim/stats/mark).
	SinceMark FamilyMark `json:"since_mark"`
}

// FamilyMark are a family's figures since a mark: the peak of every
// window open at the mark or after it (one open at the mark counts
// whole), and the requests and refusals after the mark.
type FamilyMark struct {
	PeakWeight int   `json:"peak_weight"`
	Requests   int64 `json:"requests"`
	Refused429 int64 `json:"refused_429"`
	Banned418  int64 `json:"banned_418"`
}

// Stats returns the counters.
func (s *Sim) Stats() Stats {
	s.markMu.Lock()
	at := s.markedAt
	s.markMu.Unlock()
	return Stats{Spot: s.limits[spotAPI].stats(), Futures: s.limits[futuresAPI].stats(), FuturesData: s.limits[futuresData].stats(),
		SpotStreams: s.spotStreams.stats(), FuturesStreams: s.futuresStreams.stats(), Alpaca: s.alpaca.stats(),
		Oanda: s.oanda.Stats(), MarkedAt: at}
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
