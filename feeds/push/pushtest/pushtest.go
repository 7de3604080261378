// Package pushtest is an in-process exchange websocket server for tests:
// it speaks the documented protocols of Binance's combined streams and OKX's
// v5 public channels, enforces their per-connection limits and records every
// breach.
package pushtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Exchange is a websocket server speaking the exchanges'
// documented protocol: Binance combined streams (streams in the URL, then
// SUBSCRIBE requests answered {"result":null,"id":N}) or OKX v5 (subscribe
// requests answered per channel, text "ping" answered "pong"). It enforces
// the per-connection limits and records every breach, as the exchanges
// disconnect (and eventually ban) a client that breaks them.
type Exchange struct {
	okx        bool
	maxTopics  int // per connection
	maxPerSec  int // incoming messages per second per connection
	maxRequest int // bytes per request, 0 for no bound
	srv        *httptest.Server
	serverCtx  context.Context
	stopServer context.CancelFunc

	mu        sync.Mutex
	conns     map[*Conn]bool
	accepted  int
	pings     int // OKX text pings received
	breaches  []string
	maxSeen   int // most topics one connection held
	maxInSec  int // most messages one connection sent within a second
	paths     map[string]int
	requested int   // subscribe requests received
	received  int64 // incoming messages
	pushed    int64 // pushes written
	cutAfter  time.Duration
	held      chan struct{} // while open, Binance SUBSCRIBE requests wait unanswered
}

// okxArg is one channel of an OKX subscribe request.
type okxArg struct {
	Channel string `json:"channel"`
	InstID  string `json:"instId"`
}

// Conn is one accepted connection.
type Conn struct {
	ws     *websocket.Conn
	wmu    sync.Mutex // one writer at a time, as publish and answers race
	mu     sync.Mutex
	topics map[string]bool
	times  []time.Time // incoming messages
}

// Binance returns a Binance combined-streams handler allowing maxTopics
// streams and maxPerSec incoming messages a second per connection (spot:
// 1,024 and 5; USDⓈ-M: 200 and 10), for a simulator to mount on its own
// server; Close ends its connections.
func Binance(maxTopics, maxPerSec int) *Exchange {
	return newExchange(&Exchange{maxTopics: maxTopics, maxPerSec: maxPerSec})
}

// OKX returns an OKX v5 handler (candles and tickers alike, on any path).
func OKX() *Exchange {
	// OKX documents no per-connection message rate for public channels
	// (only 480 subscribe requests an hour); 20 a second flags a flood.
	return newExchange(&Exchange{okx: true, maxTopics: 1000, maxPerSec: 20, maxRequest: 64 << 10})
}

// CutAfter makes the server close every connection d after it was
// accepted, as the exchanges cut connections at 24 h; call it before
// serving.
func (f *Exchange) CutAfter(d time.Duration) *Exchange {
	f.cutAfter = d
	return f
}

// NewBinance serves Binance(maxTopics, maxPerSec) until the test ends.
func NewBinance(t *testing.T, maxTopics, maxPerSec int) *Exchange {
	return start(t, Binance(maxTopics, maxPerSec))
}

// NewOKX serves OKX() until the test ends.
func NewOKX(t *testing.T) *Exchange { return start(t, OKX()) }

func newExchange(f *Exchange) *Exchange {
	f.conns, f.paths = map[*Conn]bool{}, map[string]int{}
	f.serverCtx, f.stopServer = context.WithCancel(context.Background())
	return f
}

func start(t *testing.T, f *Exchange) *Exchange {
	f.srv = httptest.NewServer(f)
	t.Cleanup(func() {
		f.Close()
		f.srv.Close()
	})
	return f
}

// Close drops every connection and refuses to serve on.
func (f *Exchange) Close() {
	f.stopServer()
	f.DropAll()
}

// URL is the base URL (ws://) of the test server a client is configured with.
func (f *Exchange) URL() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") }

// ServeHTTP accepts a websocket connection and speaks the protocol on it.
func (f *Exchange) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.serve(w, r) }

func (f *Exchange) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	c := &Conn{ws: ws, topics: map[string]bool{}}
	if s := r.URL.Query().Get("streams"); s != "" {
		f.subscribed(c, strings.Split(s, "/"))
	}
	f.mu.Lock()
	f.conns[c] = true
	f.accepted++
	f.paths[r.URL.Path]++
	f.mu.Unlock()
	if f.cutAfter > 0 {
		cut := time.AfterFunc(f.cutAfter, func() { _ = ws.CloseNow() })
		defer cut.Stop()
	}
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		_ = ws.CloseNow()
	}()
	for {
		_, data, err := ws.Read(f.serverCtx)
		if err != nil {
			return
		}
		if !f.countMessage(c) {
			_ = ws.Close(websocket.StatusPolicyViolation, "too many messages")
			return
		}
		if f.maxRequest > 0 && len(data) > f.maxRequest {
			f.breach("request of %d bytes", len(data))
		}
		if f.okx {
			f.okxRequest(c, data)
		} else {
			f.binanceRequest(c, data)
		}
	}
}

