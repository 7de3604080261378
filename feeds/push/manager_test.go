package push

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/obs"
)

// recorder collects what a Manager delivers.
type recorder struct {
	mu          sync.Mutex
	candles     []CandleUpdate
	tickers     []domain.Ticker
	gaps        []Gap
	connections map[string]int
	reconnects  map[string]int
	repairs     map[string]int
}

func newRecorder() *recorder {
	return &recorder{connections: map[string]int{}, reconnects: map[string]int{}, repairs: map[string]int{}}
}

func (r *recorder) config(base map[string]string) Config {
	return Config{
		BaseURLs: base,
		OnCandle: func(u CandleUpdate) { r.mu.Lock(); r.candles = append(r.candles, u); r.mu.Unlock() },
		OnTickers: func(_ domain.Combination, ts []domain.Ticker) {
			r.mu.Lock()
			r.tickers = append(r.tickers, ts...)
			r.mu.Unlock()
		},
		Repair: func(_ context.Context, g Gap) error {
			r.mu.Lock()
			r.gaps = append(r.gaps, g)
			r.mu.Unlock()
			return nil
		},
		Metrics:    r,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond,
		Overlap:    200 * time.Millisecond,
	}
}

func (r *recorder) Connections(ep string, d int) {
	r.mu.Lock()
	r.connections[ep] += d
	r.mu.Unlock()
}
func (r *recorder) Reconnect(ep string)            { r.mu.Lock(); r.reconnects[ep]++; r.mu.Unlock() }
func (r *recorder) GapRepair(ep string, err error) { r.mu.Lock(); r.repairs[ep]++; r.mu.Unlock() }

func (r *recorder) lockedRead(f func()) { r.mu.Lock(); defer r.mu.Unlock(); f() }

// run starts a Manager on plans and stops it at the end of the test.
func run(t *testing.T, cfg Config, plans ...Plan) *Manager {
	t.Helper()
	m := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, plans) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

func symbols(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("C%04d_USDT", i)
	}
	return out
}

func klinePayload(symbol string, open time.Time, closePrice string, closed bool) string {
	return fmt.Sprintf(`{"e":"kline","E":%d,"s":%q,"k":{"t":%d,"T":%d,"s":%q,"i":"1m","f":1,"L":2,"o":"10","c":%q,"h":"20","l":"5","v":"3.5","n":2,"x":%t,"q":"35","V":"1","Q":"10","B":"0"}}`,
		open.UnixMilli()+1500, symbol, open.UnixMilli(), open.UnixMilli()+59999, symbol, closePrice, closed)
}

