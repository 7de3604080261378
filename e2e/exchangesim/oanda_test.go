package exchangesim_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
)

const (
	simAccount = "101-004-1234567-001"
	simToken   = "sim-oanda-token"
)

var (
	oandaMajor = domain.Combination{Market: domain.Forex, Exchange: feeds.NameOanda, Instrument: "major"}
	oandaMinor = domain.Combination{Market: domain.Forex, Exchange: feeds.NameOanda, Instrument: "minor"}
)

// simClock is a clock a test moves while the simulator reads it.
type simClock struct{ ns atomic.Int64 }

func newSimClock(t time.Time) *simClock {
	c := &simClock{}
	c.set(t)
	return c
}

func (c *simClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *simClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *simClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// oandaGet performs an authorized OANDA request against h and decodes the
// body into dst; it returns the status.
func oandaGet(t *testing.T, h http.Handler, path string, dst any, header ...string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+simToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if dst != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), dst); err != nil {
			t.Fatalf("%s: %d %s: %v", path, rec.Code, rec.Body, err)
		}
	}
	return rec.Code
}

type simCandles struct {
	Candles []struct {
		Time     string            `json:"time"`
		Volume   int64             `json:"volume"`
		Complete bool              `json:"complete"`
		Mid      map[string]string `json:"mid"`
		Bid      map[string]string `json:"bid"`
	} `json:"candles"`
	ErrorMessage string `json:"errorMessage"`
}

func (c simCandles) times() []string {
	out := make([]string, len(c.Candles))
	for i, k := range c.Candles {
		out[i] = k.Time
	}
	return out
}

// TestOandaSimInstruments: the account lists its CURRENCY pairs (the USD
// majors first when fewer are configured) beside CFDs and metals.
func TestOandaSimInstruments(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ pairs, want int }{{0, 68}, {10, 10}} {
		sim := exchangesim.New(exchangesim.Config{Oanda: exchangesim.OandaConfig{Pairs: c.pairs}})
		var r struct {
			Instruments []struct{ Name, Type string } `json:"instruments"`
		}
		if code := oandaGet(t, sim, "/v3/accounts/"+simAccount+"/instruments", &r); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		kinds := map[string]int{}
		var currencies []string
		for _, in := range r.Instruments {
			kinds[in.Type]++
			if in.Type == "CURRENCY" {
				currencies = append(currencies, in.Name)
			}
		}
		if kinds["CURRENCY"] != c.want || kinds["CFD"] == 0 || kinds["METAL"] == 0 {
			t.Errorf("pairs=%d: kinds %v, want %d CURRENCY and some CFD and METAL", c.pairs, kinds, c.want)
		}
		if got := strings.Join(currencies[:7], " "); got != "EUR_USD GBP_USD USD_JPY USD_CHF AUD_USD USD_CAD NZD_USD" {
			t.Errorf("first pairs %s, want the majors", got)
		}
	}
}

// TestOandaSimAuthorization: a bad token is 401; an account id not of the
// v20 form is 400, another user's 403 (observed answers: "Invalid value
// specified for 'accountID'", "The provided request was forbidden.").
func TestOandaSimAuthorization(t *testing.T) {
	t.Parallel()
	sim := exchangesim.New(exchangesim.Config{})
	for _, c := range []struct {
		path, token string
		want        int
		msg         string
	}{
		{"/v3/accounts/" + simAccount + "/instruments", "wrong", 401, "Insufficient authorization"},
		{"/v3/instruments/EUR_USD/candles", "", 401, "Insufficient authorization"},
		{"/v3/accounts/1234567/pricing?instruments=EUR_USD", simToken, 400, "'accountID'"},
		{"/v3/accounts/101-004-7654321-001/pricing?instruments=EUR_USD", simToken, 403, "forbidden"},
		{"/v3/accounts/" + simAccount + "/pricing?instruments=EUR_XYZ", simToken, 400, "'instruments'"},
		{"/v3/accounts/" + simAccount + "/pricing?instruments=EUR_USD", simToken, 200, ""},
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		if rec.Code != c.want || !strings.Contains(rec.Body.String(), c.msg) {
			t.Errorf("%s (token %q): %d %s, want %d %q", c.path, c.token, rec.Code, rec.Body, c.want, c.msg)
		}
	}
	if s := sim.Stats().Oanda; s.Unauthorized != 2 || s.Requests != 6 {
		t.Errorf("stats %+v, want 6 requests, 2 unauthorized", s)
	}
}

