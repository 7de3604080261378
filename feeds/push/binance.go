package push

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

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

// binanceMessage is a combined-stream push ({"stream", "data"}), a request's
// answer ({"result", "id"}) or an error ({"code", "msg", "id"}).
type binanceMessage struct {
	Stream string          `json:"stream"`
	Data   json.RawMessage `json:"data"`
	ID     json.RawMessage `json:"id"`
	Code   *int            `json:"code"`
	Msg    string          `json:"msg"`
}

func (p binanceProto) decode(data []byte, emit func(event)) error {
	var m binanceMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("binance: %w", err)
	}
	switch {
	case m.Stream == binanceMiniTickers:
		rows, err := parseBinanceMiniTickers(m.Data)
		if err != nil {
			return err
		}
		emit(event{kind: evTickers, tickers: rows})
	case m.Stream == "!serverShutdown":
		emit(event{kind: evShutdown})
	case strings.Contains(m.Stream, "@kline_"):
		k, closed, err := parseBinanceKline(m.Data)
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

// binanceKline is the kline event's payload; prices and volume are decimal
// strings. encoding/json matches keys case-insensitively when no field has
// the exact name, so the keys differing only in case from a read one (E, T,
// L, V) get fields of their own: they would otherwise overwrite e, t, l, v.
type binanceKline struct {
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
		V         string `json:"v"` // base asset volume, as the REST klines' volume
		TakerBase string `json:"V"`
		Closed    bool   `json:"x"`
	} `json:"k"`
}

func parseBinanceKline(data []byte) (domain.Candle, bool, error) {
	var e binanceKline
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

// binanceMiniTicker is one row of !miniTicker@arr: a 24 h rolling window.
type binanceMiniTicker struct {
	Event string `json:"e"`
	Time  int64  `json:"E"`
	S     string `json:"s"`
	C     string `json:"c"` // last price
	O     string `json:"o"` // price 24 h ago
	Q     string `json:"q"` // quote volume, as the REST ticker's quoteVolume
}

// parseBinanceMiniTickers parses the array; a bad row is skipped (its
// ticker is simply not updated by this push), a bad array is an error.
func parseBinanceMiniTickers(data []byte) ([]exchangeTicker, error) {
	var rows []binanceMiniTicker
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
