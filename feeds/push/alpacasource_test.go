package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
)

// The Alpaca source is tested against the local simulator's Alpaca part
// (e2e/exchangesim/alpaca*.go, written from Alpaca's documentation: the
// handshake, the subscription confirmation, b/u/d pushes on its clock,
// the error codes, the free plan's 30 symbols and one connection). Its
// pushes are driven by AlpacaConfig.Tick, one pass per value sent, at the
// time sent.

var (
	nasdaq = domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	nyse   = domain.Combination{Market: domain.Stocks, Exchange: "nyse", Instrument: "stock"}
)

// tuesday is a session day, 10:10:30 in New York: IEX and SIP trade.
var tuesday = time.Date(2026, 11, 24, 15, 10, 30, 0, time.UTC)

// alpacaBench is a simulator, the REST feed on it, and what a source
// delivered.
type alpacaBench struct {
	t     *testing.T
	clk   *testClock
	sim   *exchangesim.Sim
	ws    string // the stream's base URL
	ticks chan time.Time
	rest  feeds.Provider
	conns *connList
	logs  *logRecorder

	mu      sync.Mutex
	updates []push.CandleUpdate
	gaps    [][]push.Gap
}

func newAlpacaBench(t *testing.T, cfg exchangesim.AlpacaConfig, feed string) *alpacaBench {
	t.Helper()
	clk := &testClock{}
	clk.set(tuesday)
	ticks := make(chan time.Time)
	cfg.Tick = ticks
	if cfg.Assets == 0 {
		cfg.Assets, cfg.Inactive = 600, 30
	}
	sim := exchangesim.New(exchangesim.Config{Seed: 7, Now: clk.now, Alpaca: cfg})
	srv := httptest.NewUnstartedServer(sim)
	conns := &connList{Listener: srv.Listener}
	srv.Listener = conns
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{feeds.NameAlpaca}, AlpacaKeyID: "key", AlpacaSecret: "secret", AlpacaFeed: feed,
		BaseURLs: map[string]string{feeds.HostAlpaca: srv.URL, feeds.HostAlpacaData: srv.URL}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return &alpacaBench{t: t, clk: clk, sim: sim, ws: "ws" + strings.TrimPrefix(srv.URL, "http"), ticks: ticks,
		rest: reg.Providers()[0], conns: conns, logs: &logRecorder{}}
}

// config is the streams configuration of a source on the bench.
func (b *alpacaBench) config(feed, secret string) push.Config {
	return push.Config{
		BaseURLs: map[string]string{push.NameAlpacaStream: b.ws},
		Alpaca:   push.AlpacaConfig{KeyID: "key", Secret: secret, Feed: feed},
		OnCandle: func(u push.CandleUpdate) { b.mu.Lock(); b.updates = append(b.updates, u); b.mu.Unlock() },
		RepairBatch: func(_ context.Context, gaps []push.Gap) error {
			b.mu.Lock()
			b.gaps = append(b.gaps, gaps)
			b.mu.Unlock()
			return nil
		},
		Logger:     slog.New(b.logs),
		MinBackoff: time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
	}
}

// run starts a source on plans until the end of the test.
func (b *alpacaBench) run(cfg push.Config, plans ...push.Plan) *push.Alpaca {
	b.t.Helper()
	a := push.NewAlpaca(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, plans) }()
	b.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.t.Errorf("Run: %v", err)
		}
	})
	return a
}

// symbols returns n symbols of a combination.
func (b *alpacaBench) symbols(c domain.Combination, n int) []string {
	b.t.Helper()
	syms, err := b.rest.Symbols(context.Background(), c)
	if err != nil {
		b.t.Fatal(err)
	}
	if len(syms) < n {
		b.t.Fatalf("%s lists %d symbols, want %d", c, len(syms), n)
	}
	return syms[:n]
}

// tick moves the simulator's clock to at and has it push what happened.
func (b *alpacaBench) tick(at time.Time) {
	b.clk.set(at)
	b.ticks <- at
}

func (b *alpacaBench) delivered() []push.CandleUpdate {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.updates)
}

// restBars are the simulator's REST bars of symbols' series at open, as
// the REST adapter reads them now (one multi-symbol request), by symbol;
// a symbol without a bar at open is absent.
func (b *alpacaBench) restBars(c domain.Combination, syms []string, tf domain.Timeframe, open time.Time) map[string]domain.Candle {
	b.t.Helper()
	from := map[string]time.Time{}
	for _, s := range syms {
		from[s] = open
	}
	got, bad, err := b.rest.(feeds.BulkCandleProvider).BulkCandles(context.Background(), c, tf, from, 1)
	if err != nil || len(bad) > 0 {
		b.t.Fatalf("REST bars: %v %v", err, bad)
	}
	out := map[string]domain.Candle{}
	for s, cs := range got {
		if len(cs) > 0 && cs[0].Time.Equal(open) {
			out[s] = cs[0]
		}
	}
	return out
}

