package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// fakeBinanceREST serves the exchangeInfo and klines the push ingest
// reads (symbols to follow, gap repairs), and records the klines asked.
type fakeBinanceREST struct {
	mu     sync.Mutex
	klines []string // "SYMBOL interval startTime"
}

func (f *fakeBinanceREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/v3/exchangeInfo":
		fmt.Fprint(w, `{"symbols":[{"symbol":"BTCUSDT","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT"},{"symbol":"ETHUSDT","status":"TRADING","baseAsset":"ETH","quoteAsset":"USDT"}]}`)
	case "/fapi/v1/exchangeInfo":
		fmt.Fprint(w, `{"symbols":[{"symbol":"BTCUSDT","pair":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT"}]}`)
	case "/api/v3/klines":
		q := r.URL.Query()
		f.mu.Lock()
		f.klines = append(f.klines, q.Get("symbol")+" "+q.Get("interval")+" "+q.Get("startTime"))
		f.mu.Unlock()
		start, _ := strconv.ParseInt(q.Get("startTime"), 10, 64)
		if start == 0 {
			fmt.Fprint(w, `[]`)
			return
		}
		// The candle the stream saw open, now closed, and the one after it.
		fmt.Fprintf(w, `[[%d,"10","21","5","16","100",%d,"0",1,"0","0","0"],[%d,"16","17","15","16.5","7",%d,"0",1,"0","0","0"]]`,
			start, start+3599999, start+3600000, start+7199999)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeBinanceREST) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.klines...)
}

// changeRecorder is a ChangeSink that wants the 1h series.
type changeRecorder struct {
	mu      sync.Mutex
	changed []store.CandleKey
}

func (c *changeRecorder) WantsCandles(_ domain.Market, _ string, tf domain.Timeframe) bool {
	return tf == domain.TF1h
}

func (c *changeRecorder) CandlesChanged(_ context.Context, keys []store.CandleKey) {
	c.mu.Lock()
	c.changed = append(c.changed, keys...)
	c.mu.Unlock()
}

func (c *changeRecorder) FundamentalsChanged(context.Context, domain.Market, []string) {}

func (c *changeRecorder) has(k store.CandleKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.changed {
		if x == k {
			return true
		}
	}
	return false
}

