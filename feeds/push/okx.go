package push

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
)

// OKX limits (see the package doc for the sources).
const (
	okxAttempts      = 3 // connection requests per window per IP
	okxAttemptWindow = time.Second
	// okxArgs caps the channels of one connection. OKX documents no such
	// cap for public channels; a bound keeps a dropped connection's gap
	// repair and resubscription small.
	okxArgs = 1000
	// okxRequestBytes keeps each subscribe request under the documented
	// 64 KB.
	okxRequestBytes = 60 << 10
	// okxPingAfter is the silence after which "ping" is sent: OKX closes a
	// connection that carried nothing for 30 s.
	okxPingAfter = 25 * time.Second
	// okxInterval spaces subscribe requests (a connection sends a handful,
	// far under 480 an hour).
	okxInterval = 350 * time.Millisecond
)

// okxProto speaks OKX's v5 websocket at path (/ws/v5/business for candles,
// /ws/v5/public for tickers).
type okxProto struct {
	path      string
	pingAfter time.Duration
}

func okxBusiness(pingAfter time.Duration) okxProto {
	return okxProto{path: "/ws/v5/business", pingAfter: pingAfter}
}

func okxPublic(pingAfter time.Duration) okxProto {
	return okxProto{path: "/ws/v5/public", pingAfter: pingAfter}
}

func (okxProto) maxTopics() int                 { return okxArgs }
func (okxProto) controlInterval() time.Duration { return okxInterval }
func (p okxProto) keepalive() ([]byte, time.Duration) {
	return []byte("ping"), p.pingAfter
}

// okxInstID is the instrument id of a canonical symbol: BTC_USDT → BTC-USDT
// (spot) or BTC-USDT-SWAP (the linear perpetual).
func okxInstID(canonical string, swap bool) string {
	id := strings.Replace(canonical, "_", "-", 1)
	if swap {
		id += "-SWAP"
	}
	return id
}

// okxChannels are the candle channels of the timeframes, UTC-aligned for
// days and weeks as the REST adapter's bars.
var okxChannels = map[domain.Timeframe]string{
	domain.TF1m: "candle1m", domain.TF5m: "candle5m", domain.TF15m: "candle15m", domain.TF30m: "candle30m",
	domain.TF1h: "candle1H", domain.TF4h: "candle4H", domain.TF1d: "candle1Dutc", domain.TF1w: "candle1Wutc",
}

// Topic names are "channel:instId", the key pushes are matched by.
func okxCandleKey(s Series, swap bool) string {
	return okxChannels[s.Timeframe] + ":" + okxInstID(s.Symbol, swap)
}

func okxTickersKey(instID string) string { return "tickers:" + instID }

type okxArg struct {
	Channel string `json:"channel"`
	InstID  string `json:"instId"`
}

func (p okxProto) dialURL(base string, topics []topic) (string, []topic) {
	return base + p.path, topics
}

// subscribe packs the topics into requests under okxRequestBytes; OKX
// acknowledges each channel separately.
func (p okxProto) subscribe(topics []topic) ([][]byte, int) {
	var msgs [][]byte
	var args []okxArg
	size := 0
	flush := func() {
		if len(args) == 0 {
			return
		}
		b, _ := json.Marshal(struct {
			Op   string   `json:"op"`
			Args []okxArg `json:"args"`
		}{"subscribe", args})
		msgs = append(msgs, b)
		args, size = nil, 0
	}
	for _, t := range topics {
		ch, inst, _ := strings.Cut(t.name, ":")
		n := len(ch) + len(inst) + len(`{"channel":"","instId":""},`)
		if size+n > okxRequestBytes-64 {
			flush()
		}
		args = append(args, okxArg{Channel: ch, InstID: inst})
		size += n
	}
	flush()
	return msgs, len(topics)
}

// okxMessage is an event ({"event": "subscribe"|"error"|"notice", ...}) or
// a push ({"arg", "data"}).
type okxMessage struct {
	Event string          `json:"event"`
	Code  string          `json:"code"`
	Msg   string          `json:"msg"`
	Arg   okxArg          `json:"arg"`
	Data  json.RawMessage `json:"data"`
}