func alpacaPlan(c domain.Combination, syms []string) push.Plan {
	p := push.Plan{Combination: c}
	for _, s := range syms {
		p.Series = append(p.Series, push.AlpacaSeries(s)...)
	}
	return p
}

// TestAlpacaDeliversClosedBars: the source authenticates, subscribes the
// plans' symbols of two exchanges on one connection and is live once the
// subscription is confirmed; when a minute closes on the simulator's
// clock, each symbol that traded in it is delivered as a closed 1m candle
// equal to REST's bar, and its day so far as an open 1d candle stamped at
// the UTC midnight of its date, equal to REST's daily bar.
func TestAlpacaDeliversClosedBars(t *testing.T) {
	t.Parallel()
	b := newAlpacaBench(t, exchangesim.AlpacaConfig{}, "iex")
	plans := []push.Plan{alpacaPlan(nasdaq, b.symbols(nasdaq, 20)), alpacaPlan(nyse, b.symbols(nyse, 10))} // the free plan's 30
	a := b.run(b.config("iex", "secret"), plans...)
	for _, c := range []domain.Combination{nasdaq, nyse} {
		pushtest.Eventually(t, c.String()+" live", func() bool { return a.Live(c) })
	}
	if st := b.sim.Stats().Alpaca.Stream; st.Connections != 1 || st.Authenticated != 1 || len(st.Errors) != 0 {
		t.Fatalf("stream stats %+v: want one connection, authenticated, no error", st)
	}

	minute := tuesday.Truncate(time.Minute)
	b.clk.set(minute.Add(time.Minute + 50*time.Millisecond))
	// What REST serves once the minute has closed, of the symbols that
	// traded in it: a minute bar, and the day's bar, which is pushed with
	// each minute bar.
	want := map[string]domain.Candle{}
	for _, p := range plans {
		var syms []string
		for _, se := range p.Series {
			if se.Timeframe == domain.TF1m {
				syms = append(syms, se.Symbol)
			}
		}
		minuteBars := b.restBars(p.Combination, syms, domain.TF1m, minute)
		dayBars := b.restBars(p.Combination, syms, domain.TF1d, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
		for s, bar := range minuteBars {
			want[s+" 1m"], want[s+" 1d"] = bar, dayBars[s]
		}
	}
	if len(want) < 10 {
		t.Fatalf("only %d of 30 symbols traded in %s", len(want)/2, minute)
	}
	b.ticks <- b.clk.now()
	pushtest.Eventually(t, "the minute's bars", func() bool { return len(b.delivered()) >= len(want) })
	got := map[string]domain.Candle{}
	for _, u := range b.delivered() {
		wantComb := nasdaq
		if slices.Contains(b.symbols(nyse, 10), u.Symbol) {
			wantComb = nyse
		}
		if u.Combination != wantComb || u.Closed != (u.Timeframe == domain.TF1m) {
			t.Errorf("%s %s delivered on %s closed=%v, want %s, closed only for 1m", u.Symbol, u.Timeframe, u.Combination, u.Closed, wantComb)
		}
		got[u.Symbol+" "+string(u.Timeframe)] = u.Candle
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivered candles differ from REST's (-rest +stream):\n%s", diff)
	}
}

// TestAlpacaUpdatedBarReplacesTheBar: a minute whose bar a late trade
// corrected comes again as an updated bar 30 s after the bar ([forum]
// 8947); it is delivered as the same closed 1m candle, equal to what REST
// serves after the correction. (Paid plan, SIP, 250 symbols: no limit.)
func TestAlpacaUpdatedBarReplacesTheBar(t *testing.T) {
	t.Parallel()
	b := newAlpacaBench(t, exchangesim.AlpacaConfig{Plan: exchangesim.AlpacaPaid}, "sip")
	syms := b.symbols(nasdaq, 250)
	a := b.run(b.config("sip", "secret"), alpacaPlan(nasdaq, syms))
	pushtest.Eventually(t, "live", func() bool { return a.Live(nasdaq) })
	minute := tuesday.Truncate(time.Minute)
	b.tick(minute.Add(time.Minute + 50*time.Millisecond))    // the 15:10 bars
	b.tick(minute.Add(90*time.Second + 50*time.Millisecond)) // their corrections
	b.tick(minute.Add(2*time.Minute + 50*time.Millisecond))  // the 15:11 bars, after them on the connection
	pushtest.Eventually(t, "the next minute's bars", func() bool {
		return slices.ContainsFunc(b.delivered(), func(u push.CandleUpdate) bool { return u.Candle.Time.Equal(minute.Add(time.Minute)) })
	})
	states := map[string][]push.CandleUpdate{} // each symbol's 15:10 1m candle, in delivery order
	for _, u := range b.delivered() {
		if u.Timeframe == domain.TF1m && u.Candle.Time.Equal(minute) {
			states[u.Symbol] = append(states[u.Symbol], u)
		}
	}
	rest := b.restBars(nasdaq, syms, domain.TF1m, minute)
	corrected := 0
	for sym, us := range states {
		last := us[len(us)-1]
		if len(us) > 2 || !last.Closed || last.Candle != rest[sym] {
			t.Errorf("%s: delivered %+v, want the bar, then its correction if any, closed, ending at REST's %+v", sym, us, rest[sym])
		}
		if len(us) == 2 {
			corrected++
			if us[0].Candle == us[1].Candle {
				t.Errorf("%s: the updated bar is the bar itself", sym)
			}
		}
	}
	if corrected == 0 {
		t.Fatal("no updated bar among 250 symbols")
	}
	t.Logf("%d of %d bars corrected", corrected, len(states))
}

// TestAlpacaPlanLimits: the free plan streams 30 symbols. A source on the
// iex feed refuses a 31st before dialling; a plan the account cannot
// carry (31 symbols against a plan of 30: 405; sip on the free plan: 409)
// stops the stream with an error log naming the limit, without
// reconnecting: REST keeps the series.
func TestAlpacaPlanLimits(t *testing.T) {
	t.Parallel()
	t.Run("31 symbols on iex refused before dialling", func(t *testing.T) {
		t.Parallel()
		b := newAlpacaBench(t, exchangesim.AlpacaConfig{}, "iex")
		err := push.NewAlpaca(b.config("iex", "secret")).Run(context.Background(), []push.Plan{alpacaPlan(nasdaq, b.symbols(nasdaq, 31))})
		if err == nil || !strings.Contains(err.Error(), "31 symbols") {
			t.Fatalf("Run: %v, want the 31 symbols refused", err)
		}
		if n := b.sim.Stats().Alpaca.Stream.Connections; n != 0 {
			t.Errorf("%d connections, want none", n)
		}
	})
	for _, tc := range []struct {
		name     string
		sim      exchangesim.AlpacaConfig
		feed     string
		symbols  int
		code     string
		wantText string
	}{
		{"405 at 31 symbols", exchangesim.AlpacaConfig{Plan: exchangesim.AlpacaPaid, StreamSymbols: 30}, "sip", 31, "405", "symbol limit exceeded"},
		{"409 sip on the free plan", exchangesim.AlpacaConfig{}, "sip", 5, "409", "insufficient subscription"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newAlpacaBench(t, tc.sim, tc.feed)
			a := b.run(b.config(tc.feed, "secret"), alpacaPlan(nasdaq, b.symbols(nasdaq, tc.symbols)))
			pushtest.Eventually(t, "the stop logged", func() bool { return b.logs.count(slog.LevelError, tc.wantText) == 1 })
			if a.Live(nasdaq) {
				t.Error("live after the plan was refused")
			}
			st := b.sim.Stats().Alpaca.Stream
			if st.Connections != 1 || st.Errors[tc.code] != 1 {
				t.Errorf("stream stats %+v: want one connection refused %s, no retry", st, tc.code)
			}
		})
	}
}