// TestBinanceShardsWithinDocumentedLimits follows more streams than one
// connection may carry on spot (1,024) and USDⓈ-M (200) and checks that
// every connection stays within the stream and message-rate limits, that
// pushes come out as the right domain values and that server pings are
// answered.
func TestBinanceShardsWithinDocumentedLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		instrument, urlName, path string
		maxTopics, maxPerSec      int
		symbols                   int
		timeframes                []domain.Timeframe
		wantConns                 int
	}{
		{"spot", NameBinanceStream, "/stream", binanceSpotStreams, 5, 1100, []domain.Timeframe{domain.TF1m}, 2},
		{"perpetual", NameBinanceFuturesStream, "/market/stream", binanceFuturesStreams, 10, 150, []domain.Timeframe{domain.TF1m, domain.TF1h}, 2},
	} {
		t.Run(tc.instrument, func(t *testing.T) {
			t.Parallel()
			fake := pushtest.NewBinance(t, tc.maxTopics, tc.maxPerSec)
			rec := newRecorder()
			comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: tc.instrument}
			syms := symbols(tc.symbols)
			plan := Plan{Combination: comb, Tickers: true, Symbols: syms}
			var topics []string
			for _, s := range syms {
				for _, tf := range tc.timeframes {
					plan.Series = append(plan.Series, Series{Symbol: s, Timeframe: tf})
					topics = append(topics, binanceKlineStream(Series{Symbol: s, Timeframe: tf}))
				}
			}
			topics = append(topics, binanceMiniTickers)
			m := run(t, rec.config(map[string]string{tc.urlName: fake.URL()}), plan)

			pushtest.Eventually(t, "every stream subscribed", func() bool { return fake.AllSubscribed(topics) })
			pushtest.Eventually(t, "the combination live", func() bool { return m.Live(comb) })
			accepted, maxTopics, maxInSec, _, breaches := fake.Stats()
			if len(breaches) > 0 {
				t.Fatalf("documented limits broken: %v", breaches)
			}
			if accepted != tc.wantConns {
				t.Errorf("%d connections for %d streams, want %d", accepted, len(topics), tc.wantConns)
			}
			t.Logf("%d streams over %d connections; at most %d on one (limit %d), at most %d messages a second (limit %d)",
				len(topics), accepted, maxTopics, tc.maxTopics, maxInSec, tc.maxPerSec)
			if n := fake.PathCount(tc.path); n != accepted {
				t.Errorf("%d of %d connections on %s", n, accepted, tc.path)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := fake.PingAll(ctx); err != nil {
				t.Fatalf("server ping not answered: %v", err)
			}

			open := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
			last := syms[len(syms)-1]
			fake.Publish(binanceKlineStream(Series{Symbol: last, Timeframe: tc.timeframes[0]}), klinePayload(binanceSymbol(last), open, "12.5", true))
			fake.Publish(binanceMiniTickers, fmt.Sprintf(`[{"e":"24hrMiniTicker","E":%d,"s":%q,"c":"12.5","o":"10","h":"20","l":"5","v":"100","q":"1250"},{"e":"24hrMiniTicker","E":1,"s":"NOTFOLLOWED","c":"1","o":"1","h":"1","l":"1","v":"1","q":"1"}]`, open.UnixMilli(), binanceSymbol(last)))
			pushtest.Eventually(t, "the candle and the ticker", func() bool {
				var ok bool
				rec.lockedRead(func() { ok = len(rec.candles) == 1 && len(rec.tickers) == 1 })
				return ok
			})
			rec.lockedRead(func() {
				want := CandleUpdate{Combination: comb, Symbol: last, Timeframe: tc.timeframes[0], Closed: true,
					Candle: domain.Candle{Time: open, Open: 10, High: 20, Low: 5, Close: 12.5, Volume: 3.5}}
				if rec.candles[0] != want {
					t.Errorf("candle = %+v, want %+v", rec.candles[0], want)
				}
				wantT := domain.Ticker{Symbol: last, Price: 12.5, ChangePct: 25, Volume: 1250, UpdatedAt: open}
				if rec.tickers[0] != wantT {
					t.Errorf("ticker = %+v, want %+v", rec.tickers[0], wantT)
				}
				if got := rec.connections["binance-"+map[string]string{"spot": "spot", "perpetual": "futures"}[tc.instrument]]; got != tc.wantConns {
					t.Errorf("connections gauge = %d, want %d", got, tc.wantConns)
				}
			})
		})
	}
}

// TestLiveOnlyOnceSubscribed: a combination is live (the caller stops
// polling REST and starts its catch-up) only once the exchange has
// acknowledged every subscription; until then a candle closing would reach
// neither the stream nor a REST read made before it.
func TestLiveOnlyOnceSubscribed(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewBinance(t, binanceSpotStreams, 5)
	release := fake.HoldSubscriptions()
	t.Cleanup(release)
	rec := newRecorder()
	comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	plan := Plan{Combination: comb}
	for _, s := range symbols(binanceURLStreams + 50) { // the last 50 go by SUBSCRIBE
		plan.Series = append(plan.Series, Series{Symbol: s, Timeframe: domain.TF1m})
	}
	m := run(t, rec.config(map[string]string{NameBinanceStream: fake.URL()}), plan)
	pushtest.Eventually(t, "the subscribe request", func() bool { return fake.Requests() >= 1 })
	// A push on a stream of the URL, read by the client: the connection is
	// up and delivering, only the acknowledgement is missing.
	first := plan.Series[0]
	open := time.Date(2026, 11, 26, 15, 4, 0, 0, time.UTC)
	fake.Publish(binanceKlineStream(first), klinePayload(binanceSymbol(first.Symbol), open, "11", false))
	pushtest.Eventually(t, "the push read", func() bool {
		var n int
		rec.lockedRead(func() { n = len(rec.candles) })
		return n == 1
	})
	if m.Live(comb) {
		t.Fatal("live before the exchange acknowledged the subscriptions")
	}
	release()
	pushtest.Eventually(t, "live once acknowledged", func() bool { return m.Live(comb) })
}

