package push

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
)

// The encoding/json decoder binanceProto.decode had before it moved to
// fastjson, kept as the reference the new one is compared with.

type refBinanceMessage struct {
	Stream string          `json:"stream"`
	Data   json.RawMessage `json:"data"`
	ID     json.RawMessage `json:"id"`
	Code   *int            `json:"code"`
	Msg    string          `json:"msg"`
}

func refBinanceDecode(data []byte, emit func(event)) error {
	var m refBinanceMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("binance: %w", err)
	}
	switch {
	case m.Stream == binanceMiniTickers:
		rows, err := refParseBinanceMiniTickers(m.Data)
		if err != nil {
			return err
		}
		emit(event{kind: evTickers, tickers: rows})
	case m.Stream == "!serverShutdown":
		emit(event{kind: evShutdown})
	case strings.Contains(m.Stream, "@kline_"):
		k, closed, err := refParseBinanceKline(m.Data)
		if err != nil {
			return fmt.Errorf("binance: %s: %w", m.Stream, err)
		}
		emit(event{kind: evCandle, topic: m.Stream, candle: k, closed: closed})
	case m.Code != nil:
		emit(event{kind: evRefused, msg: fmt.Sprintf("code %d: %s", *m.Code, m.Msg)})
	case len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")):
		emit(event{kind: evAck})
	}
	return nil
}

type refBinanceKline struct {
	Event     string `json:"e"`
	EventTime int64  `json:"E"`
	K         struct {
		Open      int64  `json:"t"`
		CloseTime int64  `json:"T"`
		O         string `json:"o"`
		H         string `json:"h"`
		L         string `json:"l"`
		LastTrade int64  `json:"L"`
		C         string `json:"c"`
		V         string `json:"v"`
		TakerBase string `json:"V"`
		Closed    bool   `json:"x"`
	} `json:"k"`
}

func refParseBinanceKline(data []byte) (domain.Candle, bool, error) {
	var e refBinanceKline
	if err := json.Unmarshal(data, &e); err != nil {
		return domain.Candle{}, false, err
	}
	if e.Event != "kline" || e.K.Open <= 0 {
		return domain.Candle{}, false, fmt.Errorf("not a kline event (e=%q, t=%d)", e.Event, e.K.Open)
	}
	c := domain.Candle{Time: time.UnixMilli(e.K.Open).UTC()}
	err := decimals(
		decimal{"o", e.K.O, &c.Open}, decimal{"h", e.K.H, &c.High}, decimal{"l", e.K.L, &c.Low},
		decimal{"c", e.K.C, &c.Close}, decimal{"v", e.K.V, &c.Volume})
	return c, e.K.Closed, err
}

type refBinanceMiniTicker struct {
	Event string `json:"e"`
	Time  int64  `json:"E"`
	S     string `json:"s"`
	C     string `json:"c"`
	O     string `json:"o"`
	Q     string `json:"q"`
}

func refParseBinanceMiniTickers(data []byte) ([]exchangeTicker, error) {
	var rows []refBinanceMiniTicker
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("binance: %s: %w", binanceMiniTickers, err)
	}
	out := make([]exchangeTicker, 0, len(rows))
	for _, r := range rows {
		var last, open float64
		if r.Event != "24hrMiniTicker" || r.Time <= 0 {
			continue
		}
		t := domain.Ticker{UpdatedAt: time.UnixMilli(r.Time).UTC()}
		if decimals(decimal{"c", r.C, &last}, decimal{"o", r.O, &open}, decimal{"q", r.Q, &t.Volume}) != nil || open <= 0 {
			continue
		}
		t.Price, t.ChangePct = last, (last/open-1)*100
		out = append(out, exchangeTicker{symbol: r.S, ticker: t})
	}
	return out, nil
}

