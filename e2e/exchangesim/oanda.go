package exchangesim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The OANDA v20 part of the simulator, written from OANDA's documentation
// (developer.oanda.com/rest-live-v20/ and oanda/v20-openapi): the paths
// feeds' oanda adapter calls, on the same listener as Binance's (the /v3/
// paths do not collide), for both the oanda and the oanda-stream hosts:
//
//   - GET /v3/accounts/{accountID}/instruments: the account's 68 CURRENCY
//     pairs (OandaConfig.Pairs of them) and a few CFDs and metals;
//   - GET /v3/instruments/{instrument}/candles: granularity, count (≤ 5000),
//     from, to, includeFirst, price (M, B, A), dailyAlignment,
//     alignmentTimezone, weeklyAlignment, with the documented defaults;
//     complete, tick volume, decimal strings; no candle while the market is
//     closed;
//   - GET /v3/accounts/{accountID}/pricing: the current prices (since);
//   - GET /v3/accounts/{accountID}/pricing/stream: chunked, one JSON object
//     a line, a snapshot, then the prices as they move (each pair quotes
//     every 1–4 s) and a heartbeat every 5 s;
//
// with the weekend close (Friday 17:00 to Sunday 17:00 New York: prices
// frozen and not tradeable, no candle, heartbeats alone on the stream),
// bearer-token authorization (401), unknown accounts (400 for an id not of
// the v20 form, 403 for one of another user) and the documented limits
// (development guide, "Rate Limiting" and "Connection Limiting"): 120
// requests a second per IP (429 beyond), 20 active streams per IP and 2 new
// connections a second (both refused 429: the docs say only "rejected").
// The market follows Config.Now, so -clock-offset shifts it too; the rates
// are counted on the wall clock, as the requests arrive.

// OandaConfig sets the simulated OANDA account. Zero values take the
// defaults.
type OandaConfig struct {
	// AccountID is the account the token may read (101-004-1234567-001).
	AccountID string
	// Token is the bearer token accepted (sim-oanda-token).
	Token string
	// Pairs is how many CURRENCY pairs the account lists (1–68; 68), the
	// seven USD majors first.
	Pairs int
	// RequestsPerSecond is the REST requests allowed per IP and second
	// (OANDA: 120).
	RequestsPerSecond int
	// NewConnectionsPerSecond is the new connections allowed per IP and
	// second (OANDA: 2).
	NewConnectionsPerSecond int
	// MaxStreams is the active streams allowed per IP (OANDA: 20).
	MaxStreams int
	// HeartbeatEvery spaces the stream's heartbeats (OANDA: 5 s);
	// PriceEvery is how often the stream looks for new prices (OANDA sends
	// at most one per instrument every 250 ms).
	HeartbeatEvery, PriceEvery time.Duration
}

func (c OandaConfig) withDefaults() OandaConfig {
	if c.AccountID == "" {
		c.AccountID = "101-004-1234567-001"
	}
	if c.Token == "" {
		c.Token = "sim-oanda-token"
	}
	if c.Pairs <= 0 || c.Pairs > len(oandaPairNames) {
		c.Pairs = len(oandaPairNames)
	}
	if c.RequestsPerSecond <= 0 {
		c.RequestsPerSecond = 120
	}
	if c.NewConnectionsPerSecond <= 0 {
		c.NewConnectionsPerSecond = 2
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 20
	}
	if c.HeartbeatEvery <= 0 {
		c.HeartbeatEvery = 5 * time.Second
	}
	if c.PriceEvery <= 0 {
		c.PriceEvery = 250 * time.Millisecond
	}
	return c
}

// oandaSim serves the OANDA paths.
type oandaSim struct {
	cfg    OandaConfig
	now    func() time.Time
	market oandaMarket
	pairs  []*oandaPair
	byName map[string]*oandaPair
	stop   <-chan struct{} // closed by Sim.Close: streams end

	mu          sync.Mutex
	second      map[string]*oandaSecond // per IP: requests of the current second
	conns       map[string]time.Time    // remote address → last request (a connection seen)
	newConns    map[string][]time.Time  // per IP: when its recent new connections were accepted
	accepted    map[string]time.Time    // remote address → when the listener accepted it (Sim.ConnState)
	streamsOpen map[string]int          // per IP
	stats       OandaStats
	mark        OandaStats // the counters at the last mark (PeakPerSecond: since it)
	marked      bool
}

// oandaSecond counts one IP's requests of one (wall-clock) second.
type oandaSecond struct {
	at   int64
	reqs int
}