// TestReconnectRepairsGap drops every connection after a candle was seen:
// the client reconnects, resubscribes, and asks for the gap from that
// candle's open time, however far the new connection has moved since;
// a series the dropped connection never delivered is asked for from the
// start of its candle at the connection's dial.
func TestReconnectRepairsGap(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewBinance(t, binanceSpotStreams, 5)
	rec := newRecorder()
	comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	plan := Plan{Combination: comb, Series: []Series{{"BTC_USDT", domain.TF1m}, {"ETH_USDT", domain.TF1m}}}
	m := run(t, rec.config(map[string]string{NameBinanceStream: fake.URL()}), plan)
	btc := binanceKlineStream(plan.Series[0])
	pushtest.Eventually(t, "subscribed", func() bool { return fake.AllSubscribed([]string{btc}) })

	open := time.Date(2026, 11, 26, 15, 4, 0, 0, time.UTC)
	fake.Publish(btc, klinePayload("BTCUSDT", open, "11", false))
	pushtest.Eventually(t, "the open candle", func() bool {
		var n int
		rec.lockedRead(func() { n = len(rec.candles) })
		return n == 1
	})
	dialled := time.Now()
	fake.DropAll()
	pushtest.Eventually(t, "the gaps repaired", func() bool {
		var n int
		rec.lockedRead(func() { n = len(rec.gaps) })
		return n == 2
	})
	pushtest.Eventually(t, "resubscribed", func() bool { return fake.AllSubscribed([]string{btc}) && m.Live(comb) })
	rec.lockedRead(func() {
		gaps := map[string]Gap{}
		for _, g := range rec.gaps {
			gaps[g.Symbol] = g
		}
		want := Gap{Combination: comb, Symbol: "BTC_USDT", Timeframe: domain.TF1m, Since: open}
		if gaps["BTC_USDT"] != want {
			t.Errorf("BTC gap = %+v, want %+v", gaps["BTC_USDT"], want)
		}
		eth := gaps["ETH_USDT"]
		if eth.Since.IsZero() || eth.Since.After(dialled) || dialled.Sub(eth.Since) > 2*time.Minute {
			t.Errorf("ETH gap = %+v, want from its candle at the dial (%v)", eth, dialled)
		}
		if rec.reconnects["binance-spot"] != 1 || rec.repairs["binance-spot"] != 2 {
			t.Errorf("reconnects = %v, repairs = %v, want 1 and 2", rec.reconnects, rec.repairs)
		}
	})
	// The stream keeps delivering on the new connection.
	fake.Publish(btc, klinePayload("BTCUSDT", open, "12", true))
	pushtest.Eventually(t, "the closed candle", func() bool {
		var ok bool
		rec.lockedRead(func() { ok = len(rec.candles) == 2 && rec.candles[1].Closed })
		return ok
	})
}

