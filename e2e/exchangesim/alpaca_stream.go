package exchangesim

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The stock market-data websocket, /v2/{feed} with feed iex, sip,
// delayed_sip or test ([docs-stream]). Messages are JSON text frames,
// each an array; control messages (success, error, subscription) come
// one to an array ([docs-md] realtime.md, "Message format"). Data points
// come up to 100 to a frame (chosen). MessagePack, which Alpaca's SDKs
// ask for with a Content-Type header, is not spoken: the simulator
// answers JSON (chosen).

// streamChannels are the channels a subscribe message may name ([sdk-go]
// marketdata/stream/message.go handleSubscriptionMessage); corrections and
// cancelErrors follow trades ("Subscribed automatically with trades",
// [sdk-go] flow_test.go).
var streamChannels = []string{"trades", "quotes", "bars", "updatedBars", "dailyBars", "statuses", "lulds", "imbalances"}

// The error messages, documented with their codes in [docs-md]
// realtime.md and [sdk-go] errors.go.
const (
	codeInvalidSyntax      = 400 // "invalid syntax"
	codeNotAuthenticated   = 401 // "not authenticated"
	codeAuthFailed         = 402 // "auth failed"
	codeAlreadyAuth        = 403 // "already authenticated"
	codeAuthTimeout        = 404 // "auth timeout"
	codeSymbolLimit        = 405 // "symbol limit exceeded"
	codeConnectionLimit    = 406 // "connection limit exceeded"
	codeSlowClient         = 407 // "slow client"
	codeInsufficientSubscr = 409 // "insufficient subscription"
)

var streamErrorText = map[int]string{
	codeInvalidSyntax: "invalid syntax", codeNotAuthenticated: "not authenticated", codeAuthFailed: "auth failed",
	codeAlreadyAuth: "already authenticated", codeAuthTimeout: "auth timeout", codeSymbolLimit: "symbol limit exceeded",
	codeConnectionLimit: "connection limit exceeded", codeSlowClient: "slow client",
	codeInsufficientSubscr: "insufficient subscription",
}

// testSymbol is the test stream's symbol, trading at all hours ([docs-stream]:
// "Use the symbol FAKEPACA when trying out this test stream").
const testSymbol = "FAKEPACA"

// alpacaStreams serves the websocket and pushes what is subscribed.
type alpacaStreams struct {
	a        *alpacaSim
	fake     *symbol // FAKEPACA: a Binance-style all-hours price path
	stop     chan struct{}
	stopOnce sync.Once
	loopOnce sync.Once

	mu            sync.Mutex
	conns         map[*alpacaConn]bool
	sessions      map[string]int // authenticated connections by key and feed
	accepted      int64
	authenticated int64
	refused       int64
	received      int64
	pushed        int64
	frames        int64
	errors        map[int]int64
}

func newAlpacaStreams(a *alpacaSim) *alpacaStreams {
	return &alpacaStreams{a: a, stop: make(chan struct{}), conns: map[*alpacaConn]bool{}, sessions: map[string]int{},
		errors: map[int]int64{}, fake: &symbol{name: testSymbol, price0: 100, seed: hashString(testSymbol)}}
}

// alpacaConn is one websocket connection.
type alpacaConn struct {
	st    *alpacaStreams
	ws    *websocket.Conn
	feed  string
	out   chan []byte
	done  chan struct{}
	once  sync.Once
	close func() // ends the connection once

	mu     sync.Mutex
	key    string
	authed bool
	subs   map[string][]string // channel → sorted symbols, "*" for all
}