// binanceDecodeCases are pushes the two decoders must treat alike.
func binanceDecodeCases() []string {
	open := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	kl := func(k string) string {
		return `{"stream":"btcusdt@kline_1m","data":{"e":"kline","E":1672515782136,"s":"BTCUSDT","k":{` + k + `}}}`
	}
	full := `"t":1672515780000,"T":1672515839999,"s":"BTCUSDT","i":"1m","f":100,"L":200,"o":"0.0010","c":"0.0020","h":"0.0025","l":"0.0015","v":"1000","n":100,"x":false,"q":"1.0000","V":"500","Q":"0.500","B":"123456"`
	mt := func(rows string) string { return `{"stream":"!miniTicker@arr","data":[` + rows + `]}` }
	row := `{"e":"24hrMiniTicker","E":1672515782136,"s":"BNBBTC","c":"0.0025","o":"0.0010","h":"0.0025","l":"0.0010","v":"10000","q":"18"}`
	cases := []string{
		binanceDocKline, binanceDocMiniTickers,
		`{"stream":"btcusdt@kline_1m","data":` + klinePayload("BTCUSDT", open, "12.5", true) + `}`,
		`{"stream":"btcusdt@kline_1m","data":` + klinePayload("BTCUSDT", open, "11", false) + `}`,
		mt(fmt.Sprintf(`{"e":"24hrMiniTicker","E":%d,"s":"BTCUSDT","c":"12.5","o":"10","h":"20","l":"5","v":"100","q":"1250"},{"e":"24hrMiniTicker","E":1,"s":"NOTFOLLOWED","c":"1","o":"1","h":"1","l":"1","v":"1","q":"1"}`, open.UnixMilli())),
		// Control messages.
		`{"result": null, "id": 1}`, `{"result":null,"id":"abc"}`, `{"result":null,"id":null}`, `{"result":null}`,
		`{"id":1,"id":null}`, `{"id":null,"id":2}`, `{"id":[1]}`, `{"id":{}}`, `{"id":false}`,
		`{"code": 0, "msg": "Unknown property", "id": 2}`, `{"code":-1121,"msg":"Invalid symbol."}`,
		`{"code":2,"code":null,"id":3}`, `{"code":null,"msg":"x"}`, `{"code":1.5,"msg":"x"}`, `{"code":"1","msg":"x"}`,
		`{"code":1e2}`, `{"code":-0,"msg":null}`, `{"code":99999999999999999999}`, `{"code":1,"msg":5}`,
		`{"stream": "!serverShutdown", "data": {"e": "serverShutdown", "E": 1770123456789}}`,
		`{"stream":"!serverShutdown"}`, `{"stream":"!serverShutdown","data":"x"}`,
		// Top-level shapes and bad JSON.
		``, ` `, `null`, ` null `, `[]`, `"s"`, `5`, `true`, `{}`, `{"stream":5}`, `{"stream":null}`,
		`{"stream":"x@kline_1m","data":`, kl(full)[:40], `{"stream":"a"}x`, `{"stream":"a",}`, `{'stream':'a'}`,
		`{"stream":"a","n":01}`, `{"stream":"a","n":+1}`, `{"stream":"a","n":.5}`, `{"stream":"a","n":1.}`,
		`{"stream":"a","n":NaN}`, `{"stream":"a","n":-Inf}`, `{"stream":"a","s":"\x01"}`, `{"stream":"a","s":"\q"}`,
		`{"stream":"a","s":"\u12"}`, `{"stream":"a","s":"\u12zz"}`, `{"stream":"a","n":tru}`, `{"stream":"a"`,
		"{\"stream\":\"a\"}\x00", "\ufeff{}", `{"stream":"a","x":[1,2,{"y":null}]}`,
		// Klines: the field variants.
		kl(full),
		"\n\t{ \"stream\" : \"btcusdt@kline_1m\" ,\r\n \"data\" : { \"k\" : {" + full + "} , \"e\" : \"kline\" } }\n",
		`{"data":{"k":{` + full + `},"E":1,"e":"kline"},"stream":"btcusdt@kline_1m"}`,
		`{"data":null,"stream":"btcusdt@kline_1m"}`, `{"stream":"btcusdt@kline_1m"}`,
		`{"stream":"btcusdt@kline_1m","data":[]}`, `{"stream":"btcusdt@kline_1m","data":"kline"}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":null}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":[]}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":{` + full + `},"k":{"c":"9"}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":{` + full + `},"k":null}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","e":"trade","k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"trade","e":"kline","k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","E":"1","k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":5,"k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":null,"k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","stream":"ethusdt@kline_5m","data":{"e":"kline","k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":{` + full + `}},"data":{"e":"kline"}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":{` + full + `},"extra":{"nested":[1,{"a":"b"}]},"k2":1}}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":{` + full + `}},"unknown":[true,false,null],"id":7}`,
		`{"stream":"btcusdt@kline_1m","data":{"e":"kline","k":{` + full + `}},"code":5}`,
		`{"stream":"b\u0074cusdt@kline_1m","data":{"\u0065":"k\u006cine","k":{` + full + `,"\u006f":"0.5\u0030"}}}`,
		`{"stream":"btc\"usdt\\/\n@kline_1m","data":{"e":"kline","k":{` + full + `}}}`,
		`{"stream":"btcusdt@kline_1m\u00e9\u4e16","data":{"e":"kline","k":{` + full + `}}}`,
		"{\"stream\":\"btc\xffusdt@kline_1m\",\"data\":{\"e\":\"kline\",\"k\":{" + full + "}}}",
		"{\"stream\":\"btc\xed\xa0\x80usdt@kline_1m\",\"data\":{\"e\":\"kline\",\"k\":{" + full + "}}}",
		"{\"stream\":\"btcusdt@kline_1m\",\"data\":{\"e\":\"kline\",\"k\":{" + full + ",\"o\":\"1\xff\"}}}",
		`{"stream":"@kline_","data":{"e":"kline","k":{` + full + `}}}`,
	}
	for _, k := range []string{
		`"x":true`, `"x":false`, `"x":null`, `"x":"true"`, `"x":1`, `"x":true,"x":false`,
		`"t":0`, `"t":-5`, `"t":null`, `"t":"1672515780000"`, `"t":1672515780000.0`, `"t":1.6725e12`, `"t":99999999999999999999`,
		`"t":-0`, `"t":1672515780000,"t":0`, `"T":"x"`, `"L":1.5`, `"L":null`, `"V":5`, `"V":null`, `"E":1`,
		`"o":1`, `"o":null`, `"o":""`, `"o":"abc"`, `"o":"NaN"`, `"o":"Inf"`, `"o":"1e400"`, `"o":"0x10"`, `"o":" 1"`,
		`"o":"1_0"`, `"o":"-1"`, `"o":"1e-3"`, `"h":true`, `"l":{}`, `"c":[]`, `"v":"1,5"`, `"c":"1\u0030"`,
		`"n":"100"`, `"s":5`, `"q":5`, `"Q":null`, `"B":[]`, `"i":{}`, `"f":"x"`,
	} {
		cases = append(cases, kl(full+","+k), kl(k+","+full))
	}
	// Missing fields: each field of the documented payload dropped in turn.
	fields := strings.Split(full, ",")
	for i := range fields {
		cases = append(cases, kl(strings.Join(append(append([]string(nil), fields[:i]...), fields[i+1:]...), ",")))
	}
	// Mini tickers.
	cases = append(cases,
		mt(``), mt(row), mt(row+","+row), mt(`null`), mt(row+`,null`), mt(`5`), mt(row+`,"x"`), mt(`[]`),
		`{"stream":"!miniTicker@arr","data":null}`, `{"stream":"!miniTicker@arr"}`,
		`{"stream":"!miniTicker@arr","data":{}}`, `{"stream":"!miniTicker@arr","data":"[]"}`,
		mt(`{"E":1672515782136,"s":"A","c":"1","o":"2","q":"3","e":"24hrMiniTicker","extra":{"x":[1]}}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A","c":"1","o":"0","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A","c":"1","o":"-1","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":0,"s":"A","c":"1","o":"1","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A","c":"x","o":"1","q":"3"},`+row),
		mt(`{"e":"24hrMiniTicker","E":"1672515782136","s":"A","c":"1","o":"1","q":"3"},`+row),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":5,"c":"1","o":"1","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":null,"c":"1","o":"1","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A","s":"B","c":"1","o":"1","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A\u00e9","c":"1","o":"1","q":"3","q":null}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A","c":"1","o":"1","q":"3","h":5,"v":[]}`),
		mt(`{"e":"24hrMiniTicker","E":1.5,"s":"A","c":"1","o":"1","q":"3"}`),
		mt(`{"e":"24hrMiniTicker","E":1672515782136,"s":"A","c":"1","o":"1","q":"3"}`)[:60],
		"{\"stream\":\"!miniTicker@arr\",\"data\":[{\"e\":\"24hrMiniTicker\",\"E\":1672515782136,\"s\":\"A\xff\",\"c\":\"1\",\"o\":\"1\",\"q\":\"3\"}]}",
	)
	return cases
}

type decoded struct {
	events []event
	err    error
}

func decodeWith(f func([]byte, func(event)) error, msg string) decoded {
	var d decoded
	d.err = f([]byte(msg), func(ev event) { d.events = append(d.events, ev) })
	return d
}

// sameError reports whether two errors are the same case: both nil, or both
// set and, when the message is the package's own (not encoding/json's or
// fastjson's wording), the same message.
func sameError(old, new error) bool {
	if (old == nil) != (new == nil) {
		return false
	}
	if old == nil {
		return true
	}
	for _, own := range []string{"not a kline event", "is not a finite number"} {
		if strings.Contains(old.Error(), own) || strings.Contains(new.Error(), own) {
			return old.Error() == new.Error()
		}
	}
	return strings.HasPrefix(new.Error(), "binance: ") == strings.HasPrefix(old.Error(), "binance: ")
}

// TestBinanceDecodeMatchesEncodingJSON is the differential test of the
// fastjson decoder against the encoding/json one it replaced.
func TestBinanceDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	opts := cmp.Options{cmp.AllowUnexported(event{}, exchangeTicker{})}
	for _, msg := range binanceDecodeCases() {
		old := decodeWith(refBinanceDecode, msg)
		got := decodeWith(binanceSpot().decode, msg)
		if diff := cmp.Diff(old.events, got.events, opts); diff != "" {
			t.Errorf("%q: events (-encoding/json +fastjson):\n%s", msg, diff)
		}
		if !sameError(old.err, got.err) {
			t.Errorf("%q: error %v, encoding/json's %v", msg, got.err, old.err)
		}
	}
}

// TestBinanceDecodeConcurrent decodes from several goroutines at once, as
// connections do, sharing the parser pool (run with -race).
func TestBinanceDecodeConcurrent(t *testing.T) {
	t.Parallel()
	cases := binanceDecodeCases()
	want := make([]decoded, len(cases))
	for i, msg := range cases {
		want[i] = decodeWith(refBinanceDecode, msg)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for r := range 20 {
				for i, msg := range cases {
					if (i+g+r)%3 == 0 {
						continue
					}
					got := decodeWith(binanceSpot().decode, msg)
					if !cmp.Equal(want[i].events, got.events, cmp.AllowUnexported(event{}, exchangeTicker{})) || !sameError(want[i].err, got.err) {
						t.Errorf("%q: got %+v, want %+v", msg, got, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestBinanceDecodeDiffers pins where the decoders differ, on inputs
// Binance does not send. Binance's keys are case-sensitive and the new
// decoder matches them exactly, where encoding/json fell back to a
// case-insensitive match ("Stream" as stream, "X" as x). A lone UTF-16
// surrogate escape stays as written (fastjson) instead of becoming U+FFFD.
func TestBinanceDecodeDiffers(t *testing.T) {
	t.Parallel()
	const k = `"k":{"t":1672515780000,"o":"1","h":"1","l":"1","c":"1","v":"1"}`
	for _, tc := range []struct {
		msg      string
		oldEvent bool // encoding/json emitted an event (else an error)
		new      []event
	}{
		{`{"Stream":"btcusdt@kline_1m","data":{"e":"kline",` + k + `}}`, true, nil},
		{`{"stream":"btcusdt@kline_1m","data":{"e":"kline",` + k[:len(k)-1] + `,"X":"y"}}}`, false, []event{{kind: evCandle, topic: "btcusdt@kline_1m",
			candle: domain.Candle{Time: time.UnixMilli(1672515780000).UTC(), Open: 1, High: 1, Low: 1, Close: 1, Volume: 1}}}},
		{`{"stream":"btc\ud800@kline_1m","data":{"e":"kline",` + k + `}}`, true, []event{{kind: evCandle, topic: `btc\ud800@kline_1m`,
			candle: domain.Candle{Time: time.UnixMilli(1672515780000).UTC(), Open: 1, High: 1, Low: 1, Close: 1, Volume: 1}}}},
	} {
		old := decodeWith(refBinanceDecode, tc.msg)
		if (len(old.events) == 1) != tc.oldEvent || (old.err == nil) != tc.oldEvent {
			t.Errorf("%s: encoding/json gave %+v", tc.msg, old)
		}
		got := decodeWith(binanceSpot().decode, tc.msg)
		if diff := cmp.Diff(tc.new, got.events, cmp.AllowUnexported(event{})); diff != "" || got.err != nil {
			t.Errorf("%s: error %v, events (-want +got):\n%s", tc.msg, got.err, diff)
		}
	}
}

func BenchmarkBinanceKlineDecode(b *testing.B) {
	open := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	msg := []byte(`{"stream":"btcusdt@kline_1m","data":` + klinePayload("BTCUSDT", open, "91234.56000000", false) + `}`)
	for _, bc := range []struct {
		name   string
		decode func([]byte, func(event)) error
	}{{"encoding-json", refBinanceDecode}, {"fastjson", binanceSpot().decode}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			var n int
			emit := func(ev event) { n++ }
			for b.Loop() {
				if err := bc.decode(msg, emit); err != nil {
					b.Fatal(err)
				}
			}
			if n == 0 {
				b.Fatal("no event")
			}
		})
	}
}