// TestAlpacaConnectionLimitBacksOff: while another connection of the same
// keys holds the plan's one connection, the source is refused 406, logs
// it once and retries with back-off; once the holder leaves, it streams.
func TestAlpacaConnectionLimitBacksOff(t *testing.T) {
	t.Parallel()
	b := newAlpacaBench(t, exchangesim.AlpacaConfig{}, "iex")
	holder, _, err := websocket.Dial(context.Background(), b.ws+"/v2/iex", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.CloseNow() })
	readControl(t, holder) // connected
	if err := holder.Write(context.Background(), websocket.MessageText, []byte(`{"action":"auth","key":"key","secret":"secret"}`)); err != nil {
		t.Fatal(err)
	}
	if m := readControl(t, holder); m != "authenticated" {
		t.Fatalf("holder: %s", m)
	}
	a := b.run(b.config("iex", "secret"), alpacaPlan(nasdaq, b.symbols(nasdaq, 3)))
	pushtest.Eventually(t, "three refusals", func() bool { return b.sim.Stats().Alpaca.Stream.Errors["406"] >= 3 })
	if n := b.logs.count(slog.LevelWarn, "connection limit exceeded"); n != 1 {
		t.Errorf("406 logged %d times at warn level, want once", n)
	}
	if a.Live(nasdaq) {
		t.Error("live while another connection holds the plan's")
	}
	_ = holder.Close(websocket.StatusNormalClosure, "")
	pushtest.Eventually(t, "live once the holder left", func() bool { return a.Live(nasdaq) })
}