// serve upgrades a connection, welcomes it, authenticates it from its
// headers when it sent them ([docs-stream]: "You can set the same headers
// used for the historical market data and trading endpoints"), and
// otherwise gives it AuthTimeout to send an auth message.
func (st *alpacaStreams) serve(w http.ResponseWriter, r *http.Request) {
	feed := r.PathValue("feed")
	switch feed {
	case "iex", "sip", "delayed_sip", "test":
	default:
		http.NotFound(w, r)
		return
	}
	// Compression per RFC 7692, as documented ([docs-md] realtime.md).
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover})
	if err != nil {
		return
	}
	ws.SetReadLimit(4 << 20) // a subscription can list thousands of symbols
	ctx, cancel := context.WithCancel(context.Background())
	c := &alpacaConn{st: st, ws: ws, feed: feed, out: make(chan []byte, 256), done: make(chan struct{}), subs: map[string][]string{}}
	c.close = func() {
		c.once.Do(func() {
			close(c.done)
			cancel()
			st.drop(c)
			go func() { _ = ws.Close(websocket.StatusNormalClosure, "") }()
		})
	}
	st.mu.Lock()
	st.conns[c] = true
	st.accepted++
	st.mu.Unlock()
	st.loopOnce.Do(func() { go st.pushLoop(st.a.now()) }) // from now: what is pushed is what happens after
	go c.writeLoop(ctx)
	c.control(map[string]any{"T": "success", "msg": "connected"})
	if key, secret := r.Header.Get("APCA-API-KEY-ID"), r.Header.Get("APCA-API-SECRET-KEY"); key != "" || secret != "" {
		c.auth(key, secret)
	}
	timer := time.AfterFunc(st.a.cfg.AuthTimeout, func() {
		if !c.isAuthed() {
			c.fail(codeAuthTimeout)
			st.countRefused()
			time.AfterFunc(100*time.Millisecond, c.close) // let the error out first
		}
	})
	defer timer.Stop()
	defer c.close()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		st.mu.Lock()
		st.received++
		st.mu.Unlock()
		c.handle(data)
	}
}

// drop forgets a closed connection and frees its session.
func (st *alpacaStreams) drop(c *alpacaConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.conns, c)
	c.mu.Lock()
	if c.authed {
		st.sessions[c.key+"|"+c.feed]--
	}
	c.mu.Unlock()
}

func (st *alpacaStreams) countRefused() {
	st.mu.Lock()
	st.refused++
	st.mu.Unlock()
}

func (c *alpacaConn) writeLoop(ctx context.Context) {
	for {
		select {
		case <-c.done:
			return
		case b := <-c.out:
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.ws.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				c.close()
				return
			}
		}
	}
}

// send queues a frame. A client too slow to drain its queue gets the
// documented slow-client error and is disconnected ([docs-md]
// realtime.md: "slow clients may get disconnected if their buffer
// becomes full").
func (c *alpacaConn) send(frame []byte) {
	select {
	case c.out <- frame:
	case <-c.done:
	default:
		c.st.count(codeSlowClient)
		c.st.countRefused()
		b, _ := json.Marshal([]any{map[string]any{"T": "error", "code": codeSlowClient, "msg": streamErrorText[codeSlowClient]}})
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = c.ws.Write(ctx, websocket.MessageText, b)
			c.close()
		}()
	}
}

// control sends one control message, alone in its array.
func (c *alpacaConn) control(v any) {
	b, _ := json.Marshal([]any{v})
	c.send(b)
}

func (c *alpacaConn) fail(code int) {
	c.st.count(code)
	c.control(map[string]any{"T": "error", "code": code, "msg": streamErrorText[code]})
}

func (st *alpacaStreams) count(code int) {
	st.mu.Lock()
	st.errors[code]++
	st.mu.Unlock()
}

func (c *alpacaConn) isAuthed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authed
}

func (c *alpacaConn) handle(data []byte) {
	var msg map[string]json.RawMessage
	var action string
	if json.Unmarshal(data, &msg) != nil || json.Unmarshal(msg["action"], &action) != nil {
		c.fail(codeInvalidSyntax)
		return
	}
	switch action {
	case "auth":
		var key, secret string
		_ = json.Unmarshal(msg["key"], &key)
		_ = json.Unmarshal(msg["secret"], &secret)
		c.auth(key, secret)
	case "subscribe", "unsubscribe":
		c.subscribe(action == "subscribe", msg)
	default:
		c.fail(codeInvalidSyntax)
	}
}