// OandaStats count the OANDA traffic (every IP together).
type OandaStats struct {
	Requests           int64 `json:"requests"`
	LimitPerSecond     int   `json:"limit_per_second"`
	PeakPerSecond      int   `json:"peak_per_second"` // the most one IP sent in a second
	Refused429         int64 `json:"refused_429"`     // over the request rate
	RefusedConnections int64 `json:"refused_connections"`
	Unauthorized       int64 `json:"unauthorized"`
	// Streams are the pricing streams.
	Streams OandaStreamStats `json:"streams"`
	// SinceMark are the figures since the last mark (POST /sim/stats/mark):
	// the peak of every second from the mark's on, the requests and
	// refusals after it.
	SinceMark *OandaMark `json:"since_mark,omitempty"`
}

// OandaMark are the OANDA figures since a mark.
type OandaMark struct {
	Requests           int64 `json:"requests"`
	PeakPerSecond      int   `json:"peak_per_second"`
	Refused429         int64 `json:"refused_429"`
	RefusedConnections int64 `json:"refused_connections"`
}

// OandaStreamStats count the pricing streams.
type OandaStreamStats struct {
	MaxPerIP   int   `json:"max_per_ip"`
	Accepted   int64 `json:"accepted"`
	Open       int   `json:"open"`
	Refused    int64 `json:"refused"` // over MaxStreams
	Prices     int64 `json:"prices"`
	Heartbeats int64 `json:"heartbeats"`
}

func newOandaSim(cfg Config, stop <-chan struct{}) *oandaSim {
	oc := cfg.Oanda.withDefaults()
	o := &oandaSim{cfg: oc, now: cfg.Now, market: newOandaMarket(), pairs: newOandaPairs(cfg.Seed, oc.Pairs),
		byName: map[string]*oandaPair{}, stop: stop, second: map[string]*oandaSecond{}, conns: map[string]time.Time{},
		newConns: map[string][]time.Time{}, accepted: map[string]time.Time{}, streamsOpen: map[string]int{}}
	for _, p := range o.pairs {
		o.byName[p.name] = p
	}
	o.stats.LimitPerSecond, o.stats.Streams.MaxPerIP = oc.RequestsPerSecond, oc.MaxStreams
	return o
}

// routes mounts the OANDA paths on mux.
func (o *oandaSim) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v3/accounts/{accountID}/instruments", o.guard(true, o.instruments))
	mux.HandleFunc("GET /v3/accounts/{accountID}/pricing", o.guard(true, o.pricing))
	mux.HandleFunc("GET /v3/accounts/{accountID}/pricing/stream", o.guard(true, o.stream))
	mux.HandleFunc("GET /v3/instruments/{instrument}/candles", o.guard(false, o.candles))
}

// v20AccountID is the documented form of an account id
// ("{siteID}-{divisionID}-{userID}-{accountNumber}", oanda/v20-openapi).
var v20AccountID = regexp.MustCompile(`^[0-9]+-[0-9]+-[0-9]+-[0-9]+$`)

// guard applies, in order, the connection and request limits, the token
// and (for account paths) the account, then serves.
func (o *oandaSim) guard(account bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if refusal := o.admit(r); refusal != "" {
			if refusal == refusedConnection {
				w.Header().Set("Connection", "close") // the connection is not kept
			}
			oandaError(w, http.StatusTooManyRequests, refusal)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+o.cfg.Token {
			o.count(func(s *OandaStats) { s.Unauthorized++ })
			oandaError(w, http.StatusUnauthorized, "Insufficient authorization to perform request.")
			return
		}
		if account {
			// Observed answers, not in the endpoints' documented codes
			// (oanda/v20-openapi lists 400, 401, 404, 405): 400 "Invalid
			// value specified for 'accountID'" for an id that is not a v20
			// id, as users report it for a v1 account number; 403 "The
			// provided request was forbidden." for an account the token
			// does not own (hootnot/oanda-api-v20#202).
			switch id := r.PathValue("accountID"); {
			case !v20AccountID.MatchString(id):
				oandaError(w, http.StatusBadRequest, "Invalid value specified for 'accountID'")
				return
			case id != o.cfg.AccountID:
				oandaError(w, http.StatusForbidden, "The provided request was forbidden.")
				return
			}
		}
		next(w, r)
	}
}

const (
	refusedConnection = "Too many new connections"
	refusedRate       = "Too many requests"
)

