package exchangesim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The Alpaca part of the simulator: Alpaca's Trading API (assets,
// calendar, clock), Market Data API v2 for stocks (bars, latest bars,
// snapshots) and the stock market-data websocket, written from Alpaca's
// documentation. The sources cited in these files:
//
//   - [docs-md] alpacahq/alpaca-docs (GitHub, 2023 snapshot of
//     alpaca.markets/docs): content/api-references/market-data-api/
//     stock-pricing-data/{historical,realtime}.md, content/market-data/
//     _index.md, oas/data/openapi.yaml, oas/trading/openapi.yaml,
//     data/webapi/endpoints/assets.yaml.
//   - [docs-ref] docs.alpaca.markets/reference/… OpenAPI pages (2026):
//     stockbarsingle-1, get-v2-assets-1, getcalendar-1, queryMarketClock.
//   - [docs-stream] docs.alpaca.markets/docs/streaming-market-data and
//     …/real-time-stock-pricing-data; [docs-faq] …/docs/market-data-faq.
//   - [sdk-go] alpacahq/alpaca-trade-api-go: marketdata/stream/errors.go,
//     flow.go, flow_test.go, alpaca/entities.go.
//   - [sdk-py] alpacahq/alpaca-py: alpaca/data/timeframe.py,
//     alpaca/trading/models.py, tests/broker/broker_client/test_misc_routes.py.
//   - [forum] forum.alpaca.markets threads, answered by Alpaca staff:
//     8947 (updated bars), 11966 (daily vs hourly bars), 12029 (rate-limit
//     headers), 14632 (4H bar alignment), 16502 (what is one API call).
//   - [iex] IEX Trading Alert #2015-015 (IEX session hours).
//
// Where the documentation is silent the file says "chosen" and why.

// AlpacaPlan is a market-data subscription ([docs-md] market-data/_index.md,
// "Subscription Plans"; the paid plan is now called Algo Trader Plus).
type AlpacaPlan string

// The plans: free (Basic: IEX in real time, SIP only 15 minutes late,
// 200 data calls a minute, 30 websocket symbols) and paid (SIP in real
// time, 10,000 data calls a minute, unlimited symbols).
const (
	AlpacaFree AlpacaPlan = "free"
	AlpacaPaid AlpacaPlan = "paid"
)

// AlpacaConfig sets the Alpaca simulator. Zero values take the defaults.
type AlpacaConfig struct {
	// Assets and Inactive are the sizes of the us_equity universe:
	// active (11,500) and inactive (600) assets.
	Assets, Inactive int
	// Plan is the market-data plan (free).
	Plan AlpacaPlan
	// DataLimit is the market-data API's requests per key and Window
	// (free 200, paid 10,000); TradingLimit the Trading API's (200 on
	// every plan). Alpaca keeps the two apart: a data plan does not lift
	// the trading limit ([forum] 12029).
	DataLimit, TradingLimit int
	// Window is the rate-limit window (a minute).
	Window time.Duration
	// Keys are the accepted key ids and their secrets; nil accepts any
	// non-empty pair.
	Keys map[string]string
	// MaxURI is the longest request target answered (8,192 bytes);
	// a longer one is refused 414.
	MaxURI int
	// IEXShare is the IEX feed's share of SIP volume (0.025: "IEX
	// accounts for ~2.5% market volume", [docs-md] stock-pricing-data).
	IEXShare float64
	// StreamSymbols is the websocket symbol limit (free 30, paid
	// unlimited); StreamConnections the connections per key and endpoint (1).
	StreamSymbols, StreamConnections int
	// AuthTimeout is how long a websocket may stay unauthenticated (10 s).
	AuthTimeout time.Duration
	// Holidays and EarlyCloses add market closures and 13:00 closes to
	// NYSE's rules; only each time's New York date counts.
	Holidays, EarlyCloses []time.Time
	// Tick, when set, drives the websocket pushes instead of a 100 ms
	// ticker: each receive is one pass at the time received, so a test
	// steps the pushes in time with the clock it gives Config.Now.
	Tick <-chan time.Time
}

func (c AlpacaConfig) withDefaults() AlpacaConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Plan != AlpacaPaid {
		c.Plan = AlpacaFree
	}
	def(&c.Assets, 11500)
	def(&c.Inactive, 600)
	def(&c.TradingLimit, 200)
	def(&c.MaxURI, 8192)
	def(&c.StreamConnections, 1)
	if c.Plan == AlpacaPaid {
		def(&c.DataLimit, 10000)
	} else {
		def(&c.DataLimit, 200)
		def(&c.StreamSymbols, 30)
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.IEXShare <= 0 || c.IEXShare > 1 {
		c.IEXShare = 0.025
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = 10 * time.Second // [docs-stream]: "you only have 10 seconds"
	}
	return c
}