// auth checks the credentials, the plan's feeds (sip needs the paid plan:
// "Any attempt to access a data feed not available for your subscription
// will result in an error during authentication", [docs-stream]) and the
// connections per key and endpoint ("in most subscriptions … this limit
// is 1", [docs-stream]). After a 406 the connection stays open and may
// authenticate again, as Alpaca's Go SDK retries on the same connection
// ([sdk-go] flow.go); after a 409 it is closed (chosen).
func (c *alpacaConn) auth(key, secret string) {
	st := c.st
	if c.isAuthed() {
		c.fail(codeAlreadyAuth)
		return
	}
	k, ok := st.a.authorize(key, secret)
	if !ok {
		c.fail(codeAuthFailed)
		return
	}
	if c.feed == "sip" && st.a.cfg.Plan != AlpacaPaid {
		c.fail(codeInsufficientSubscr)
		st.countRefused()
		time.AfterFunc(100*time.Millisecond, c.close)
		return
	}
	st.mu.Lock()
	if st.sessions[k+"|"+c.feed] >= st.a.cfg.StreamConnections {
		st.mu.Unlock()
		c.fail(codeConnectionLimit)
		return
	}
	st.sessions[k+"|"+c.feed]++
	st.authenticated++
	c.mu.Lock()
	c.key, c.authed = k, true
	c.mu.Unlock()
	st.mu.Unlock()
	c.control(map[string]any{"T": "success", "msg": "authenticated"})
}