// countMessage records an incoming message; false when it breaks the
// per-second limit.
func (f *Exchange) countMessage(c *Conn) bool {
	now := time.Now()
	c.mu.Lock()
	c.times = append(c.times, now)
	n := 0
	for _, t := range c.times {
		if now.Sub(t) < time.Second {
			n++
		}
	}
	c.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received++
	f.maxInSec = max(f.maxInSec, n)
	if n > f.maxPerSec {
		f.breaches = append(f.breaches, fmt.Sprintf("%d messages within a second", n))
		return false
	}
	return true
}

func (f *Exchange) subscribed(c *Conn, topics []string) {
	c.mu.Lock()
	for _, t := range topics {
		c.topics[t] = true
	}
	n := len(c.topics)
	c.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxSeen = max(f.maxSeen, n)
	if n > f.maxTopics {
		f.breaches = append(f.breaches, fmt.Sprintf("%d topics on one connection", n))
	}
}

func (f *Exchange) binanceRequest(c *Conn, data []byte) {
	var req struct {
		Method string          `json:"method"`
		Params []string        `json:"params"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &req) != nil || req.Method != "SUBSCRIBE" {
		f.breach("unexpected request %s", data)
		return
	}
	f.mu.Lock()
	f.requested++
	held := f.held
	f.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-f.serverCtx.Done():
			return
		}
	}
	f.subscribed(c, req.Params)
	c.Write(f.serverCtx, fmt.Sprintf(`{"result":null,"id":%s}`, req.ID))
}

// HoldSubscriptions keeps Binance SUBSCRIBE requests received from now on
// unapplied and unanswered (as a loaded exchange answers late) until the
// returned release is called.
func (f *Exchange) HoldSubscriptions() (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.held = ch
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.held = nil
			f.mu.Unlock()
			close(ch)
		})
	}
}

func (f *Exchange) okxRequest(c *Conn, data []byte) {
	if string(data) == "ping" {
		f.mu.Lock()
		f.pings++
		f.mu.Unlock()
		c.Write(f.serverCtx, "pong")
		return
	}
	var req struct {
		Op   string   `json:"op"`
		Args []okxArg `json:"args"`
	}
	if json.Unmarshal(data, &req) != nil || req.Op != "subscribe" {
		f.breach("unexpected request %s", data)
		return
	}
	f.mu.Lock()
	f.requested++
	f.mu.Unlock()
	keys := make([]string, len(req.Args))
	for i, a := range req.Args {
		keys[i] = a.Channel + ":" + a.InstID
	}
	f.subscribed(c, keys)
	for _, a := range req.Args {
		b, _ := json.Marshal(map[string]any{"event": "subscribe", "arg": a, "connId": "a4d3ae55"})
		c.Write(f.serverCtx, string(b))
	}
}

func (f *Exchange) breach(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breaches = append(f.breaches, fmt.Sprintf(format, args...))
}

// Write sends a text message on the connection.
func (c *Conn) Write(ctx context.Context, msg string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.Write(ctx, websocket.MessageText, []byte(msg))
}

func (c *Conn) has(topic string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topics[topic]
}

// Conns lists the open connections.
func (f *Exchange) Conns() []*Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Conn, 0, len(f.conns))
	for c := range f.conns {
		out = append(out, c)
	}
	return out
}

// Publish sends a push to every connection subscribed to topic; Binance
// pushes are wrapped as combined streams deliver them. It reports how many
// connections it reached.
func (f *Exchange) Publish(topic, payload string) int {
	msg := payload
	if !f.okx {
		msg = fmt.Sprintf(`{"stream":%q,"data":%s}`, topic, payload)
	}
	n := 0
	for _, c := range f.Conns() {
		if c.has(topic) {
			c.Write(f.serverCtx, msg)
			n++
		}
	}
	f.mu.Lock()
	f.pushed += int64(n)
	f.mu.Unlock()
	return n
}

// Topics lists the topics some connection holds, each once.
func (f *Exchange) Topics() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range f.Conns() {
		c.mu.Lock()
		for t := range c.topics {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
		c.mu.Unlock()
	}
	return out
}

// Traffic is the connections open now, the incoming messages received and
// the pushes written since the server started.
func (f *Exchange) Traffic() (open int, received, pushed int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns), f.received, f.pushed
}

// AllSubscribed reports whether every topic is held by some connection.
func (f *Exchange) AllSubscribed(topics []string) bool {
	conns := f.Conns()
	for _, t := range topics {
		found := false
		for _, c := range conns {
			if c.has(t) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// DropAll cuts every connection without a close handshake, as a network
// failure does.
func (f *Exchange) DropAll() {
	for _, c := range f.Conns() {
		_ = c.ws.CloseNow()
	}
}

// PingAll pings every connection; websocket.Conn.Ping returns once the pong
// with the same payload has come back.
func (f *Exchange) PingAll(ctx context.Context) error {
	for _, c := range f.Conns() {
		if err := c.ws.Ping(ctx); err != nil {
			return err
		}
	}
	return nil
}

// PathCount is how many connections were accepted on path.
func (f *Exchange) PathCount(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paths[path]
}

// Requests is how many subscribe requests were received.
func (f *Exchange) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requested
}

// Stats are the connections accepted, the most topics one connection held,
// the most messages one connection sent within a second, the OKX text pings
// received and the limit breaches seen.
func (f *Exchange) Stats() (accepted, maxTopics, maxInSec, pings int, breaches []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, f.maxSeen, f.maxInSec, f.pings, append([]string(nil), f.breaches...)
}

// Eventually polls cond until it holds or a generous deadline passes.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