// TestRotationLosesNothing replaces connections well before a (shortened)
// 24 h cut while the exchange pushes without pause: every push arrives, and
// no gap repair is needed because the connections overlapped.
func TestRotationLosesNothing(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewBinance(t, binanceSpotStreams, 5)
	rec := newRecorder()
	cfg := rec.config(map[string]string{NameBinanceStream: fake.URL()})
	cfg.MaxAge = 400 * time.Millisecond
	comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	se := Series{"BTC_USDT", domain.TF1m}
	run(t, cfg, Plan{Combination: comb, Series: []Series{se}})
	stream := binanceKlineStream(se)
	pushtest.Eventually(t, "subscribed", func() bool { return fake.AllSubscribed([]string{stream}) })

	start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	sent := 0
	for accepted, _, _, _, _ := fake.Stats(); accepted < 4; accepted, _, _, _, _ = fake.Stats() {
		if fake.Publish(stream, klinePayload("BTCUSDT", start.Add(time.Duration(sent)*time.Minute), "11", true)) > 0 {
			sent++
		}
		time.Sleep(2 * time.Millisecond)
	}
	pushtest.Eventually(t, "every push delivered", func() bool {
		seen := map[time.Time]bool{}
		rec.lockedRead(func() {
			for _, c := range rec.candles {
				seen[c.Candle.Time] = true
			}
		})
		return len(seen) == sent
	})
	accepted, _, _, _, breaches := fake.Stats()
	t.Logf("%d pushes over %d connections", sent, accepted)
	if len(breaches) > 0 {
		t.Errorf("limits broken: %v", breaches)
	}
	rec.lockedRead(func() {
		if len(rec.gaps) != 0 || rec.reconnects["binance-spot"] != 0 {
			t.Errorf("rotation counted as a drop: gaps %v, reconnects %v", rec.gaps, rec.reconnects)
		}
	})
}

// TestServerShutdownRotates answers Binance's serverShutdown event with a
// new connection before the old one goes.
func TestServerShutdownRotates(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewBinance(t, binanceSpotStreams, 5)
	rec := newRecorder()
	comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	se := Series{"BTC_USDT", domain.TF1m}
	run(t, rec.config(map[string]string{NameBinanceStream: fake.URL()}), Plan{Combination: comb, Series: []Series{se}})
	stream := binanceKlineStream(se)
	pushtest.Eventually(t, "subscribed", func() bool { return fake.AllSubscribed([]string{stream}) })
	old := fake.Conns()[0]
	old.Write(context.Background(), `{"stream":"!serverShutdown","data":{"e":"serverShutdown","E":1770123456789}}`)
	// The replacement is ready once it delivers; keep pushing until it has.
	pushtest.Eventually(t, "a second connection", func() bool {
		fake.Publish(stream, klinePayload("BTCUSDT", time.Unix(60, 0), "11", false))
		accepted, _, _, _, _ := fake.Stats()
		return accepted == 2
	})
	pushtest.Eventually(t, "the old connection closed", func() bool {
		fake.Publish(stream, klinePayload("BTCUSDT", time.Unix(60, 0), "11", false))
		for _, c := range fake.Conns() {
			if c == old {
				return false
			}
		}
		return true
	})
}

