package exchangesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds/push/pushtest"
)

// streamMsg is any message of the Alpaca stream.
type streamMsg struct {
	T    string          `json:"T"`
	Msg  string          `json:"msg"`
	Code int             `json:"code"`
	S    string          `json:"S"`
	O    float64         `json:"o"`
	H    float64         `json:"h"`
	L    float64         `json:"l"`
	RawC json.RawMessage `json:"c"` // a bar's close, a trade's conditions
	V    int64           `json:"v"`
	N    int64           `json:"n"`
	VW   float64         `json:"vw"`
	Time string          `json:"t"`
	P    float64         `json:"p"`
	Size int64           `json:"s"` // a trade's size: without it "s" would land in S
	Bars []string        `json:"bars"`

	Trades      []string `json:"trades"`
	Quotes      []string `json:"quotes"`
	Corrections []string `json:"corrections"`
}

// close is a bar's close.
func (m streamMsg) close() float64 {
	var c float64
	_ = json.Unmarshal(m.RawC, &c)
	return c
}

// streamSim serves a simulator whose pushes the returned channel drives.
func streamSim(t *testing.T, clock *testClock, cfg exchangesim.AlpacaConfig) (*exchangesim.Sim, string, chan<- time.Time) {
	t.Helper()
	ticks := make(chan time.Time)
	cfg.Tick = ticks
	sim := alpaca(clock, cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	return sim, "ws" + strings.TrimPrefix(srv.URL, "http"), ticks
}

type streamConn struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialStream(t *testing.T, url string, header http.Header) *streamConn {
	t.Helper()
	ws, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(8 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &streamConn{t: t, ws: ws}
}

func (c *streamConn) send(v string) {
	c.t.Helper()
	if err := c.ws.Write(context.Background(), websocket.MessageText, []byte(v)); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next frame's messages.
func (c *streamConn) read() []streamMsg {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var msgs []streamMsg
	if err := json.Unmarshal(b, &msgs); err != nil {
		c.t.Fatalf("frame %s: %v", b, err)
	}
	return msgs
}

// expect reads one control message of type typ carrying msg or code.
func (c *streamConn) expect(typ, msg string, code int) streamMsg {
	c.t.Helper()
	msgs := c.read()
	if len(msgs) != 1 || msgs[0].T != typ || msgs[0].Msg != msg || msgs[0].Code != code {
		c.t.Fatalf("got %+v, want one %s message %q (code %d)", msgs, typ, msg, code)
	}
	return msgs[0]
}

// closed waits for the server to close the connection.
func (c *streamConn) closed() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := c.ws.Read(ctx)
	return err != nil && ctx.Err() == nil
}

func (c *streamConn) login(key, secret string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"action":"auth","key":%q,"secret":%q}`, key, secret))
	c.expect("success", "authenticated", 0)
}

// TestAlpacaStreamPushesBars: the documented handshake, a subscription
// confirmed with every list, then after a minute closes on the
// simulator's clock its bar (equal to the REST minute bar), the trade
// and the day's bar; delayed_sip gets the minute of 15 minutes before.
func TestAlpacaStreamPushesBars(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday} // 15:10:30Z
	sim, url, ticks := streamSim(t, clock, exchangesim.AlpacaConfig{})
	c := dialStream(t, url+"/v2/iex", nil)
	c.expect("success", "connected", 0)
	c.login("key", "secret")
	c.send(`{"action":"subscribe","bars":["SPY","AAPL"],"dailyBars":["AAPL"],"trades":["AAPL"]}`)
	sub := c.expect("subscription", "", 0)
	if strings.Join(sub.Bars, ",") != "AAPL,SPY" || strings.Join(sub.Trades, ",") != "AAPL" ||
		strings.Join(sub.Corrections, ",") != "AAPL" || sub.Quotes == nil || len(sub.Quotes) != 0 {
		t.Errorf("subscription %+v: want bars AAPL,SPY, trades and corrections AAPL, quotes []", sub)
	}
	delayed := dialStream(t, url+"/v2/delayed_sip", nil)
	delayed.expect("success", "connected", 0)
	delayed.login("key", "secret")
	delayed.send(`{"action":"subscribe","bars":["AAPL"]}`)
	delayed.expect("subscription", "", 0)

	clock.Set(time.Date(2026, 11, 24, 15, 11, 0, 50e6, time.UTC))
	ticks <- clock.Now()
	got := map[string]streamMsg{}
	for _, m := range c.read() {
		got[m.T+":"+m.S] = m
	}
	rest := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?symbols=AAPL,SPY&timeframe=1Min&start=2026-11-24T15:10:00Z"))
	for _, s := range []string{"AAPL", "SPY"} {
		b, r := got["b:"+s], rest.Bars[s][0]
		if b.Time != "2026-11-24T15:10:00Z" || b.O != r.O || b.H != r.H || b.L != r.L || b.close() != r.C || b.V != r.V || b.N != r.N || b.VW != r.VW {
			t.Errorf("%s pushed bar %+v, want the REST minute bar %+v", s, b, r)
		}
	}
	if tr, d := got["t:AAPL"], got["d:AAPL"]; tr.P != got["b:AAPL"].close() || d.Time != "2026-11-24T05:00:00Z" || d.close() != tr.P || len(got) != 4 {
		t.Errorf("pushed %v: want AAPL's and SPY's bars, AAPL's trade at the bar's close and its day bar so far", got)
	}
	if late := delayed.read(); len(late) != 1 || late[0].T != "b" || late[0].Time != "2026-11-24T14:55:00Z" {
		t.Errorf("delayed_sip pushed %+v, want the 14:55 bar", late)
	}
	if st := sim.Stats().Alpaca.Stream; st.Connections != 2 || st.Authenticated != 2 || st.Pushed != 5 || st.Frames != 2 {
		t.Errorf("stream stats %+v: want 2 connections, 5 data points in 2 frames", st)
	}
}

// TestAlpacaStreamUpdatedBars: 30 seconds after a minute bar, the bars a
// late trade changed come again as updated bars (same timestamp, more
// volume), equal to REST's bar from then on.
func TestAlpacaStreamUpdatedBars(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim, url, ticks := streamSim(t, clock, exchangesim.AlpacaConfig{Plan: exchangesim.AlpacaPaid, Assets: 500})
	c := dialStream(t, url+"/v2/sip", nil)
	c.expect("success", "connected", 0)
	c.login("key", "secret")
	c.send(`{"action":"subscribe","bars":["*"],"updatedBars":["*"]}`)
	c.expect("subscription", "", 0)
	for _, at := range []time.Time{ // the 15:10 bars, their corrections, the 15:11 bars
		time.Date(2026, 11, 24, 15, 11, 0, 50e6, time.UTC),
		time.Date(2026, 11, 24, 15, 11, 30, 50e6, time.UTC),
		time.Date(2026, 11, 24, 15, 12, 0, 50e6, time.UTC),
	} {
		clock.Set(at)
		ticks <- at
	}
	bars, updated := map[string]streamMsg{}, map[string]streamMsg{}
	for done := false; !done; {
		for _, m := range c.read() {
			switch {
			case m.T == "b" && m.Time == "2026-11-24T15:11:00Z":
				done = true
			case m.T == "b":
				bars[m.S] = m
			case m.T == "u":
				updated[m.S] = m
			}
		}
	}
	if len(bars) < 300 || len(updated) == 0 || len(updated) > len(bars)/10 {
		t.Fatalf("%d bars, %d updated: want every traded symbol's bar and a few corrections", len(bars), len(updated))
	}
	for s, u := range updated {
		b := bars[s]
		if u.Time != b.Time || u.O != b.O || u.H != b.H || u.L != b.L || u.close() != b.close() || u.V <= b.V {
			t.Errorf("%s: updated %+v after bar %+v: want the same bar with the late trade's volume", s, u, b)
		}
		r := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?feed=sip&timeframe=1Min&start=2026-11-24T15:10:00Z&end=2026-11-24T15:10:00Z&symbols="+s)).Bars[s][0]
		if r.V != u.V || r.N != u.N || r.VW != u.VW {
			t.Errorf("%s: REST bar %+v after the correction, want the updated %+v", s, r, u)
		}
	}
}

// TestAlpacaStreamErrors: the documented errors and their codes: not
// authenticated, invalid syntax, auth failed, already authenticated,
// symbol limit (30 on the free plan, the subscriptions unchanged),
// connection limit (a second connection, which may authenticate once the
// first is gone), insufficient subscription for sip on the free plan,
// auth timeout.
func TestAlpacaStreamErrors(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim, url, _ := streamSim(t, clock, exchangesim.AlpacaConfig{Keys: map[string]string{"key": "secret"}})
	a := dialStream(t, url+"/v2/iex", nil)
	a.expect("success", "connected", 0)
	a.send(`{"action":"subscribe","bars":["AAPL"]}`)
	a.expect("error", "not authenticated", 401)
	a.send(`{"action":`)
	a.expect("error", "invalid syntax", 400)
	a.send(`{"action":"auth","key":"key","secret":"nope"}`)
	a.expect("error", "auth failed", 402)
	a.login("key", "secret")
	a.send(`{"action":"auth","key":"key","secret":"secret"}`)
	a.expect("error", "already authenticated", 403)
	syms := make([]string, 31)
	for i := range syms {
		syms[i] = fmt.Sprintf("%q", fmt.Sprintf("S%03d", i))
	}
	a.send(`{"action":"subscribe","trades":[` + strings.Join(syms, ",") + `]}`)
	a.expect("error", "symbol limit exceeded", 405)
	a.send(`{"action":"subscribe","trades":[` + strings.Join(syms[:20], ",") + `],"bars":[` + strings.Join(syms[10:30], ",") + `]}`)
	if sub := a.expect("subscription", "", 0); len(sub.Trades) != 20 || len(sub.Bars) != 20 {
		t.Errorf("30 symbols over two channels: %+v", sub)
	}
	a.send(`{"action":"subscribe","quotes":["XOM"]}`)
	a.expect("error", "symbol limit exceeded", 405)
	a.send(`{"action":"subscribe","bars":["*"]}`)
	a.expect("error", "symbol limit exceeded", 405)
	a.send(`{"action":"unsubscribe","trades":["S000"]}`)
	if sub := a.expect("subscription", "", 0); len(sub.Trades) != 19 || len(sub.Quotes) != 0 || len(sub.Bars) != 20 {
		t.Errorf("after refused subscribes and one unsubscribe: %+v, want them unchanged but for S000", sub)
	}

	b := dialStream(t, url+"/v2/iex", nil)
	b.expect("success", "connected", 0)
	b.send(`{"action":"auth","key":"key","secret":"secret"}`)
	b.expect("error", "connection limit exceeded", 406)
	_ = a.ws.Close(websocket.StatusNormalClosure, "")
	pushtest.Eventually(t, "the first connection gone", func() bool { return sim.Stats().Alpaca.Stream.Open == 1 })
	b.login("key", "secret")

	sip := dialStream(t, url+"/v2/sip", nil)
	sip.expect("success", "connected", 0)
	sip.send(`{"action":"auth","key":"key","secret":"secret"}`)
	sip.expect("error", "insufficient subscription", 409)
	if !sip.closed() {
		t.Error("sip on the free plan: connection not closed")
	}

	st := sim.Stats().Alpaca.Stream
	for code, want := range map[string]int64{"400": 1, "401": 1, "402": 1, "403": 1, "405": 3, "406": 1, "409": 1} {
		if st.Errors[code] != want {
			t.Errorf("errors[%s] = %d, want %d (all: %v)", code, st.Errors[code], want, st.Errors)
		}
	}

	_, slowURL, _ := streamSim(t, clock, exchangesim.AlpacaConfig{AuthTimeout: 50 * time.Millisecond})
	idle := dialStream(t, slowURL+"/v2/iex", nil)
	idle.expect("success", "connected", 0)
	idle.expect("error", "auth timeout", 404)
	if !idle.closed() {
		t.Error("auth timeout: connection not closed")
	}
}

// TestAlpacaStreamTestFeed: /v2/test trades FAKEPACA at all hours, here
// on a Saturday; credentials in the upgrade's headers authenticate.
func TestAlpacaStreamTestFeed(t *testing.T) {
	t.Parallel()
	saturday := time.Date(2026, 11, 28, 15, 10, 30, 0, time.UTC)
	clock := &testClock{t: saturday}
	_, url, ticks := streamSim(t, clock, exchangesim.AlpacaConfig{})
	c := dialStream(t, url+"/v2/test", http.Header{"APCA-API-KEY-ID": {"key"}, "APCA-API-SECRET-KEY": {"secret"}})
	c.expect("success", "connected", 0)
	c.expect("success", "authenticated", 0)
	c.send(`{"action":"subscribe","bars":["FAKEPACA"]}`)
	c.expect("subscription", "", 0)
	clock.Set(saturday.Add(30 * time.Second))
	ticks <- clock.Now()
	if got := c.read(); len(got) != 1 || got[0].T != "b" || got[0].S != "FAKEPACA" || got[0].Time != "2026-11-28T15:10:00Z" || got[0].close() <= 0 {
		t.Errorf("test stream pushed %+v, want FAKEPACA's 15:10 bar", got)
	}
}