// admit counts a request of its IP: a new connection (a remote address not
// seen before) against NewConnectionsPerSecond, the request against
// RequestsPerSecond; it returns the refusal's message, or "".
//
// OANDA limits the connections a client opens a second, so a new
// connection counts at the instant it was accepted (Sim.ConnState, when
// the server reports its connections; its first request otherwise): a
// client's HTTP transport may dial a connection and leave it idle, its
// request having taken another that came free meanwhile, and use it
// seconds later beside connections dialed since.
func (o *oandaSim) admit(r *http.Request) string {
	ip, now := clientIP(r), time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Requests++
	if _, seen := o.conns[r.RemoteAddr]; !seen {
		at := now
		if t, ok := o.accepted[r.RemoteAddr]; ok {
			at = t
		}
		recent := o.newConns[ip][:0]
		earlier := 0 // accepted within the second before this one
		for _, t := range o.newConns[ip] {
			if now.Sub(t) < time.Minute { // kept for connections first used late
				recent = append(recent, t)
			}
			if !t.After(at) && at.Sub(t) < time.Second {
				earlier++
			}
		}
		o.newConns[ip] = recent
		if earlier >= o.cfg.NewConnectionsPerSecond {
			o.stats.RefusedConnections++
			return refusedConnection
		}
		o.newConns[ip] = append(recent, at)
		o.forgetIdle(now)
	}
	o.conns[r.RemoteAddr] = now
	sec := o.second[ip]
	if sec == nil || sec.at != now.Unix() {
		sec = &oandaSecond{at: now.Unix()}
		o.second[ip] = sec
	}
	if sec.reqs >= o.cfg.RequestsPerSecond {
		o.stats.Refused429++
		return refusedRate
	}
	sec.reqs++
	o.stats.PeakPerSecond = max(o.stats.PeakPerSecond, sec.reqs)
	o.mark.PeakPerSecond = max(o.mark.PeakPerSecond, sec.reqs)
	return ""
}

// markNow starts the figures since a mark; the second under way counts
// whole.
func (o *oandaSim) markNow() {
	now := time.Now().Unix()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mark = OandaStats{Requests: o.stats.Requests, Refused429: o.stats.Refused429, RefusedConnections: o.stats.RefusedConnections}
	for _, sec := range o.second {
		if sec.at == now {
			o.mark.PeakPerSecond = max(o.mark.PeakPerSecond, sec.reqs)
		}
	}
	o.marked = true
}

// connState records when the listener accepted a connection, and forgets
// it once closed or taken over (a websocket).
func (o *oandaSim) connState(addr string, st http.ConnState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch st {
	case http.StateNew:
		o.accepted[addr] = time.Now()
	case http.StateClosed, http.StateHijacked:
		delete(o.accepted, addr)
	}
}

// forgetIdle drops connections idle for long (closed by the client, most
// likely), so the map stays small; a connection forgotten and used again
// counts as new once more.
func (o *oandaSim) forgetIdle(now time.Time) {
	if len(o.conns) < 1024 {
		return
	}
	for addr, last := range o.conns {
		if now.Sub(last) > 2*time.Minute {
			delete(o.conns, addr)
		}
	}
}

func (o *oandaSim) count(f func(*OandaStats)) {
	o.mu.Lock()
	f(&o.stats)
	o.mu.Unlock()
}

// Stats returns the counters.
func (o *oandaSim) Stats() OandaStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	for _, n := range o.streamsOpen {
		s.Streams.Open += n
	}
	if o.marked {
		s.SinceMark = &OandaMark{Requests: s.Requests - o.mark.Requests, PeakPerSecond: o.mark.PeakPerSecond,
			Refused429: s.Refused429 - o.mark.Refused429, RefusedConnections: s.RefusedConnections - o.mark.RefusedConnections}
	}
	return s
}

// oandaError writes v20's error body.
func oandaError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"errorMessage": msg})
}

// instruments answers the account's instruments, optionally only the
// listed ones (instruments=A,B).
func (o *oandaSim) instruments(w http.ResponseWriter, r *http.Request) {
	want := csvSet(r.URL.Query().Get("instruments"))
	rows := make([]map[string]any, 0, len(o.pairs))
	for _, p := range o.pairs {
		if len(want) > 0 && !want[p.name] {
			continue
		}
		rows = append(rows, map[string]any{
			"name": p.name, "type": p.kind, "displayName": p.display, "pipLocation": p.pipLocation,
			"displayPrecision": p.precision, "tradeUnitsPrecision": 0, "minimumTradeSize": "1",
			"maximumTrailingStopDistance": "1.00000", "minimumTrailingStopDistance": "0.00050",
			"maximumPositionSize": "0", "maximumOrderUnits": "100000000", "marginRate": "0.0333",
			"guaranteedStopLossOrderMode": "DISABLED", "tags": []any{map[string]string{"type": "ASSET_CLASS", "name": p.kind}},
		})
	}
	writeJSON(w, map[string]any{"instruments": rows, "lastTransactionID": "1"})
}