// TestOKXChannels follows OKX candles on the business endpoint and tickers
// on the public one, keeps the connections alive with text pings, and
// delivers the pushes as domain values.
func TestOKXChannels(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewOKX(t)
	rec := newRecorder()
	cfg := rec.config(map[string]string{NameOKXStream: fake.URL()})
	cfg.PingAfter = 100 * time.Millisecond
	comb := domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "perpetual"}
	plan := Plan{Combination: comb, Series: []Series{{"BTC_USDT", domain.TF1h}, {"BTC_USDT", domain.TF1d}}, Tickers: true, Symbols: []string{"BTC_USDT"}}
	m := run(t, cfg, plan)
	topics := []string{"candle1H:BTC-USDT-SWAP", "candle1Dutc:BTC-USDT-SWAP", "tickers:BTC-USDT-SWAP"}
	pushtest.Eventually(t, "subscribed", func() bool { return fake.AllSubscribed(topics) && m.Live(comb) })
	pushtest.Eventually(t, "a keep-alive ping", func() bool { _, _, _, pings, _ := fake.Stats(); return pings > 0 })

	fake.Publish("candle1H:BTC-USDT-SWAP", okxSDKSwapCandle)
	fake.Publish("tickers:BTC-USDT-SWAP", okxSDKSwapTickers)
	pushtest.Eventually(t, "the candle and the ticker", func() bool {
		var ok bool
		rec.lockedRead(func() { ok = len(rec.candles) == 1 && len(rec.tickers) == 1 })
		return ok
	})
	accepted, _, _, _, breaches := fake.Stats()
	if len(breaches) > 0 {
		t.Fatalf("limits broken: %v", breaches)
	}
	if b, p := fake.PathCount("/ws/v5/business"), fake.PathCount("/ws/v5/public"); accepted != 2 || b != 1 || p != 1 {
		t.Errorf("%d connections: %d on business, %d on public; want one each", accepted, b, p)
	}
	if n := fake.Requests(); n != 2 {
		t.Errorf("%d subscribe requests, want one per connection", n)
	}
	rec.lockedRead(func() {
		want := CandleUpdate{Combination: comb, Symbol: "BTC_USDT", Timeframe: domain.TF1h,
			Candle: domain.Candle{Time: time.UnixMilli(1747141200000).UTC(), Open: 103644.1, High: 103700, Low: 103629.2, Close: 103700, Volume: 113.1608}}
		if rec.candles[0] != want {
			t.Errorf("candle = %+v, want %+v", rec.candles[0], want)
		}
		if got := rec.tickers[0]; got.Symbol != "BTC_USDT" || got.Price != 103700 {
			t.Errorf("ticker = %+v", got)
		}
	})
}

func TestRunRejectsUnservedPlans(t *testing.T) {
	t.Parallel()
	for _, p := range []Plan{
		{Combination: domain.Combination{Market: domain.Crypto, Exchange: "coinbase", Instrument: "spot"}},
		{Combination: domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "futures"}},
		{Combination: domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}, Series: []Series{{"BTC_USDT", "2h"}}},
	} {
		if err := New(Config{}).Run(context.Background(), []Plan{p}); err == nil {
			t.Errorf("%+v: Run accepted it", p)
		}
	}
}

func TestWindowLimiter(t *testing.T) {
	t.Parallel()
	l := newWindowLimiter(3, time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if d := l.reserve(t0.Add(time.Duration(i) * time.Second)); d != 0 {
			t.Fatalf("attempt %d refused (wait %v) within the budget", i, d)
		}
	}
	if d := l.reserve(t0.Add(10 * time.Second)); d != 50*time.Second {
		t.Fatalf("4th attempt: wait %v, want 50s (until the first leaves the window)", d)
	}
	if d := l.reserve(t0.Add(time.Minute)); d != 0 {
		t.Fatalf("attempt after the window refused (wait %v)", d)
	}
}

// obs.Push is the Metrics the service registers.
var _ Metrics = obs.Push{}

