package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/marketscreener/market/domain"
)

// Binance limits (see the package doc for the sources).
const (
	binanceSpotStreams    = 1024 // streams per connection
	binanceFuturesStreams = 200
	binanceAttempts       = 300 // connection attempts per window per IP
	binanceAttemptWindow  = 5 * time.Minute
	// binanceURLStreams caps the streams named in the dial URL; the rest
	// are subscribed by message, so a full connection's URL stays short.
	binanceURLStreams = 100
	// binanceSubscribeParams caps the streams of one SUBSCRIBE request.
	binanceSubscribeParams = 200
	binanceMiniTickers     = "!miniTicker@arr"
)

// binanceProto speaks Binance's combined streams at path (/stream on spot,
// /market/stream on USDⓈ-M).
type binanceProto struct {
	path    string
	streams int
	// interval spaces subscribe requests: one slot a second under the
	// documented message rate is left for the pongs the library sends.
	interval time.Duration
}

func binanceSpot() binanceProto {
	return binanceProto{path: "/stream", streams: binanceSpotStreams, interval: time.Second / 4} // limit 5/s
}

func binanceFutures() binanceProto {
	return binanceProto{path: "/market/stream", streams: binanceFuturesStreams, interval: time.Second / 9} // limit 10/s
}

func (p binanceProto) maxTopics() int                               { return p.streams }
func (p binanceProto) controlInterval() time.Duration               { return p.interval }
func (p binanceProto) keepalive() (msg []byte, every time.Duration) { return nil, 0 }

// binanceSymbol is the stream symbol of a canonical one (BTC_USDT → BTCUSDT;
// stream names use it lower-cased).
func binanceSymbol(canonical string) string { return strings.Replace(canonical, "_", "", 1) }

func binanceKlineStream(s Series) string {
	return strings.ToLower(binanceSymbol(s.Symbol)) + "@kline_" + string(s.Timeframe)
}

func (p binanceProto) dialURL(base string, topics []topic) (string, []topic) {
	n := min(len(topics), binanceURLStreams)
	names := make([]string, n)
	for i, t := range topics[:n] {
		names[i] = t.name
	}
	return base + p.path + "?streams=" + strings.Join(names, "/"), topics[n:]
}

func (p binanceProto) subscribe(topics []topic) ([][]byte, int) {
	var msgs [][]byte
	for i := 0; i < len(topics); i += binanceSubscribeParams {
		chunk := topics[i:min(i+binanceSubscribeParams, len(topics))]
		params := make([]string, len(chunk))
		for j, t := range chunk {
			params[j] = t.name
		}
		b, _ := json.Marshal(struct {
			Method string   `json:"method"`
			Params []string `json:"params"`
			ID     int      `json:"id"`
		}{"SUBSCRIBE", params, len(msgs) + 1})
		msgs = append(msgs, b)
	}
	return msgs, len(msgs)
}

// binanceParsers holds fastjson parsers: decode runs on several connection
// goroutines and a Parser is not safe for concurrent use.
var binanceParsers fastjson.ParserPool

// decode reads a combined-stream push ({"stream", "data"}), a request's
// answer ({"result", "id"}) or an error ({"code", "msg", "id"}) in one
// parse, with the semantics encoding/json had here (binance_ref_test.go
// keeps that implementation and compares the two): the input must be valid
// JSON, a field of the wrong type is an error, null leaves a field unset,
// the last of duplicate keys wins (objects under duplicate "k" keys merge),
// and invalid UTF-8 in a string becomes U+FFFD. Keys match exactly;
// encoding/json also accepted them in another case.
func (p binanceProto) decode(data []byte, emit func(event)) error {
	// The parser accepts some invalid JSON (leading zeros, bad escapes,
	// control characters in strings) that encoding/json rejected.
	if err := fastjson.ValidateBytes(data); err != nil {
		return fmt.Errorf("binance: %w", err)
	}
	jp := binanceParsers.Get()
	ev, ok, err := decodeBinance(jp, data)
	binanceParsers.Put(jp) // ev holds no parser memory
	if err != nil || !ok {
		return err
	}
	emit(ev)
	return nil
}