// TestOandaSimCandles: counts, alignment (UTC days and Monday weeks as the
// feed asks, OANDA's default 17:00 New York days otherwise), complete
// flags, tick volumes and decimal strings; the documented bounds.
func TestOandaSimCandles(t *testing.T) {
	t.Parallel()
	clock := newSimClock(time.Date(2025, 11, 19, 15, 31, 10, 0, time.UTC)) // a Wednesday
	sim := exchangesim.New(exchangesim.Config{Seed: 5, Now: clock.now})
	base := "/v3/instruments/EUR_USD/candles?"
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"granularity=D&count=3&dailyAlignment=0&alignmentTimezone=UTC",
			[]string{"2025-11-17T00:00:00.000000000Z", "2025-11-18T00:00:00.000000000Z", "2025-11-19T00:00:00.000000000Z"}},
		{"granularity=D&count=2", // 17:00 New York, EST
			[]string{"2025-11-17T22:00:00.000000000Z", "2025-11-18T22:00:00.000000000Z"}},
		{"granularity=W&count=2&dailyAlignment=0&alignmentTimezone=UTC&weeklyAlignment=Monday",
			[]string{"2025-11-10T00:00:00.000000000Z", "2025-11-17T00:00:00.000000000Z"}},
		{"granularity=H4&count=2&dailyAlignment=0&alignmentTimezone=UTC",
			[]string{"2025-11-19T08:00:00.000000000Z", "2025-11-19T12:00:00.000000000Z"}},
		{"granularity=M1&count=2&from=2025-11-19T10:00:30Z",
			[]string{"2025-11-19T10:00:00.000000000Z", "2025-11-19T10:01:00.000000000Z"}},
		{"granularity=M1&count=2&from=2025-11-19T10:00:00Z&includeFirst=false",
			[]string{"2025-11-19T10:01:00.000000000Z", "2025-11-19T10:02:00.000000000Z"}},
		{"granularity=H1&from=2025-11-19T10:00:00Z&to=2025-11-19T13:00:00Z",
			[]string{"2025-11-19T10:00:00.000000000Z", "2025-11-19T11:00:00.000000000Z", "2025-11-19T12:00:00.000000000Z"}},
	} {
		var r simCandles
		if code := oandaGet(t, sim, base+c.query, &r); code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.query, code, r.ErrorMessage)
		}
		if got := strings.Join(r.times(), " "); got != strings.Join(c.want, " ") {
			t.Errorf("%s: times %s, want %s", c.query, got, strings.Join(c.want, " "))
		}
	}
	var r simCandles
	oandaGet(t, sim, base+"granularity=M5&count=5000&price=MB", &r)
	if len(r.Candles) != 5000 {
		t.Fatalf("%d candles, want 5000", len(r.Candles))
	}
	last := r.Candles[len(r.Candles)-1]
	if last.Complete || !r.Candles[0].Complete || last.Volume <= 0 || !strings.Contains(last.Mid["c"], ".") || last.Bid["c"] == "" {
		t.Errorf("newest candle %+v: want open, a tick volume, decimal strings, bids", last)
	}
	for _, bad := range []string{"count=5001", "granularity=M3", "from=2025-11-19T10:00:00Z&to=2025-11-19T11:00:00Z&count=2",
		"dailyAlignment=24", "alignmentTimezone=Mars/Olympus", "weeklyAlignment=Someday", "price=X"} {
		if code := oandaGet(t, sim, base+bad, &r); code != http.StatusBadRequest || r.ErrorMessage == "" {
			t.Errorf("%s: %d %q, want 400 with a message", bad, code, r.ErrorMessage)
		}
	}
	// Unix times when asked (Accept-Datetime-Format: UNIX).
	oandaGet(t, sim, base+"granularity=H1&count=1", &r, "Accept-Datetime-Format", "UNIX")
	if len(r.Candles) != 1 || r.Candles[0].Time != "1763564400.000000000" { // 15:00 UTC
		t.Errorf("UNIX times: %v", r.times())
	}
}