func csvSet(v string) map[string]bool {
	out := map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out[s] = true
		}
	}
	return out
}

// pairsOf resolves a required instruments parameter; "" and the pairs when
// every name is known, else the 400's message.
func (o *oandaSim) pairsOf(v string) ([]*oandaPair, string) {
	names := strings.Split(v, ",")
	if v == "" {
		return nil, invalid("instruments")
	}
	out := make([]*oandaPair, 0, len(names))
	for _, n := range names {
		p, ok := o.byName[strings.TrimSpace(n)]
		if !ok {
			return nil, invalid("instruments")
		}
		out = append(out, p)
	}
	return out, ""
}

// price is the pair's ClientPrice at now (v20 pricing-df): two buckets a
// side around the mid, closeout prices a little wider, tradeable while the
// market is open; while it is closed, the last quote before the close.
func (o *oandaSim) price(p *oandaPair, now time.Time, unix bool) map[string]any {
	qt := o.market.quoteTime(p, now)
	mid, hs := p.mid(qt), p.halfSpread()
	pip := 1.0
	for range -p.pipLocation {
		pip /= 10
	}
	tradeable := !o.market.closed(now)
	status := "tradeable"
	if !tradeable {
		status = "non-tradeable"
	}
	bucket := func(v float64, liquidity int) map[string]any {
		return map[string]any{"price": fmtPrice(v, p.precision), "liquidity": liquidity}
	}
	return map[string]any{
		"type": "PRICE", "instrument": p.name, "time": fmtOandaTime(qt, unix), "status": status, "tradeable": tradeable,
		"bids":        []any{bucket(mid-hs, 1000000), bucket(mid-hs-pip/10, 2000000)},
		"asks":        []any{bucket(mid+hs, 1000000), bucket(mid+hs+pip/10, 2000000)},
		"closeoutBid": fmtPrice(mid-hs-pip/5, p.precision), "closeoutAsk": fmtPrice(mid+hs+pip/5, p.precision),
	}
}

// pricing answers the current prices of the instruments asked; with since,
// only those that changed after it.
func (o *oandaSim) pricing(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pairs, msg := o.pairsOf(q.Get("instruments"))
	if msg != "" {
		oandaError(w, http.StatusBadRequest, msg)
		return
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := parseOandaTime(v)
		if err != nil {
			oandaError(w, http.StatusBadRequest, invalid("since"))
			return
		}
		since = t
	}
	now, unix := o.now(), r.Header.Get("Accept-Datetime-Format") == "UNIX"
	prices := make([]any, 0, len(pairs))
	for _, p := range pairs {
		if !since.IsZero() && !o.market.quoteTime(p, now).After(since) {
			continue
		}
		prices = append(prices, o.price(p, now, unix))
	}
	writeJSON(w, map[string]any{"time": fmtOandaTime(now, unix), "prices": prices})
}

// candles answers GET /v3/instruments/{instrument}/candles.
func (o *oandaSim) candles(w http.ResponseWriter, r *http.Request) {
	p, ok := o.byName[r.PathValue("instrument")]
	if !ok {
		oandaError(w, http.StatusBadRequest, invalid("instrument"))
		return
	}
	c, msg := parseOandaCandleQuery(r)
	if msg != "" {
		oandaError(w, http.StatusBadRequest, msg)
		return
	}
	bars := o.market.candles(p, c, o.now())
	rows := make([]map[string]any, len(bars))
	for i, b := range bars {
		row := map[string]any{"time": fmtOandaTime(b.open, c.unixTimes), "volume": int64(b.volume), "complete": b.complete}
		ohlc := func(shift float64, digits int) map[string]string {
			return map[string]string{"o": fmtPrice(b.o+shift, digits), "h": fmtPrice(b.h+shift, digits),
				"l": fmtPrice(b.l+shift, digits), "c": fmtPrice(b.c+shift, digits)}
		}
		if c.mid {
			row["mid"] = ohlc(0, p.precision+1) // midpoints have a digit more
		}
		if c.bid {
			row["bid"] = ohlc(-b.spread/2, p.precision)
		}
		if c.ask {
			row["ask"] = ohlc(b.spread/2, p.precision)
		}
		rows[i] = row
	}
	writeJSON(w, map[string]any{"instrument": p.name, "granularity": c.granularity, "candles": rows})
}