func (p okxProto) decode(data []byte, emit func(event)) error {
	if bytes.Equal(data, []byte("pong")) {
		emit(event{kind: evPong})
		return nil
	}
	var m okxMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("okx: %w", err)
	}
	switch m.Event {
	case "subscribe":
		emit(event{kind: evAck})
		return nil
	case "error":
		emit(event{kind: evRefused, msg: "code " + m.Code + ": " + m.Msg})
		return nil
	case "notice": // a service upgrade will close the connection soon
		emit(event{kind: evShutdown})
		return nil
	case "":
	default:
		return nil
	}
	switch {
	case strings.HasPrefix(m.Arg.Channel, "candle"):
		return parseOKXCandles(m, emit)
	case m.Arg.Channel == "tickers":
		rows, err := parseOKXTickers(m.Data)
		if err != nil {
			return err
		}
		emit(event{kind: evTickers, tickers: rows})
	}
	return nil
}

// parseOKXCandles parses rows of [ts, o, h, l, c, vol, volCcy,
// volCcyQuote, confirm]; swap volume is volCcy (base currency, not
// contracts), as in the REST adapter.
func parseOKXCandles(m okxMessage, emit func(event)) error {
	var rows [][]string
	if err := json.Unmarshal(m.Data, &rows); err != nil {
		return fmt.Errorf("okx: %s %s: %w", m.Arg.Channel, m.Arg.InstID, err)
	}
	swap := strings.HasSuffix(m.Arg.InstID, "-SWAP")
	key := m.Arg.Channel + ":" + m.Arg.InstID
	for _, r := range rows {
		c, closed, err := okxCandleRow(r, swap)
		if err != nil {
			return fmt.Errorf("okx: %s: %w", key, err)
		}
		emit(event{kind: evCandle, topic: key, candle: c, closed: closed})
	}
	return nil
}

func okxCandleRow(r []string, swap bool) (domain.Candle, bool, error) {
	if len(r) < 9 {
		return domain.Candle{}, false, fmt.Errorf("candle row has %d fields, want 9", len(r))
	}
	ms, err := strconv.ParseInt(r[0], 10, 64)
	if err != nil || ms <= 0 {
		return domain.Candle{}, false, fmt.Errorf("ts: %q is not a time", r[0])
	}
	c := domain.Candle{Time: time.UnixMilli(ms).UTC()}
	vol := r[5]
	if swap {
		vol = r[6]
	}
	err = decimals(decimal{"o", r[1], &c.Open}, decimal{"h", r[2], &c.High}, decimal{"l", r[3], &c.Low},
		decimal{"c", r[4], &c.Close}, decimal{"vol", vol, &c.Volume})
	return c, r[8] == "1", err
}

// okxTicker is one row of the tickers channel.
type okxTicker struct {
	InstType  string `json:"instType"`
	InstID    string `json:"instId"`
	Last      string `json:"last"`
	Open24h   string `json:"open24h"`
	VolCcy24h string `json:"volCcy24h"`
	TS        string `json:"ts"`
}

// parseOKXTickers keeps the good rows: SPOT volCcy24h is in quote currency,
// SWAP volCcy24h in base currency and is converted at the last price.
func parseOKXTickers(data []byte) ([]exchangeTicker, error) {
	var rows []okxTicker
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("okx: tickers: %w", err)
	}
	out := make([]exchangeTicker, 0, len(rows))
	for _, r := range rows {
		var last, open, vol float64
		ms, err := strconv.ParseInt(r.TS, 10, 64)
		if err != nil || ms <= 0 {
			continue
		}
		if decimals(decimal{"last", r.Last, &last}, decimal{"open24h", r.Open24h, &open}, decimal{"volCcy24h", r.VolCcy24h, &vol}) != nil || open <= 0 {
			continue
		}
		if r.InstType == "SWAP" {
			vol *= last
		}
		t := domain.Ticker{Price: last, ChangePct: (last/open - 1) * 100, Volume: vol, UpdatedAt: time.UnixMilli(ms).UTC()}
		out = append(out, exchangeTicker{symbol: r.InstID, ticker: t})
	}
	return out, nil
}