// TestOandaSimWeekend: from Friday 17:00 to Sunday 17:00 New York there is
// no candle and the prices are frozen and not tradeable; a UTC day then
// has a short Sunday candle from the open.
func TestOandaSimWeekend(t *testing.T) {
	t.Parallel()
	clock := newSimClock(time.Date(2025, 11, 22, 12, 0, 0, 0, time.UTC)) // Saturday
	sim := exchangesim.New(exchangesim.Config{Seed: 5, Now: clock.now})
	base := "/v3/instruments/EUR_USD/candles?dailyAlignment=0&alignmentTimezone=UTC&"
	var r simCandles
	oandaGet(t, sim, base+"granularity=M1&count=2", &r)
	if got := strings.Join(r.times(), " "); got != "2025-11-21T21:58:00.000000000Z 2025-11-21T21:59:00.000000000Z" || !r.Candles[1].Complete {
		t.Errorf("the last minutes: %s, want Friday's last before the 22:00 UTC close, complete", got)
	}
	oandaGet(t, sim, base+"granularity=D&count=2", &r)
	if got := strings.Join(r.times(), " "); got != "2025-11-20T00:00:00.000000000Z 2025-11-21T00:00:00.000000000Z" {
		t.Errorf("days: %s, want Thursday and Friday (no Saturday)", got)
	}
	oandaGet(t, sim, base+"granularity=M1&from=2025-11-21T21:59:00Z&count=3", &r)
	if got := strings.Join(r.times(), " "); got != "2025-11-21T21:59:00.000000000Z" {
		t.Errorf("forward over the weekend: %s, want Friday's last minute alone", got)
	}
	type pricing struct {
		Prices []struct {
			Time      string `json:"time"`
			Tradeable bool   `json:"tradeable"`
			Bids      []struct{ Price string }
		} `json:"prices"`
	}
	var before, after pricing
	oandaGet(t, sim, "/v3/accounts/"+simAccount+"/pricing?instruments=EUR_USD,USD_JPY", &before)
	clock.add(3 * time.Hour)
	oandaGet(t, sim, "/v3/accounts/"+simAccount+"/pricing?instruments=EUR_USD,USD_JPY", &after)
	if len(before.Prices) != 2 || before.Prices[0].Tradeable || before.Prices[0].Bids[0].Price != after.Prices[0].Bids[0].Price ||
		!strings.HasPrefix(before.Prices[0].Time, "2025-11-21T21:59:") {
		t.Errorf("weekend prices %+v then %+v: want Friday's last, frozen, not tradeable", before, after)
	}

	clock.set(time.Date(2025, 11, 23, 23, 0, 0, 0, time.UTC)) // Sunday, an hour after the 17:00 EST open
	oandaGet(t, sim, base+"granularity=D&count=2", &r)
	if got := strings.Join(r.times(), " "); got != "2025-11-21T00:00:00.000000000Z 2025-11-23T00:00:00.000000000Z" || r.Candles[1].Complete {
		t.Errorf("after the open: %s, want Friday and the short Sunday candle, open", got)
	}
	oandaGet(t, sim, "/v3/accounts/"+simAccount+"/pricing?instruments=EUR_USD", &after)
	if !after.Prices[0].Tradeable {
		t.Error("after the open: not tradeable")
	}
}

// streamLines reads a pricing stream's lines.
type streamLines struct {
	sc     *bufio.Scanner
	cancel context.CancelFunc
}