func decodeBinance(jp *fastjson.Parser, data []byte) (event, bool, error) {
	v, err := jp.ParseBytes(data)
	if err != nil {
		return event{}, false, fmt.Errorf("binance: %w", err)
	}
	var (
		stream, msg string
		payload, id *fastjson.Value
		code        int64
		hasCode     bool
	)
	switch v.Type() {
	case fastjson.TypeNull:
		return event{}, false, nil
	case fastjson.TypeObject:
	default:
		return event{}, false, fmt.Errorf("binance: cannot decode %s as a message", v.Type())
	}
	o, _ := v.Object()
	o.Visit(func(key []byte, f *fastjson.Value) {
		switch string(key) {
		case "stream":
			jsonString(f, &stream, &err)
		case "data":
			payload = f
		case "id":
			id = f
		case "code":
			if f.Type() == fastjson.TypeNull {
				hasCode = false
			} else if jsonInt(f, &code, &err) {
				hasCode = true
			}
		case "msg":
			jsonString(f, &msg, &err)
		}
	})
	if err != nil {
		return event{}, false, fmt.Errorf("binance: %w", err)
	}
	switch {
	case stream == binanceMiniTickers:
		rows, err := binanceMiniTickerRows(payload)
		if err != nil {
			return event{}, false, fmt.Errorf("binance: %s: %w", binanceMiniTickers, err)
		}
		return event{kind: evTickers, tickers: rows}, true, nil
	case stream == "!serverShutdown":
		return event{kind: evShutdown}, true, nil
	case strings.Contains(stream, "@kline_"):
		k, closed, err := binanceKlineValue(payload)
		if err != nil {
			return event{}, false, fmt.Errorf("binance: %s: %w", stream, err)
		}
		return event{kind: evCandle, topic: strings.Clone(stream), candle: k, closed: closed}, true, nil
	case hasCode:
		return event{kind: evRefused, msg: fmt.Sprintf("code %d: %s", int(code), msg)}, true, nil
	case id != nil && id.Type() != fastjson.TypeNull:
		return event{kind: evAck}, true, nil
	}
	return event{}, false, nil
}

// errNoData is what encoding/json said of the absent payload.
var errNoData = errors.New("unexpected end of JSON input")

// binanceKlineValue reads a kline event's payload (prices and volume are
// decimal strings).
func binanceKlineValue(v *fastjson.Value) (domain.Candle, bool, error) {
	if v == nil {
		return domain.Candle{}, false, errNoData
	}
	var (
		event, o, h, l, c, vol string
		open, skip             int64
		closed                 bool
		err                    error
	)
	kline := func(key []byte, f *fastjson.Value) {
		switch string(key) {
		case "t":
			jsonInt(f, &open, &err)
		case "T", "L":
			jsonInt(f, &skip, &err)
		case "o":
			jsonString(f, &o, &err)
		case "h":
			jsonString(f, &h, &err)
		case "l":
			jsonString(f, &l, &err)
		case "c":
			jsonString(f, &c, &err)
		case "v": // base asset volume, as the REST klines' volume
			jsonString(f, &vol, &err)
		case "V":
			var s string
			jsonString(f, &s, &err)
		case "x":
			jsonBool(f, &closed, &err)
		}
	}
	if jsonObject(v, &err) { // null decodes to no fields
		o, _ := v.Object()
		o.Visit(func(key []byte, f *fastjson.Value) {
			switch string(key) {
			case "e":
				jsonString(f, &event, &err)
			case "E":
				jsonInt(f, &skip, &err)
			case "k":
				if jsonObject(f, &err) {
					k, _ := f.Object()
					k.Visit(kline)
				}
			}
		})
	}
	if err != nil {
		return domain.Candle{}, false, err
	}
	if event != "kline" || open <= 0 {
		return domain.Candle{}, false, fmt.Errorf("not a kline event (e=%q, t=%d)", event, open)
	}
	candle := domain.Candle{Time: time.UnixMilli(open).UTC()}
	err = decimals(
		decimal{"o", o, &candle.Open}, decimal{"h", h, &candle.High}, decimal{"l", l, &candle.Low},
		decimal{"c", c, &candle.Close}, decimal{"v", vol, &candle.Volume})
	return candle, closed, err // its message quotes the raw value: a copy
}

