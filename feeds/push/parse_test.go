package push

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/marketscreener/market/domain"
)

// The kline payload of
// https://github.com/binance/binance-spot-api-docs/blob/master/web-socket-streams.md#klinecandlestick-streams-for-utc
// (comments removed), wrapped as a combined stream delivers it.
const binanceDocKline = `{"stream":"bnbbtc@kline_1m","data":{
    "e": "kline", "E": 1672515782136, "s": "BNBBTC",
    "k": {
        "t": 1672515780000, "T": 1672515839999, "s": "BNBBTC", "i": "1m",
        "f": 100, "L": 200, "o": "0.0010", "c": "0.0020", "h": "0.0025", "l": "0.0015",
        "v": "1000", "n": 100, "x": false, "q": "1.0000", "V": "500", "Q": "0.500", "B": "123456"
    }
}}`

// The <symbol>@miniTicker payload of the same page, which !miniTicker@arr
// sends as an array ("All Market Mini Tickers Stream").
const binanceDocMiniTickers = `{"stream":"!miniTicker@arr","data":[{
    "e": "24hrMiniTicker", "E": 1672515782136, "s": "BNBBTC",
    "c": "0.0025", "o": "0.0010", "h": "0.0025", "l": "0.0010", "v": "10000", "q": "18"
}]}`

var floatEq = cmpopts.EquateApprox(0, 1e-9)

func decodeAll(t *testing.T, p protocol, msg string) []event {
	t.Helper()
	var got []event
	if err := p.decode([]byte(msg), func(ev event) { got = append(got, ev) }); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got
}

func TestBinanceDecodesDocKline(t *testing.T) {
	t.Parallel()
	got := decodeAll(t, binanceSpot(), binanceDocKline)
	want := []event{{kind: evCandle, topic: "bnbbtc@kline_1m", closed: false, candle: domain.Candle{
		Time: time.UnixMilli(1672515780000).UTC(), Open: 0.0010, High: 0.0025, Low: 0.0015, Close: 0.0020, Volume: 1000,
	}}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(event{}), floatEq); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// The documented example itself is not a possible candle: its low
	// (0.0015) is above its open (0.0010). The shard drops such updates.
	if got[0].candle.Validate() == nil {
		t.Fatal("the docs' example kline passed validation; the shard would store it")
	}
}