func openSimStream(t *testing.T, srv *httptest.Server, instruments string) (*streamLines, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v3/accounts/"+simAccount+"/pricing/stream?instruments="+instruments, nil)
	req.Header.Set("Authorization", "Bearer "+simToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &streamLines{sc: bufio.NewScanner(resp.Body), cancel: cancel}, resp
}

type oandaStreamMsg struct {
	Type       string `json:"type"`
	Instrument string `json:"instrument"`
	Time       string `json:"time"`
	Tradeable  bool   `json:"tradeable"`
}

func (s *streamLines) next(t *testing.T) oandaStreamMsg {
	t.Helper()
	if !s.sc.Scan() {
		t.Fatalf("stream ended: %v", s.sc.Err())
	}
	var m oandaStreamMsg
	if err := json.Unmarshal(s.sc.Bytes(), &m); err != nil {
		t.Fatalf("line %q: %v", s.sc.Text(), err)
	}
	return m
}

// TestOandaSimPricingStream: a snapshot of every instrument, then prices as
// the (injected) clock moves them and heartbeats; at the weekly close one
// non-tradeable price of each, then heartbeats alone.
func TestOandaSimPricingStream(t *testing.T) {
	t.Parallel()
	clock := newSimClock(time.Date(2025, 11, 21, 21, 59, 0, 0, time.UTC)) // Friday, a minute before the close
	sim := exchangesim.New(exchangesim.Config{Seed: 5, Now: clock.now,
		Oanda: exchangesim.OandaConfig{HeartbeatEvery: 30 * time.Millisecond, PriceEvery: 5 * time.Millisecond}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	lines, resp := openSimStream(t, srv, "EUR_USD,USD_JPY,EUR_GBP")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	snapshot := map[string]bool{}
	for range 3 {
		m := lines.next(t)
		if m.Type != "PRICE" || !m.Tradeable {
			t.Fatalf("snapshot line %+v", m)
		}
		snapshot[m.Instrument] = true
	}
	if len(snapshot) != 3 {
		t.Fatalf("snapshot of %v", snapshot)
	}
	clock.add(10 * time.Second) // every pair quotes within 4 s
	moved := map[string]bool{}
	heartbeats := 0
	for len(moved) < 3 || heartbeats == 0 {
		switch m := lines.next(t); m.Type {
		case "PRICE":
			moved[m.Instrument] = true
		case "HEARTBEAT":
			heartbeats++
		default:
			t.Fatalf("line %+v", m)
		}
	}
	clock.set(time.Date(2025, 11, 21, 22, 0, 30, 0, time.UTC)) // closed
	closing := map[string]bool{}
	for len(closing) < 3 {
		m := lines.next(t)
		if m.Type == "PRICE" {
			if m.Tradeable || !strings.HasPrefix(m.Time, "2025-11-21T21:59:") {
				t.Fatalf("price after the close %+v: want Friday's last, not tradeable", m)
			}
			closing[m.Instrument] = true
		}
	}
	clock.add(time.Hour)
	for range 3 {
		if m := lines.next(t); m.Type != "HEARTBEAT" {
			t.Fatalf("weekend line %+v, want heartbeats alone", m)
		}
	}
	if s := sim.Stats().Oanda.Streams; s.Accepted != 1 || s.Open != 1 || s.Prices < 9 || s.Heartbeats < 4 {
		t.Errorf("stream stats %+v", s)
	}
}

// TestOandaSimLimits: requests over the per-IP rate, streams over the
// per-IP cap and new connections over the per-second budget are refused
// 429, and counted.
func TestOandaSimLimits(t *testing.T) {
	t.Parallel()
	sim := exchangesim.New(exchangesim.Config{Oanda: exchangesim.OandaConfig{RequestsPerSecond: 2, MaxStreams: 2,
		NewConnectionsPerSecond: 1, HeartbeatEvery: time.Hour}})
	refused := 0
	for range 30 { // one connection (the recorder's address): only the rate applies
		if oandaGet(t, sim, "/v3/accounts/"+simAccount+"/instruments", nil) == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 || sim.Stats().Oanda.Refused429 != int64(refused) {
		t.Errorf("%d refused (stats %+v), want some: 30 requests cannot spread over 15 seconds", refused, sim.Stats().Oanda)
	}

	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v3/accounts/"+simAccount+"/instruments", nil)
			req.Header.Set("Authorization", "Bearer "+simToken)
			resp, err := fresh.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusTooManyRequests] == 0 || sim.Stats().Oanda.RefusedConnections == 0 {
		t.Errorf("10 new connections at once, 1 a second allowed: %v", codes)
	}
}

// TestOandaSimCountsConnectionsWhenAccepted: OANDA limits the connections a
// client opens a second, so the simulator counts a new connection when its
// server accepted it (Sim.ConnState), not at its first request. Three
// connections opened 0.6 s apart (never more than 2 a second) and first
// used together are all served; counted at their first requests, as a
// server without the hook does (and as the simulator did: a session
// benchmark's client, whose transport had left a paced dial idle, was
// refused), the third is refused.
func TestOandaSimCountsConnectionsWhenAccepted(t *testing.T) {
	t.Parallel()
	codes := func(hook bool) []int {
		sim := exchangesim.New(exchangesim.Config{Oanda: exchangesim.OandaConfig{NewConnectionsPerSecond: 2, HeartbeatEvery: time.Hour}})
		srv := httptest.NewUnstartedServer(sim)
		if hook {
			srv.Config.ConnState = sim.ConnState
		}
		srv.Start()
		defer srv.Close()
		defer sim.Close()
		var conns []net.Conn
		for i := range 3 {
			if i > 0 {
				time.Sleep(600 * time.Millisecond)
			}
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conns = append(conns, c)
		}
		var out []int
		for _, c := range conns {
			if _, err := fmt.Fprintf(c, "GET /v3/accounts/%s/instruments HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer %s\r\n\r\n", simAccount, simToken); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			out = append(out, resp.StatusCode)
		}
		return out
	}
	if got := codes(true); !slices.Equal(got, []int{200, 200, 200}) {
		t.Errorf("accepted 0.6 s apart, counted when accepted: %v, want every one served", got)
	}
	if got := codes(false); !slices.Equal(got, []int{200, 200, 429}) {
		t.Errorf("accepted 0.6 s apart, counted at their first requests: %v, want the third refused", got)
	}
}

// TestOandaSimStreamCap: a third stream of one IP over a cap of 2 is
// refused; once one closes, another is accepted.
func TestOandaSimStreamCap(t *testing.T) {
	t.Parallel()
	sim := exchangesim.New(exchangesim.Config{Oanda: exchangesim.OandaConfig{MaxStreams: 2, NewConnectionsPerSecond: 100, HeartbeatEvery: time.Hour}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	first, _ := openSimStream(t, srv, "EUR_USD")
	first.next(t) // the snapshot: the stream is open
	second, _ := openSimStream(t, srv, "EUR_USD")
	second.next(t)
	_, third := openSimStream(t, srv, "EUR_USD")
	if third.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third stream: %d, want 429", third.StatusCode)
	}
	first.cancel()
	deadline := time.Now().Add(10 * time.Second)
	for sim.Stats().Oanda.Streams.Open != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if _, again := openSimStream(t, srv, "EUR_USD"); again.StatusCode != http.StatusOK {
		t.Errorf("after a close: %d", again.StatusCode)
	}
	if s := sim.Stats().Oanda.Streams; s.Refused != 1 || s.Accepted != 3 {
		t.Errorf("stream stats %+v", s)
	}
}

// oandaFeed is feeds' oanda adapter pointed at srv for both its hosts.
func oandaFeed(t *testing.T, srv *httptest.Server, now func() time.Time) feeds.Provider {
	t.Helper()
	reg, err := feeds.New(feeds.Config{Names: []string{feeds.NameOanda}, OandaToken: simToken, OandaAccountID: simAccount,
		BaseURLs: map[string]string{feeds.HostOanda: srv.URL, feeds.HostOandaStream: srv.URL}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := reg.For(oandaMajor)
	if !ok {
		t.Fatal("no provider for forex/oanda/major")
	}
	return p
}

// TestOandaFeedReadsTheSimulator: the oanda adapter, unchanged but for its
// base URLs, lists the account's 68 pairs (7 majors, 61 minors), reads a
// row for every one, and candles of every timeframe aligned as the domain
// truncates them; on the weekend the rows stay (Friday's prices) without
// an error.
func TestOandaFeedReadsTheSimulator(t *testing.T) {
	t.Parallel()
	clock := newSimClock(time.Date(2025, 11, 19, 15, 31, 10, 0, time.UTC))
	sim := exchangesim.New(exchangesim.Config{Seed: 5, Now: clock.now})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	p := oandaFeed(t, srv, clock.now)
	ctx := context.Background()
	for _, c := range []struct {
		combo domain.Combination
		want  int
	}{{oandaMajor, 7}, {oandaMinor, 61}} {
		syms, err := p.Symbols(ctx, c.combo)
		if err != nil || len(syms) != c.want {
			t.Fatalf("%s symbols: %d, %v; want %d", c.combo, len(syms), err, c.want)
		}
		rows, err := p.Tickers(ctx, c.combo)
		if err != nil || len(rows) != c.want {
			t.Fatalf("%s tickers: %d, %v; want %d", c.combo, len(rows), err, c.want)
		}
		for _, r := range rows {
			if r.Volume <= 0 || r.ChangePct == 0 || r.UpdatedAt.After(clock.now()) {
				t.Errorf("row %+v: want a tick volume, a change and a time not ahead", r)
			}
		}
	}
	for _, tf := range domain.Timeframes {
		cs, err := p.Candles(ctx, oandaMinor, "USD_MXN", tf, time.Time{}, 20)
		if err != nil || len(cs) == 0 {
			t.Fatalf("%s candles: %d, %v", tf, len(cs), err)
		}
		for _, k := range cs {
			if !tf.Truncate(k.Time).Equal(k.Time) {
				t.Errorf("%s candle at %s, not aligned as the domain truncates (%s)", tf, k.Time, tf.Truncate(k.Time))
			}
		}
	}
	clock.set(time.Date(2025, 11, 22, 12, 0, 0, 0, time.UTC)) // Saturday
	rows, err := p.Tickers(ctx, oandaMajor)
	if err != nil || len(rows) != 7 {
		t.Fatalf("weekend tickers: %d, %v", len(rows), err)
	}
	if s := sim.Stats().Oanda; s.Refused429 != 0 || s.RefusedConnections != 0 {
		t.Errorf("the adapter was refused: %+v", s)
	}
}