// alpacaSim holds the Alpaca part's state.
type alpacaSim struct {
	cfg      AlpacaConfig
	now      func() time.Time
	cal      *marketCalendar
	universe *equityUniverse
	market   *stockMarket
	trading  *keyLimiter
	data     *keyLimiter
	streams  *alpacaStreams

	mu         sync.Mutex
	restErrors map[int]int64 // by HTTP status
	uriTooLong int64
}

func newAlpacaSim(cfg AlpacaConfig, seed int64, now func() time.Time) *alpacaSim {
	cfg = cfg.withDefaults()
	cal := newMarketCalendar(cfg.Holidays, cfg.EarlyCloses)
	a := &alpacaSim{cfg: cfg, now: now, cal: cal, restErrors: map[int]int64{},
		trading: newKeyLimiter(cfg.TradingLimit, cfg.Window),
		data:    newKeyLimiter(cfg.DataLimit, cfg.Window)}
	a.universe = newEquityUniverse(uint64(seed), cfg.Assets, cfg.Inactive, dayOf(now()))
	a.market = newStockMarket(cal, cfg.IEXShare)
	a.streams = newAlpacaStreams(a)
	return a
}

// routes registers Alpaca's paths. They share the listener with
// Binance's (/api, /fapi, /futures, /stream): Alpaca's all start /v2/.
func (a *alpacaSim) routes(mux *http.ServeMux) {
	a.handle(mux, "GET /v2/assets", a.trading, a.listAssets)
	a.handle(mux, "GET /v2/assets/{symbol_or_asset_id}", a.trading, a.getAsset)
	a.handle(mux, "GET /v2/calendar", a.trading, a.calendar)
	a.handle(mux, "GET /v2/clock", a.trading, a.clock)
	a.handle(mux, "GET /v2/stocks/bars", a.data, a.multiBars)
	a.handle(mux, "GET /v2/stocks/{symbol}/bars", a.data, a.singleBars)
	a.handle(mux, "GET /v2/stocks/bars/latest", a.data, a.latestBars)
	a.handle(mux, "GET /v2/stocks/snapshots", a.data, a.snapshots)
	a.handle(mux, "GET /v2/stocks/{symbol}/snapshot", a.data, a.snapshot)
	mux.HandleFunc("GET /v2/{feed}", a.streams.serve)
}

// alpacaError is Alpaca's error body, {"code": …, "message": …}
// ([sdk-go] alpaca/entities.go APIError), with the HTTP status.
type alpacaError struct {
	status  int
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// The codes follow Alpaca's scheme (the HTTP status and five digits:
// 40110000, 42210000 in [sdk-go] and [forum]); the exact numbers and
// wording of each message are chosen.
func errBadRequest(msg string) *alpacaError {
	return &alpacaError{status: http.StatusBadRequest, Code: 40010001, Message: msg}
}

func errUnprocessable(msg string) *alpacaError {
	return &alpacaError{status: http.StatusUnprocessableEntity, Code: 42210000, Message: msg}
}

func errNotFound(msg string) *alpacaError {
	return &alpacaError{status: http.StatusNotFound, Code: 40410000, Message: msg}
}

var (
	// [docs-ref] stockbarsingle-1: 401 "Authentication headers are missing or invalid".
	errUnauthorized = &alpacaError{status: http.StatusUnauthorized, Code: 40110000, Message: "request is not authorized"}
	// [forum] 12029: "429 rate limit exceeded".
	errRateLimited = &alpacaError{status: http.StatusTooManyRequests, Code: 42910000, Message: "rate limit exceeded"}
	// [docs-faq]: the message a free plan gets for SIP data of the last 15 minutes.
	errRecentSIP = &alpacaError{status: http.StatusForbidden, Code: 40310000, Message: "subscription does not permit querying recent SIP data"}
)

// alpacaHandler answers an admitted request with a body to encode as
// JSON, or an error.
type alpacaHandler func(r *http.Request) (any, *alpacaError)

// handle mounts h behind the checks every Alpaca REST response goes
// through, in this order: the URI length (a front proxy's 414, never
// counted), the key (401), the key's window (429, with the headers),
// then h. Every response past the key carries X-RateLimit-Limit,
// -Remaining and -Reset ([docs-ref] stockbarsingle-1 lists them on 200,
// 400 and 429; [forum] 12029 on every Trading API response).
func (a *alpacaSim) handle(mux *http.ServeMux, pattern string, lim *keyLimiter, h alpacaHandler) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if len(r.RequestURI) > a.cfg.MaxURI {
			a.refuseLongURI(w)
			return
		}
		key, ok := a.authorize(r.Header.Get("APCA-API-KEY-ID"), r.Header.Get("APCA-API-SECRET-KEY"))
		if !ok {
			a.fail(w, errUnauthorized)
			return
		}
		d := lim.admit(key, a.now())
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(d.limit))
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(d.remaining))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(d.reset, 10))
		if !d.ok {
			a.fail(w, errRateLimited)
			return
		}
		body, aerr := h(r)
		if aerr != nil {
			a.fail(w, aerr)
			return
		}
		writeJSON(w, body)
	})
}

