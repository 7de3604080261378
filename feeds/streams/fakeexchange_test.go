package streams

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

// fakeExchange is an in-test websocket server speaking the exchanges'
// documented protocol: Binance combined streams (streams in the URL, then
// SUBSCRIBE requests answered {"result":null,"id":N}) or OKX v5 (subscribe
// requests answered per channel, text "ping" answered "pong"). It enforces
// the per-connection limits and records every breach, as the exchanges
// disconnect (and eventually ban) a client that breaks them.
type fakeExchange struct {
	t          *testing.T
	okx        bool
	maxTopics  int // per connection
	maxPerSec  int // incoming messages per second per connection
	maxRequest int // bytes per request, 0 for no bound
	srv        *httptest.Server
	serverCtx  context.Context
	stopServer context.CancelFunc

	mu        sync.Mutex
	conns     map[*fakeConn]bool
	accepted  int
	pings     int // OKX text pings received
	breaches  []string
	maxSeen   int // most topics one connection held
	maxInSec  int // most messages one connection sent within a second
	paths     map[string]int
	requested int // subscribe requests received
}

type fakeConn struct {
	ws     *websocket.Conn
	wmu    sync.Mutex // one writer at a time, as publish and answers race
	mu     sync.Mutex
	topics map[string]bool
	times  []time.Time // incoming messages
}

func newFakeBinance(t *testing.T, maxTopics, maxPerSec int) *fakeExchange {
	return startFake(t, &fakeExchange{maxTopics: maxTopics, maxPerSec: maxPerSec})
}

func newFakeOKX(t *testing.T) *fakeExchange {
	// OKX documents no per-connection message rate for public channels
	// (only 480 subscribe requests an hour); 20 a second flags a flood.
	return startFake(t, &fakeExchange{okx: true, maxTopics: okxArgs, maxPerSec: 20, maxRequest: 64 << 10})
}

func startFake(t *testing.T, f *fakeExchange) *fakeExchange {
	f.t, f.conns, f.paths = t, map[*fakeConn]bool{}, map[string]int{}
	f.serverCtx, f.stopServer = context.WithCancel(context.Background())
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.stopServer()
		f.dropAll()
		f.srv.Close()
	})
	return f
}

// url is the base URL the client is configured with.
func (f *fakeExchange) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") }

func (f *fakeExchange) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	c := &fakeConn{ws: ws, topics: map[string]bool{}}
	if s := r.URL.Query().Get("streams"); s != "" {
		f.subscribed(c, strings.Split(s, "/"))
	}
	f.mu.Lock()
	f.conns[c] = true
	f.accepted++
	f.paths[r.URL.Path]++
	f.mu.Unlock()
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
func (f *fakeExchange) countMessage(c *fakeConn) bool {
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
	f.maxInSec = max(f.maxInSec, n)
	if n > f.maxPerSec {
		f.breaches = append(f.breaches, fmt.Sprintf("%d messages within a second", n))
		return false
	}
	return true
}

func (f *fakeExchange) subscribed(c *fakeConn, topics []string) {
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

func (f *fakeExchange) binanceRequest(c *fakeConn, data []byte) {
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
	f.mu.Unlock()
	f.subscribed(c, req.Params)
	c.write(f.serverCtx, fmt.Sprintf(`{"result":null,"id":%s}`, req.ID))
}

func (f *fakeExchange) okxRequest(c *fakeConn, data []byte) {
	if string(data) == "ping" {
		f.mu.Lock()
		f.pings++
		f.mu.Unlock()
		c.write(f.serverCtx, "pong")
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
		c.write(f.serverCtx, string(b))
	}
}

func (f *fakeExchange) breach(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breaches = append(f.breaches, fmt.Sprintf(format, args...))
}

func (c *fakeConn) write(ctx context.Context, msg string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.Write(ctx, websocket.MessageText, []byte(msg))
}

func (c *fakeConn) has(topic string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topics[topic]
}

func (f *fakeExchange) snapshot() []*fakeConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*fakeConn, 0, len(f.conns))
	for c := range f.conns {
		out = append(out, c)
	}
	return out
}

// publish sends a push to every connection subscribed to topic; Binance
// pushes are wrapped as combined streams deliver them. It reports how many
// connections it reached.
func (f *fakeExchange) publish(topic, payload string) int {
	msg := payload
	if !f.okx {
		msg = fmt.Sprintf(`{"stream":%q,"data":%s}`, topic, payload)
	}
	n := 0
	for _, c := range f.snapshot() {
		if c.has(topic) {
			c.write(f.serverCtx, msg)
			n++
		}
	}
	return n
}

// allSubscribed reports whether every topic is held by some connection.
func (f *fakeExchange) allSubscribed(topics []string) bool {
	conns := f.snapshot()
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

// dropAll cuts every connection without a close handshake, as a network
// failure does.
func (f *fakeExchange) dropAll() {
	for _, c := range f.snapshot() {
		_ = c.ws.CloseNow()
	}
}

// pingAll pings every connection; websocket.Conn.Ping returns once the pong
// with the same payload has come back.
func (f *fakeExchange) pingAll(ctx context.Context) error {
	for _, c := range f.snapshot() {
		if err := c.ws.Ping(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeExchange) pathCount(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paths[path]
}

func (f *fakeExchange) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requested
}

func (f *fakeExchange) stats() (accepted, maxTopics, maxInSec, pings int, breaches []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, f.maxSeen, f.maxInSec, f.pings, append([]string(nil), f.breaches...)
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