// subscribe adds or removes symbols and answers with every current
// subscription ([docs-md] realtime.md, "Subscription confirmation"). A
// subscribe that would pass the plan's symbol limit (distinct symbols
// over every channel; "*" counts as all) is refused 405 and changes
// nothing, as documented.
func (c *alpacaConn) subscribe(add bool, msg map[string]json.RawMessage) {
	if !c.isAuthed() {
		c.fail(codeNotAuthenticated)
		return
	}
	changes := map[string][]string{}
	for _, ch := range streamChannels {
		raw, ok := msg[ch]
		if !ok {
			continue
		}
		var syms []string
		if json.Unmarshal(raw, &syms) != nil {
			c.fail(codeInvalidSyntax)
			return
		}
		changes[ch] = syms
	}
	if len(changes) == 0 {
		c.fail(codeInvalidSyntax)
		return
	}
	c.mu.Lock()
	next := map[string][]string{}
	for _, ch := range streamChannels {
		cur := slices.Clone(c.subs[ch])
		for _, s := range changes[ch] {
			if add && !slices.Contains(cur, s) {
				cur = append(cur, s)
			} else if !add {
				cur = slices.DeleteFunc(cur, func(x string) bool { return x == s })
			}
		}
		slices.Sort(cur)
		next[ch] = cur
	}
	if limit := c.st.a.cfg.StreamSymbols; add && limit > 0 && distinctSymbols(next) > limit {
		c.mu.Unlock()
		c.fail(codeSymbolLimit)
		return
	}
	c.subs = next
	ack := map[string]any{"T": "subscription", "corrections": orEmpty(next["trades"]), "cancelErrors": orEmpty(next["trades"])}
	for ch, syms := range next {
		ack[ch] = orEmpty(syms)
	}
	c.mu.Unlock()
	c.control(ack)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func distinctSymbols(subs map[string][]string) int {
	seen := map[string]bool{}
	for _, syms := range subs {
		for _, s := range syms {
			if s == "*" {
				return math.MaxInt
			}
			seen[s] = true
		}
	}
	return len(seen)
}

// pushLoop drives the pushes from Config.Now: a pass every 100 ms (or on
// each Config.Alpaca.Tick), so a minute's bar goes out within 100 ms of
// its close, as Alpaca's do ("typically received 20-100ms after the end
// of the bar", [forum] 8947).
func (st *alpacaStreams) pushLoop(last time.Time) {
	ticks := st.a.cfg.Tick
	if ticks == nil {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		ticks = t.C
	}
	for {
		var now time.Time
		select {
		case <-st.stop:
			return
		case at := <-ticks:
			now = st.a.now()
			if st.a.cfg.Tick != nil {
				now = at // a test's step: the pass runs at the time it sent
			}
		}
		if now.After(last) {
			st.mu.Lock()
			conns := make([]*alpacaConn, 0, len(st.conns))
			for c := range st.conns {
				conns = append(conns, c)
			}
			st.mu.Unlock()
			for _, c := range conns {
				if c.isAuthed() {
					c.push(last, now)
				}
			}
		}
		last = now
	}
}

// push sends what happened in (last, now] on the connection's feed: for
// each minute that closed, the minute bar (b), its last trade (t) and
// quote (q), and the day's bar so far (d); for each minute whose
// correction came out, the updated bar (u: "a new updated bar is streamed
// 30 seconds later … It will have the same timestamp as the original
// bar", [forum] 8947). delayed_sip runs 15 minutes late. A clock jump
// replays at most three minutes (chosen).
func (c *alpacaConn) push(last, now time.Time) {
	f, lag := feedIEX, time.Duration(0)
	switch c.feed {
	case "sip":
		f = feedSIP
	case "delayed_sip":
		f, lag = feedSIP, 15*time.Minute
	}
	from, to := last.Add(-lag), now.Add(-lag)
	if to.Sub(from) > 3*time.Minute {
		from = to.Add(-3 * time.Minute)
	}
	c.mu.Lock()
	subs := c.subs
	c.mu.Unlock()
	var points []any
	for m := from.Truncate(time.Minute); !m.Add(time.Minute).After(to); m = m.Add(time.Minute) {
		if m.Add(time.Minute).After(from) {
			points = append(points, c.minutePoints(subs, f, m, to, false)...)
		}
	}
	for m := from.Add(-updatedAfter).Truncate(time.Minute); !m.Add(updatedAfter).After(to); m = m.Add(time.Minute) {
		if m.Add(updatedAfter).After(from) {
			points = append(points, c.minutePoints(subs, f, m, to, true)...)
		}
	}
	for chunk := range slices.Chunk(points, 100) {
		b, _ := json.Marshal(chunk)
		c.send(b)
		c.st.mu.Lock()
		c.st.pushed += int64(len(chunk))
		c.st.frames++
		c.st.mu.Unlock()
	}
}

// streamBar is a bar message ([docs-md] realtime.md, "Minute Bar
// Schema", with n and vw as [sdk-go] decodes them).
type streamBar struct {
	Type   string  `json:"T"`
	Symbol string  `json:"S"`
	O      float64 `json:"o"`
	H      float64 `json:"h"`
	L      float64 `json:"l"`
	C      float64 `json:"c"`
	V      int64   `json:"v"`
	Time   string  `json:"t"`
	N      int64   `json:"n"`
	VW     float64 `json:"vw"`
}

func streamBarOf(kind, symbol string, b stockBar) streamBar {
	return streamBar{Type: kind, Symbol: symbol, O: b.o, H: b.h, L: b.l, C: b.c, V: b.v,
		Time: b.t.UTC().Format(time.RFC3339), N: b.n, VW: b.vw}
}

type streamTrade struct {
	Type   string `json:"T"`
	Symbol string `json:"S"`
	tradeJSON
}

type streamQuote struct {
	Type   string `json:"T"`
	Symbol string `json:"S"`
	quoteJSON
}

// minutePoints are the data points of minute m for the subscriptions:
// the closing messages, or the updated bars.
func (c *alpacaConn) minutePoints(subs map[string][]string, f feedKind, m, now time.Time, updated bool) []any {
	if c.feed == "test" {
		if updated {
			return nil
		}
		return c.testPoints(subs, m, now)
	}
	st := c.st
	wants := func(ch, sym string) bool {
		s := subs[ch]
		return slices.Contains(s, "*") || slices.Contains(s, sym)
	}
	var syms []string
	channels := []string{"bars", "trades", "quotes", "dailyBars"}
	if updated {
		channels = []string{"updatedBars"}
	}
	all := false
	for _, ch := range channels {
		for _, s := range subs[ch] {
			if s == "*" {
				all = true
			} else {
				syms = append(syms, s)
			}
		}
	}
	if all {
		syms = syms[:0]
		for _, e := range st.a.universe.list {
			if e.asset.Status == "active" {
				syms = append(syms, e.asset.Symbol)
			}
		}
	}
	slices.Sort(syms)
	syms = slices.Compact(syms)
	var out []any
	d := dayOf(m)
	for _, sym := range syms {
		e, ok := st.a.universe.bySymbol[sym]
		if !ok {
			continue
		}
		dm, ok := st.a.market.model(e, d)
		if !ok {
			continue
		}
		k := int(m.Sub(dm.start) / time.Minute)
		if m.Before(dm.start) || !dm.active(k, f) {
			continue
		}
		b := dm.minuteBar(k, dm.lastActiveBefore(k, f), f, now)
		if updated {
			if dm.late(k) && wants("updatedBars", sym) {
				out = append(out, streamBarOf("u", sym, b))
			}
			continue
		}
		trade, at := lastTrade(e, f, b)
		if wants("trades", sym) {
			out = append(out, streamTrade{Type: "t", Symbol: sym, tradeJSON: trade})
		}
		if wants("quotes", sym) {
			out = append(out, streamQuote{Type: "q", Symbol: sym, quoteJSON: quoteAt(e, f, b.c, at)})
		}
		if wants("bars", sym) {
			out = append(out, streamBarOf("b", sym, b))
		}
		if wants("dailyBars", sym) {
			if db, ok := dm.daily(f, now); ok {
				out = append(out, streamBarOf("d", sym, db))
			}
		}
	}
	return out
}

// testPoints are the test stream's: FAKEPACA trades every minute of
// every day.
func (c *alpacaConn) testPoints(subs map[string][]string, m, now time.Time) []any {
	var out []any
	k := c.st.fake.candleAt(m, interval{"1m", time.Minute}, now)
	b := stockBar{t: m, o: k.o, h: k.h, l: k.l, c: k.c, v: int64(k.volume) + 1, n: k.trades, vw: (k.o + k.h + k.l + k.c) / 4}.rounded()
	for _, ch := range []string{"trades", "bars"} {
		if !slices.Contains(subs[ch], testSymbol) && !slices.Contains(subs[ch], "*") {
			continue
		}
		if ch == "bars" {
			out = append(out, streamBarOf("b", testSymbol, b))
			continue
		}
		trade := tradeJSON{T: m.Add(59 * time.Second).UTC().Format(time.RFC3339Nano), X: "V", P: b.c, S: 100,
			C: []string{"@"}, I: m.Unix(), Z: "C"}
		out = append(out, streamTrade{Type: "t", Symbol: testSymbol, tradeJSON: trade})
	}
	return out
}

// AlpacaStreamStats count the websocket's traffic.
type AlpacaStreamStats struct {
	Connections   int64 `json:"connections"` // accepted
	Authenticated int64 `json:"authenticated"`
	Open          int   `json:"open"`
	// Refused counts connections the server ended: auth timeout,
	// insufficient subscription, slow client.
	Refused  int64 `json:"refused"`
	Received int64 `json:"received"` // client messages
	Pushed   int64 `json:"pushed"`   // data points
	Frames   int64 `json:"frames"`   // data frames
	// Errors counts the error messages sent, by Alpaca's code.
	Errors map[string]int64 `json:"errors"`
}

func (st *alpacaStreams) stats() AlpacaStreamStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	errs := make(map[string]int64, len(st.errors))
	for code, n := range st.errors {
		errs[strconv.Itoa(code)] = n
	}
	return AlpacaStreamStats{Connections: st.accepted, Authenticated: st.authenticated, Open: len(st.conns),
		Refused: st.refused, Received: st.received, Pushed: st.pushed, Frames: st.frames, Errors: errs}
}

// close stops the pushes and drops every connection.
func (st *alpacaStreams) close() {
	st.stopOnce.Do(func() { close(st.stop) })
	st.mu.Lock()
	conns := make([]*alpacaConn, 0, len(st.conns))
	for c := range st.conns {
		conns = append(conns, c)
	}
	st.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}