// binanceMiniTickerRows reads the rows of !miniTicker@arr, each a 24 h
// rolling window: e, E (time), s, c (last price), o (price 24 h ago) and q
// (quote volume, as the REST ticker's quoteVolume). A bad row is skipped
// (its ticker is simply not updated by this push); a bad array, or a row
// of the wrong shape, is an error.
func binanceMiniTickerRows(v *fastjson.Value) ([]exchangeTicker, error) {
	if v == nil {
		return nil, errNoData
	}
	var arr []*fastjson.Value
	switch v.Type() {
	case fastjson.TypeNull:
	case fastjson.TypeArray:
		arr, _ = v.Array()
	default:
		return nil, fmt.Errorf("cannot decode %s as an array", v.Type())
	}
	out := make([]exchangeTicker, 0, len(arr))
	var err error
	for _, row := range arr {
		var (
			event, s, c, o, q string
			at                int64
			last, open        float64
		)
		if !jsonObject(row, &err) {
			if err != nil {
				return nil, err
			}
			continue // null: a zero row
		}
		r, _ := row.Object()
		r.Visit(func(key []byte, f *fastjson.Value) {
			switch string(key) {
			case "e":
				jsonString(f, &event, &err)
			case "E":
				jsonInt(f, &at, &err)
			case "s":
				jsonString(f, &s, &err)
			case "c":
				jsonString(f, &c, &err)
			case "o":
				jsonString(f, &o, &err)
			case "q":
				jsonString(f, &q, &err)
			}
		})
		if err != nil {
			return nil, err
		}
		if event != "24hrMiniTicker" || at <= 0 {
			continue
		}
		t := domain.Ticker{UpdatedAt: time.UnixMilli(at).UTC()}
		if decimals(decimal{"c", c, &last}, decimal{"o", o, &open}, decimal{"q", q, &t.Volume}) != nil || open <= 0 {
			continue
		}
		t.Price, t.ChangePct = last, (last/open-1)*100
		out = append(out, exchangeTicker{symbol: strings.Clone(s), ticker: t})
	}
	return out, nil
}

// The json* helpers decode a value as encoding/json would into a Go field
// of their type: null leaves the field unset, another type is an error
// (the first one is kept in *err; decoding goes on, as encoding/json's
// did). Strings are views into the parser's memory unless they had to be
// repaired: copy those that outlive it.

func jsonString(v *fastjson.Value, dst *string, err *error) {
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		*dst = validUTF8(unsafe.String(unsafe.SliceData(b), len(b)))
	case fastjson.TypeNull:
	default:
		typeError(v, "string", err)
	}
}

// jsonInt reports whether it set *dst.
func jsonInt(v *fastjson.Value, dst *int64, err *error) bool {
	switch v.Type() {
	case fastjson.TypeNumber:
		n, perr := v.Int64() // the literal was validated as a JSON number
		if perr != nil {
			typeError(v, "int64", err)
			return false
		}
		*dst = n
		return true
	case fastjson.TypeNull:
	default:
		typeError(v, "int64", err)
	}
	return false
}

func jsonBool(v *fastjson.Value, dst *bool, err *error) {
	switch v.Type() {
	case fastjson.TypeTrue:
		*dst = true
	case fastjson.TypeFalse:
		*dst = false
	case fastjson.TypeNull:
	default:
		typeError(v, "bool", err)
	}
}

// jsonObject reports whether v is an object to decode into a struct.
func jsonObject(v *fastjson.Value, err *error) bool {
	switch v.Type() {
	case fastjson.TypeObject:
		return true
	case fastjson.TypeNull:
	default:
		typeError(v, "object", err)
	}
	return false
}

func typeError(v *fastjson.Value, want string, err *error) {
	if *err == nil {
		*err = fmt.Errorf("cannot decode %s as %s", v.Type(), want)
	}
}

// validUTF8 replaces each byte of invalid UTF-8 with U+FFFD, as
// encoding/json does in strings.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