// TestAlpacaRefusedAccountBacksOffLong: refused credentials (402) end the
// connection with an error log and a wait of at least MaxBackoff before
// the next attempt, not the reconnect back-off of a dropped connection.
func TestAlpacaRefusedAccountBacksOffLong(t *testing.T) {
	t.Parallel()
	b := newAlpacaBench(t, exchangesim.AlpacaConfig{Keys: map[string]string{"key": "secret"}}, "iex")
	cfg := b.config("iex", "wrong")
	cfg.MaxBackoff = time.Hour
	b.run(cfg, alpacaPlan(nasdaq, b.symbols(nasdaq, 3)))
	pushtest.Eventually(t, "the refusal logged", func() bool { return b.logs.count(slog.LevelError, "account was refused") == 1 })
	if wait := b.logs.duration("account was refused", "retry_in"); wait < 30*time.Minute {
		t.Errorf("retry in %v after a 402, want at least half of MaxBackoff (jitter)", wait)
	}
	if st := b.sim.Stats().Alpaca.Stream; st.Connections != 1 || st.Errors["402"] != 1 {
		t.Errorf("stream stats %+v: want one connection refused 402", st)
	}
	if strings.Contains(b.logs.all(), "wrong") {
		t.Error("the secret is in the log")
	}
}

// TestAlpacaReconnectRepairsGaps: a dropped connection is dialled again;
// once its subscription is confirmed, the series seen before the drop
// get their gaps repaired, one batch per combination and timeframe, from
// the last candle delivered.
func TestAlpacaReconnectRepairsGaps(t *testing.T) {
	t.Parallel()
	b := newAlpacaBench(t, exchangesim.AlpacaConfig{}, "iex")
	syms := b.symbols(nasdaq, 30)
	a := b.run(b.config("iex", "secret"), alpacaPlan(nasdaq, syms))
	pushtest.Eventually(t, "live", func() bool { return a.Live(nasdaq) })
	minute := tuesday.Truncate(time.Minute)
	b.tick(minute.Add(time.Minute + 50*time.Millisecond))
	// Every bar of the tick is read before the drop (the count holds
	// still), so the series seen are all those with a gap.
	pushtest.Eventually(t, "bars", func() bool {
		n := len(b.delivered())
		time.Sleep(50 * time.Millisecond)
		return n > 0 && len(b.delivered()) == n
	})
	seen := map[domain.Timeframe][]string{}
	for _, u := range b.delivered() {
		seen[u.Timeframe] = append(seen[u.Timeframe], u.Symbol)
	}

	b.conns.dropAll()
	pushtest.Eventually(t, "the gaps repaired", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.gaps) == len(seen) })
	pushtest.Eventually(t, "live again", func() bool { return a.Live(nasdaq) })
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, gaps := range b.gaps {
		tf := gaps[0].Timeframe
		var got []string
		for _, g := range gaps {
			wantSince := minute
			if tf == domain.TF1d {
				wantSince = time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
			}
			if g.Timeframe != tf || g.Combination != nasdaq || !g.Since.Equal(wantSince) {
				t.Errorf("gap %+v, want %s %s from %s", g, nasdaq, tf, wantSince)
			}
			got = append(got, g.Symbol)
		}
		slices.Sort(seen[tf])
		if !slices.Equal(got, seen[tf]) {
			t.Errorf("%s gaps of %v, want the series delivered before the drop %v", tf, got, seen[tf])
		}
	}
}

// readControl reads one control message of a raw connection and returns
// its msg.
func readControl(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []struct {
		Msg string `json:"msg"`
	}
	if err := json.Unmarshal(data, &msgs); err != nil || len(msgs) != 1 {
		t.Fatalf("control message %s: %v", data, err)
	}
	return msgs[0].Msg
}

// connList is a listener that can drop every connection it accepted
// (websocket connections are hijacked: the test server no longer tracks
// them).
type connList struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connList) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *connList) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// logRecorder is a slog.Handler keeping every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}

// count is how many records of level carry text in their message.
func (l *logRecorder) count(level slog.Level, text string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, text) {
			n++
		}
	}
	return n
}

// duration is attribute key of the first record whose message has text.
func (l *logRecorder) duration(text, key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if !strings.Contains(r.Message, text) {
			continue
		}
		var d time.Duration
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				d = a.Value.Duration()
				return false
			}
			return true
		})
		return d
	}
	return 0
}

// all is every record, messages and attributes, as text.
func (l *logRecorder) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sb strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&sb, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value); return true })
		sb.WriteByte('\n')
	}
	return sb.String()
}