// authorize checks a key pair against Config.Keys (any non-empty pair
// when it is nil).
func (a *alpacaSim) authorize(key, secret string) (string, bool) {
	if key == "" || secret == "" {
		return "", false
	}
	if a.cfg.Keys != nil {
		if want, ok := a.cfg.Keys[key]; !ok || want != secret {
			return "", false
		}
	}
	return key, true
}

func (a *alpacaSim) fail(w http.ResponseWriter, e *alpacaError) {
	a.mu.Lock()
	a.restErrors[e.status]++
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e)
}

// refuseLongURI answers as a front proxy does: Alpaca documents no URI
// limit, so the simulator takes nginx's default (a request line must fit
// its 8 KiB large_client_header_buffers) and its plain 414 page (chosen).
// A client must size its symbol batches by the URL's length.
func (a *alpacaSim) refuseLongURI(w http.ResponseWriter) {
	a.mu.Lock()
	a.uriTooLong++
	a.restErrors[http.StatusRequestURITooLong]++
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusRequestURITooLong)
	_, _ = w.Write([]byte("<html>\r\n<head><title>414 Request-URI Too Large</title></head>\r\n<body>\r\n<center><h1>414 Request-URI Too Large</h1></center>\r\n</body>\r\n</html>\r\n"))
}

// AlpacaStats are the Alpaca part's counters since the simulator started.
type AlpacaStats struct {
	Plan    AlpacaPlan       `json:"plan"`
	Trading AlpacaLimitStats `json:"trading"`
	Data    AlpacaLimitStats `json:"data"`
	// RESTErrors counts error responses by HTTP status (401, 403, 404,
	// 400, 414, 422, 429).
	RESTErrors map[string]int64  `json:"rest_errors"`
	URITooLong int64             `json:"uri_too_long"`
	Stream     AlpacaStreamStats `json:"stream"`
}

// AlpacaLimitStats count one API's requests (every key together).
type AlpacaLimitStats struct {
	Limit        int   `json:"limit"`
	WindowMS     int64 `json:"window_ms"`
	PeakRequests int   `json:"peak_requests"` // the most one key had admitted in a window
	Requests     int64 `json:"requests"`      // authenticated requests, admitted or not
	Refused429   int64 `json:"refused_429"`
	// SentDuring429 counts requests a key sent after a 429 while that
	// window was still in force: a well-behaved client sends none.
	SentDuring429 int64 `json:"sent_during_429"`
	// SinceMark are the figures since the last mark (POST /sim/stats/mark).
	SinceMark AlpacaLimitMark `json:"since_mark"`
}

// AlpacaLimitMark are an API's figures since a mark: the peak of every
// key's window open at the mark or after it (one open at the mark counts
// whole), and the requests and refusals after the mark.
type AlpacaLimitMark struct {
	PeakRequests  int   `json:"peak_requests"`
	Requests      int64 `json:"requests"`
	Refused429    int64 `json:"refused_429"`
	SentDuring429 int64 `json:"sent_during_429"`
}

func (a *alpacaSim) stats() AlpacaStats {
	a.mu.Lock()
	errs := make(map[string]int64, len(a.restErrors))
	for status, n := range a.restErrors {
		errs[strconv.Itoa(status)] = n
	}
	tooLong := a.uriTooLong
	a.mu.Unlock()
	return AlpacaStats{Plan: a.cfg.Plan, Trading: a.trading.stats(), Data: a.data.stats(),
		RESTErrors: errs, URITooLong: tooLong, Stream: a.streams.stats()}
}

func (a *alpacaSim) markNow() {
	now := a.now()
	a.trading.markNow(now)
	a.data.markNow(now)
}

func (a *alpacaSim) close() { a.streams.close() }
