package exchangesim_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
)

// TestStreamsFeedThePushClient: feeds/push's Manager, pointed at the
// simulator for both stream hosts, receives the spot and USDⓈ-M klines
// of the subscribed series (the closed state of a candle once the clock
// passes its close, equal to the REST kline of that minute) and the mini
// tickers; /sim/stats counts the connections and pushes and no breach.
func TestStreamsFeedThePushClient(t *testing.T) {
	t.Parallel()
	// The simulator's clock starts 1.5 s before a minute's end, so a 1m
	// candle closes early in the test.
	real := time.Now()
	offset := real.Truncate(time.Minute).Add(time.Minute - 1500*time.Millisecond).Sub(real)
	sim, srv := serve(t, exchangesim.Config{Spot: 30, Perpetual: 25, KlineEvery: 200 * time.Millisecond,
		TickerEvery: 200 * time.Millisecond, Now: func() time.Time { return time.Now().Add(offset) }})
	t.Cleanup(sim.Close)
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")

	var mu sync.Mutex
	closed := map[string]domain.Candle{}
	tickers := map[domain.Combination]int{}
	m := push.New(push.Config{
		BaseURLs: map[string]string{push.NameBinanceStream: ws, push.NameBinanceFuturesStream: ws},
		OnCandle: func(u push.CandleUpdate) {
			if u.Closed {
				mu.Lock()
				closed[u.Combination.Instrument+":"+u.Symbol] = u.Candle
				mu.Unlock()
			}
		},
		OnTickers: func(c domain.Combination, rows []domain.Ticker) {
			mu.Lock()
			tickers[c] = max(tickers[c], len(rows))
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plans := []push.Plan{
		{Combination: spot, Tickers: true, Symbols: []string{"BTC_USDT", "ETH_USDT"},
			Series: []push.Series{{Symbol: "BTC_USDT", Timeframe: domain.TF1m}, {Symbol: "ETH_USDT", Timeframe: domain.TF1h}}},
		{Combination: perp, Tickers: true, Symbols: []string{"1000PEPE_USDT"},
			Series: []push.Series{{Symbol: "1000PEPE_USDT", Timeframe: domain.TF1m}}},
	}
	go func() { _ = m.Run(ctx, plans) }()

	pushtest.Eventually(t, "closed 1m candles of both families and mini tickers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return closed["spot:BTC_USDT"].Close > 0 && closed["perpetual:1000PEPE_USDT"].Close > 0 &&
			tickers[spot] == 2 && tickers[perp] == 1
	})
	mu.Lock()
	got := closed["spot:BTC_USDT"]
	_, stillOpen := closed["spot:ETH_USDT"]
	mu.Unlock()
	boundary := real.Truncate(time.Minute).Add(time.Minute)
	if stillOpen && !boundary.Truncate(time.Hour).Equal(boundary) {
		t.Error("an open 1h candle was pushed as closed")
	}
	rest := klines(t, sim, "symbol=BTCUSDT&interval=1m&limit=1&startTime="+strconv.FormatInt(got.Time.UnixMilli(), 10))
	if len(rest) != 1 || rest[0][4] != strconv.FormatFloat(got.Close, 'f', 8, 64) {
		t.Errorf("streamed closed candle %+v differs from REST's %v", got, rest)
	}

	st := sim.Stats()
	for name, s := range map[string]exchangesim.StreamStats{"spot": st.SpotStreams, "futures": st.FuturesStreams} {
		if s.Connections < 1 || s.Pushed == 0 || len(s.Breaches) > 0 || s.Refused429 != 0 {
			t.Errorf("%s streams: %+v", name, s)
		}
	}
	if st.SpotStreams.MaxStreamsPerConn != 1024 || st.FuturesStreams.MaxStreamsPerConn != 200 {
		t.Errorf("documented stream limits not the defaults: %+v", st)
	}
}

// TestStreamLimits: connection attempts over the per-IP budget are refused
// 429 before the upgrade, more streams than a connection may hold are a
// breach, and a connection is cut at its maximum age.
func TestStreamLimits(t *testing.T) {
	t.Parallel()
	sim, srv := serve(t, exchangesim.Config{Spot: 5, Perpetual: 5, SpotStreams: 2, StreamAttempts: 3,
		StreamAttemptWindow: time.Hour, StreamMaxAge: 300 * time.Millisecond})
	t.Cleanup(sim.Close)
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/stream?streams="
	ctx := context.Background()
	for i := range 3 {
		c, _, err := websocket.Dial(ctx, ws+"btcusdt@kline_1m/ethusdt@kline_1m/bnbusdt@kline_1m", nil)
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		for {
			if _, _, err := c.Read(rctx); err != nil {
				break // cut at its maximum age (or the time-out, reported below)
			}
		}
		if rctx.Err() != nil {
			t.Errorf("attempt %d: connection not cut at its maximum age", i+1)
		}
		cancel()
	}
	_, resp, err := websocket.Dial(ctx, ws+"btcusdt@kline_1m", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th attempt within the window: %v %v, want 429", resp, err)
	}
	st := sim.Stats().SpotStreams
	if st.Connections != 3 || st.Refused429 != 1 || len(st.Breaches) == 0 || st.MostStreams != 3 {
		t.Errorf("spot streams: %+v", st)
	}
}