// TestPushIngestStoresPushes runs the push ingest of the eu region
// against in-test Binance stream and REST servers: one REST catch-up pass
// before the exchange is marked live, after which scheduled REST ingest
// loads only series with nothing stored; pushed candles stored and announced
// to the score trigger (an open candle's later states held back, its close
// stored at once); pushed tickers replacing the screener rows; a dropped
// connection's gap fetched over REST; and a second worker not pushing
// while the first holds the lease.
func TestPushIngestStoresPushes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rest := &fakeBinanceREST{}
	restSrv := httptest.NewServer(rest)
	t.Cleanup(restSrv.Close)
	spotWS := pushtest.NewBinance(t, 1024, 5)
	futWS := pushtest.NewBinance(t, 200, 10)
	reg, err := feeds.New(feeds.Config{Names: []string{"binance"}, BaseURLs: map[string]string{"binance": restSrv.URL, "binance-futures": restSrv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)
	changes := &changeRecorder{}
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: discard(), Now: time.Now, Changes: changes}
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	in.Pushed = worker.PushedCandles(rdb, prefix)
	for range 2 { // the second waits for the lease
		s := &worker.PushIngest{In: in, Region: "eu", Redis: rdb, KeyPrefix: prefix, LeaseTTL: 3 * time.Second, Logger: discard(),
			FlushEvery: 50 * time.Millisecond, TickerFlushEvery: 50 * time.Millisecond, OpenEvery: time.Hour,
			Push: push.Config{BaseURLs: map[string]string{push.NameBinanceStream: spotWS.URL(), push.NameBinanceFuturesStream: futWS.URL()},
				MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = s.Run(runCtx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}

	spotTopics := []string{"btcusdt@kline_1h", "ethusdt@kline_1m", "ethusdt@kline_1w", "!miniTicker@arr"}
	pushtest.Eventually(t, "spot streams subscribed", func() bool { return spotWS.AllSubscribed(spotTopics) })
	pushtest.Eventually(t, "perpetual tickers subscribed", func() bool { return futWS.AllSubscribed([]string{"!miniTicker@arr"}) })
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	pushtest.Eventually(t, "spot candles marked live", func() bool { return in.Pushed(ctx, spot, domain.TF1m).All })
	pushtest.Eventually(t, "a REST catch-up of every series", func() bool { return len(rest.asked()) >= 2*len(domain.Timeframes) })
	if n := len(rest.asked()); n != 2*len(domain.Timeframes) {
		t.Errorf("catch-up asked %d klines, want one per series (%d)", n, 2*len(domain.Timeframes))
	}
	// The timeframe scoring reads (1h here) is loaded first: after a cold
	// start the reports wait for its history.
	for _, a := range rest.asked()[:2] {
		if !strings.Contains(a, " 1h ") {
			t.Errorf("catch-up asked %v first, want the 1h series", rest.asked()[:2])
			break
		}
	}

	open := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	spotWS.Publish("btcusdt@kline_1h", fmt.Sprintf(`{"e":"kline","E":1,"s":"BTCUSDT","k":{"t":%d,"T":%d,"s":"BTCUSDT","i":"1h","o":"10","c":"15","h":"20","l":"5","v":"100","x":false,"V":"1","L":3}}`,
		open.UnixMilli(), open.UnixMilli()+3599999))
	futWS.Publish("!miniTicker@arr", fmt.Sprintf(`[{"e":"24hrMiniTicker","E":%d,"s":"BTCUSDT","c":"101","o":"100","h":"102","l":"99","v":"5","q":"505"}]`, open.UnixMilli()))
	btc1h := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}
	pushtest.Eventually(t, "the pushed candle stored and announced", func() bool {
		cs, err := db.Candles(ctx, btc1h, 10)
		return err == nil && len(cs) == 1 && cs[0].Close == 15 && changes.has(btc1h)
	})
	perp := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "perpetual"}
	pushtest.Eventually(t, "the pushed ticker stored", func() bool {
		ts, err := db.Tickers(ctx, perp)
		return err == nil && len(ts) == 1 && ts[0].Symbol == "BTC_USDT" && ts[0].Price == 101 && ts[0].Volume == 505
	})
	if accepted, _, _, _, breaches := spotWS.Stats(); accepted != 1 || len(breaches) > 0 {
		t.Fatalf("spot connections = %d (want 1: one worker holds the push feeds), breaches %v", accepted, breaches)
	}

	// The scheduled REST ingest now loads only series with nothing stored.
	before := len(rest.asked())
	if _, err := in.IngestCandles(ctx, spot, domain.TF1h, nil); err != nil {
		t.Fatal(err)
	}
	if got := rest.asked()[before:]; len(got) != 1 || got[0] != "ETHUSDT 1h " {
		t.Errorf("scheduled ingest of a pushed exchange asked %q, want only ETHUSDT (nothing stored)", got)
	}

	// A still-open candle's later states wait for OpenEvery; its close is
	// stored at once. Pushes of one connection are handled in order, so
	// once the ETH candle pushed after BTC's second state is stored, that
	// state has been seen and held back.
	kline := func(sym, tf string, open time.Time, c string, closed bool) string {
		return fmt.Sprintf(`{"e":"kline","E":1,"s":%q,"k":{"t":%d,"s":%q,"i":%q,"o":"10","c":%q,"h":"20","l":"5","v":"100","x":%t}}`,
			sym, open.UnixMilli(), sym, tf, c, closed)
	}
	spotWS.Publish("btcusdt@kline_1h", kline("BTCUSDT", "1h", open, "15.5", false))
	spotWS.Publish("ethusdt@kline_1m", kline("ETHUSDT", "1m", open, "7", true))
	eth1m := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF1m}
	pushtest.Eventually(t, "the closed ETH candle stored", func() bool {
		cs, err := db.Candles(ctx, eth1m, 10)
		return err == nil && len(cs) == 1 && cs[0].Close == 7
	})
	if cs, err := db.Candles(ctx, btc1h, 10); err != nil || len(cs) != 1 || cs[0].Close != 15 {
		t.Fatalf("BTC 1h = %+v, %v; want the open candle's second state held back (close 15)", cs, err)
	}
	pushed := time.Now()
	spotWS.Publish("btcusdt@kline_1h", kline("BTCUSDT", "1h", open, "15.7", true))
	pushtest.Eventually(t, "the closed BTC candle stored at once", func() bool {
		cs, err := db.Candles(ctx, btc1h, 10)
		return err == nil && len(cs) == 1 && cs[0].Close == 15.7
	})
	t.Logf("closed candle pushed → stored: %v", time.Since(pushed))

	spotWS.DropAll()
	want := "BTCUSDT 1h " + strconv.FormatInt(open.UnixMilli(), 10)
	pushtest.Eventually(t, "the gap fetched over REST from the last candle seen", func() bool {
		for _, k := range rest.asked() {
			if k == want {
				return true
			}
		}
		return false
	})
	// The closed candle repaired; the one forming is the push feed's, not
	// stored from REST while the combination is pushed.
	pushtest.Eventually(t, "the gap stored", func() bool {
		cs, err := db.Candles(ctx, btc1h, 10)
		return err == nil && len(cs) == 1 && cs[0].Close == 16
	})
}