// TestEndpointNamesAreMetricsLabels: the endpoints the manager names are
// the label values obs exports from the start.
func TestEndpointNamesAreMetricsLabels(t *testing.T) {
	t.Parallel()
	m := New(Config{})
	seen := map[string]bool{}
	for _, c := range []domain.Combination{
		{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}, {Market: domain.Crypto, Exchange: "binance", Instrument: "perpetual"},
		{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"}, {Market: domain.Crypto, Exchange: "okx", Instrument: "perpetual"},
	} {
		plan := Plan{Combination: c, Series: []Series{{"BTC_USDT", domain.TF1m}}, Tickers: true, Symbols: []string{"BTC_USDT"}}
		for _, g := range m.endpointsOf(plan) {
			seen[g.ep.name] = true
			if !slices.Contains(obs.PushEndpoints, g.ep.name) {
				t.Errorf("endpoint %q is not in obs.PushEndpoints", g.ep.name)
			}
		}
	}
	seen[oandaEndpoint] = true  // OandaPricing's own connection
	seen[alpacaEndpoint] = true // NewAlpaca's single connection
	if !slices.Contains(obs.PushEndpoints, alpacaEndpoint) {
		t.Errorf("endpoint %q is not in obs.PushEndpoints", alpacaEndpoint)
	}
	if len(seen) != len(obs.PushEndpoints) {
		t.Errorf("endpoints used %v, obs exports %v", seen, obs.PushEndpoints)
	}
}

// TestHalfOpenConnectionIsReplaced: a server that accepts and then neither
// sends nor answers pings (a half-open connection) is probed after
// ProbeAfter of silence and dropped when no pong comes within
// ProbeTimeout; the client reconnects and the gap is repaired, instead of
// the shard reading live for StaleAfter (5 min).
func TestHalfOpenConnectionIsReplaced(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	accepted := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		mu.Lock()
		accepted++
		mu.Unlock()
		<-r.Context().Done() // never reads: pings stay unanswered
	}))
	t.Cleanup(srv.Close)
	rec := newRecorder()
	cfg := rec.config(map[string]string{NameBinanceStream: "ws" + strings.TrimPrefix(srv.URL, "http")})
	cfg.ProbeAfter, cfg.ProbeTimeout = 200*time.Millisecond, 200*time.Millisecond
	cfg.MinBackoff, cfg.MaxBackoff = 50*time.Millisecond, 100*time.Millisecond
	comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	m := run(t, cfg, Plan{Combination: comb, Series: []Series{{"BTC_USDT", domain.TF1m}}})
	pushtest.Eventually(t, "live", func() bool { return m.Live(comb) })
	began := time.Now()
	pushtest.Eventually(t, "the half-open connection replaced", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return accepted >= 2
	})
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("replaced after %v, want within about ProbeAfter+ProbeTimeout", took)
	}
	pushtest.Eventually(t, "the gap repaired", func() bool {
		var n int
		rec.lockedRead(func() { n = len(rec.gaps) })
		return n >= 1
	})
}

// TestUnreadySuccessorKeepsTheOldConnection: a replacement whose
// subscriptions the exchange never acknowledges is given up after
// ReadyTimeout; the old connection keeps delivering every stream, and the
// shard stays live on it.
func TestUnreadySuccessorKeepsTheOldConnection(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewBinance(t, binanceSpotStreams, 5)
	rec := newRecorder()
	cfg := rec.config(map[string]string{NameBinanceStream: fake.URL()})
	cfg.MaxAge, cfg.ReadyTimeout, cfg.MaxBackoff = 300*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond
	comb := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	plan := Plan{Combination: comb}
	for _, s := range symbols(binanceURLStreams + 5) { // the last 5 go by SUBSCRIBE
		plan.Series = append(plan.Series, Series{Symbol: s, Timeframe: domain.TF1m})
	}
	m := run(t, cfg, plan)
	pushtest.Eventually(t, "live", func() bool { return m.Live(comb) })
	first := fake.Conns()
	if len(first) != 1 {
		t.Fatalf("%d connections, want 1", len(first))
	}
	release := fake.HoldSubscriptions()
	t.Cleanup(release)
	pushtest.Eventually(t, "two successors tried", func() bool { accepted, _, _, _, _ := fake.Stats(); return accepted >= 3 })
	last := plan.Series[len(plan.Series)-1] // subscribed by message
	open := time.Date(2026, 11, 26, 15, 4, 0, 0, time.UTC)
	pushtest.Eventually(t, "the message-subscribed stream delivered", func() bool {
		fake.Publish(binanceKlineStream(last), klinePayload(binanceSymbol(last.Symbol), open, "11", true))
		var ok bool
		rec.lockedRead(func() {
			for _, c := range rec.candles {
				ok = ok || c.Symbol == last.Symbol
			}
		})
		return ok
	})
	if !slices.Contains(fake.Conns(), first[0]) {
		t.Error("the old connection was closed for a successor never acknowledged")
	}
	if !m.Live(comb) {
		t.Error("not live on the old connection")
	}
}