func TestBinanceDecodesDocMiniTickers(t *testing.T) {
	t.Parallel()
	got := decodeAll(t, binanceSpot(), binanceDocMiniTickers)
	want := []event{{kind: evTickers, tickers: []exchangeTicker{{symbol: "BNBBTC", ticker: domain.Ticker{
		Price: 0.0025, ChangePct: 150, Volume: 18, UpdatedAt: time.UnixMilli(1672515782136).UTC(),
	}}}}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(event{}, exchangeTicker{}), floatEq); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func TestBinanceDecodesControlMessages(t *testing.T) {
	t.Parallel()
	// Answers and the shutdown notice as documented on the same page
	// ("Live Subscribing/Unsubscribing", "Error Messages", "Server Shutdown").
	for _, tc := range []struct {
		msg  string
		want eventKind
	}{
		{`{"result": null, "id": 1}`, evAck},
		{`{"code": 0, "msg": "Unknown property", "id": 2}`, evRefused},
		{`{"stream": "!serverShutdown", "data": {"e": "serverShutdown", "E": 1770123456789}}`, evShutdown},
	} {
		got := decodeAll(t, binanceSpot(), tc.msg)
		if len(got) != 1 || got[0].kind != tc.want {
			t.Errorf("%s: got %+v, want one event of kind %d", tc.msg, got, tc.want)
		}
	}
}

func TestBinanceSubscribeRequests(t *testing.T) {
	t.Parallel()
	p := binanceSpot()
	topics := make([]topic, binanceSpotStreams)
	for i := range topics {
		topics[i] = topic{name: "s" + string(rune('a'+i%26)) + "usdt@kline_1m"}
	}
	url, rest := p.dialURL("wss://x", topics)
	if len(rest) != binanceSpotStreams-binanceURLStreams {
		t.Fatalf("rest = %d topics, want %d", len(rest), binanceSpotStreams-binanceURLStreams)
	}
	if len(url) > 4096 {
		t.Errorf("dial URL is %d bytes", len(url))
	}
	msgs, acks := p.subscribe(rest)
	if want := (len(rest) + binanceSubscribeParams - 1) / binanceSubscribeParams; len(msgs) != want || acks != want {
		t.Fatalf("%d requests, %d acks; want %d each", len(msgs), acks, want)
	}
}

// An SDK fixture of OKX's candle and tickers pushes for a linear swap:
// docs.rs okx 0.2.0, src/dto/websocket/websocket_dto.rs
// (https://docs.rs/crate/okx/0.2.0/source/src/dto/websocket/websocket_dto.rs).
const (
	okxSDKSwapCandle  = `{"arg":{"channel":"candle1H","instId":"BTC-USDT-SWAP"},"data":[["1747141200000","103644.1","103700","103629.2","103700","11316.08","113.1608","11731625.855","0"]]}`
	okxSDKSwapTickers = `{"arg":{"channel":"tickers","instId":"BTC-USDT-SWAP"},"data":[{"instType":"SWAP","instId":"BTC-USDT-SWAP","last":"103700","lastSz":"0.01","askPx":"103700","askSz":"1004.09","bidPx":"103699.9","bidSz":"299.02","open24h":"103897.5","high24h":"104628.1","low24h":"100700","sodUtc0":"102740.1","sodUtc8":"102480.1","volCcy24h":"109187.9625","vol24h":"10918796.25","ts":"1747141319306"}]}`
)

// The spot tickers "Push Data Example" of
// https://www.okx.com/docs-v5/en/#order-book-trading-market-data-ws-tickers-channel,
// verbatim (checked against a copy of that page: qiuham/crypto-api-docs,
// docs/okx/order/book/trading-market-data-ws-tickers-channel.md).
const okxDocSpotTickers = `{"arg":{"channel":"tickers","instId":"BTC-USDT"},"data":[{"instType":"SPOT","instId":"BTC-USDT","last":"9999.99","lastSz":"0.1","askPx":"9999.99","askSz":"11","bidPx":"8888.88","bidSz":"5","open24h":"9000","high24h":"10000","low24h":"8888.88","volCcy24h":"2222","vol24h":"2222","sodUtc0":"2222","sodUtc8":"2222","ts":"1597026383085"}]}`

func TestOKXDecodesPushes(t *testing.T) {
	t.Parallel()
	p := okxBusiness(time.Second)
	for _, tc := range []struct {
		name, msg string
		want      []event
	}{
		{"swap candle: volume in base currency (volCcy)", okxSDKSwapCandle, []event{{kind: evCandle, topic: "candle1H:BTC-USDT-SWAP", candle: domain.Candle{
			Time: time.UnixMilli(1747141200000).UTC(), Open: 103644.1, High: 103700, Low: 103629.2, Close: 103700, Volume: 113.1608,
		}}}},
		{"closed spot candle: volume in base currency (vol)", `{"arg":{"channel":"candle1m","instId":"BTC-USDT"},"data":[["1597026360000","8533.02","8553.74","8527.17","8548.26","45247","386732281.5","386732281.5","1"]]}`,
			[]event{{kind: evCandle, topic: "candle1m:BTC-USDT", closed: true, candle: domain.Candle{
				Time: time.UnixMilli(1597026360000).UTC(), Open: 8533.02, High: 8553.74, Low: 8527.17, Close: 8548.26, Volume: 45247,
			}}}},
		{"swap tickers: base volume converted at the last price", okxSDKSwapTickers, []event{{kind: evTickers, tickers: []exchangeTicker{{symbol: "BTC-USDT-SWAP", ticker: domain.Ticker{
			Price: 103700, ChangePct: (103700/103897.5 - 1) * 100, Volume: 109187.9625 * 103700, UpdatedAt: time.UnixMilli(1747141319306).UTC(),
		}}}}}},
		{"spot tickers: quote volume", okxDocSpotTickers, []event{{kind: evTickers, tickers: []exchangeTicker{{symbol: "BTC-USDT", ticker: domain.Ticker{
			Price: 9999.99, ChangePct: (9999.99/9000 - 1) * 100, Volume: 2222, UpdatedAt: time.UnixMilli(1597026383085).UTC(),
		}}}}}},
		{"subscribe answer", `{"event":"subscribe","arg":{"channel":"tickers","instId":"BTC-USDT"},"connId":"accb8e21"}`, []event{{kind: evAck}}},
		{"error answer", `{"event":"error","code":"60012","msg":"Invalid request: {\"op\": \"subscribe\", \"argss\":[{ \"channel\" : \"tickers\", \"instId\" : \"BTC-USDT\"}]}","connId":"a4d3ae55"}`, []event{{kind: evRefused, msg: `code 60012: Invalid request: {"op": "subscribe", "argss":[{ "channel" : "tickers", "instId" : "BTC-USDT"}]}`}}},
		{"service upgrade notice", `{"event":"notice","code":"64008","msg":"The connection will soon be closed for a service upgrade. Please reconnect.","connId":"a4d3ae55"}`, []event{{kind: evShutdown}}},
		{"pong", "pong", []event{{kind: evPong}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeAll(t, p, tc.msg)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(event{}, exchangeTicker{}), floatEq); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOKXSubscribeRequestsStayUnder64KB(t *testing.T) {
	t.Parallel()
	topics := make([]topic, 2*okxArgs)
	for i := range topics {
		topics[i] = topic{name: okxCandleKey(Series{Symbol: "ABCDEFGHIJKLMN" + string(rune('A'+i%26)) + "_USDT", Timeframe: domain.TF15m}, true)}
	}
	msgs, acks := okxBusiness(time.Second).subscribe(topics)
	if acks != len(topics) {
		t.Fatalf("acks = %d, want one per channel (%d)", acks, len(topics))
	}
	if len(msgs) < 2 {
		t.Fatalf("%d requests for %d channels, want them split", len(msgs), len(topics))
	}
	for i, m := range msgs {
		if len(m) > 64<<10 {
			t.Errorf("request %d is %d bytes, over 64 KB", i, len(m))
		}
	}
}

func TestDecodeRejectsBadNumbers(t *testing.T) {
	t.Parallel()
	bad := `{"stream":"btcusdt@kline_1m","data":{"e":"kline","E":1,"s":"BTCUSDT","k":{"t":1672515780000,"o":"NaN","h":"1","l":"1","c":"1","v":"1","x":true}}}`
	if err := binanceSpot().decode([]byte(bad), func(event) {}); err == nil {
		t.Fatal("a NaN open decoded without error")
	}
	if _, _, err := okxCandleRow([]string{"1", "1", "1", "1", "1", "Inf", "1", "1", "1"}, false); err == nil {
		t.Fatal("an infinite volume decoded without error")
	}
}

// FuzzDecode feeds arbitrary messages to both protocols: nothing panics,
// and every number decoded is finite (non-finite text is refused).
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{binanceDocKline, binanceDocMiniTickers, okxSDKSwapCandle, okxSDKSwapTickers, okxDocSpotTickers,
		`{"result":null,"id":1}`, "pong", `{"event":"notice"}`, `{"stream":"x@kline_1m","data":{"e":"kline","k":{"t":1,"o":"1e400"}}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range []protocol{binanceSpot(), okxPublic(time.Second)} {
			_ = p.decode(data, func(ev event) {
				c := ev.candle
				for _, v := range []float64{c.Open, c.High, c.Low, c.Close, c.Volume} {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("non-finite candle value from %q", data)
					}
				}
				for _, r := range ev.tickers {
					for _, v := range []float64{r.ticker.Price, r.ticker.Volume} {
						if math.IsNaN(v) || math.IsInf(v, 0) {
							t.Fatalf("non-finite ticker value from %q", data)
						}
					}
				}
			})
		}
	})
}
