package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/marketscreener/market/domain"
)

// Alpaca's stock market-data websocket, as documented (as of 2026-11):
//
//   - [docs-stream] docs.alpaca.markets/docs/streaming-market-data: the
//     welcome message, authentication within 10 seconds, and the
//     connection limit ("in most subscriptions (including Algo Trader
//     Plus) this limit is 1", a second connection is refused 406).
//   - [docs-stock] docs.alpaca.markets/docs/real-time-stock-pricing-data:
//     wss://stream.data.alpaca.markets/v2/{feed} with feed iex or sip, and
//     the three bar channels: minute bars (bars, "b"), updated bars
//     (updatedBars, "u": a minute bar corrected by late trades) and daily
//     bars (dailyBars, "d": "a partial bar up to the current time").
//   - [docs-md] alpacahq/alpaca-docs, content/api-references/market-data-api/
//     stock-pricing-data/realtime.md: message format (arrays; control
//     messages one to an array), the auth and subscribe messages, the
//     subscription confirmation listing every current subscription, the
//     minute and daily bar schemas, and the error codes 400-409.
//   - [sdk-go] alpacahq/alpaca-trade-api-go marketdata/stream: errors.go
//     (410 invalid subscribe action for this feed, 411 insufficient scope),
//     flow.go (406 is retried; 402, 409, 410, 411 end the client at start),
//     conn.go (the client pings the server every 10 s).
//   - [forum] forum.alpaca.markets/t/8947: a minute bar arrives 20-100 ms
//     after its minute, its updated bar 30 s later with the same timestamp.
//
// Plans: the free plan (Basic, feed iex) streams 30 symbols on one
// connection; SIP needs a paid plan (Algo Trader Plus), whose symbols are
// unlimited; any other feed is refused 409 at authentication. The 2023
// page [docs-md] left minute bars out of the free plan's 30; the limit is
// taken as 30 symbols over every channel, as Alpaca's plan table and the
// local simulator count it (the stricter reading: a 405 stops the stream).

// The Alpaca stream's name in Config.BaseURLs (MARKET_FEED_URLS) and its
// default; the path /v2/{feed} is appended.
const (
	NameAlpacaStream    = "alpaca-stream"
	DefaultAlpacaStream = "wss://stream.data.alpaca.markets"
)

// Alpaca's feeds and the free plan's symbol limit.
const (
	alpacaIEX         = "iex"
	alpacaSIP         = "sip"
	alpacaFreeSymbols = 30
)

// alpacaEndpoint is the Alpaca connection's metrics label.
const alpacaEndpoint = "alpaca"

// AlpacaConfig is the account Alpaca's stream authenticates with and the
// feed its plan streams.
type AlpacaConfig struct {
	// KeyID and Secret go in the auth message; they are never logged.
	KeyID, Secret string
	// Feed is iex (the free plan's, the default) or sip (a paid plan).
	Feed string
}

func (a AlpacaConfig) feed() string {
	if a.Feed == "" {
		return alpacaIEX
	}
	return a.Feed
}

// SymbolLimit is the most symbols the feed's plan streams, 0 for no
// limit: 30 on iex (the free plan), none on sip (only paid plans have it).
func (a AlpacaConfig) SymbolLimit() int {
	if a.feed() == alpacaSIP {
		return 0
	}
	return alpacaFreeSymbols
}

// AlpacaSupports reports whether a combination's candles can be streamed
// from Alpaca: the stock exchanges'.
func AlpacaSupports(c domain.Combination) bool { return c.Market == domain.Stocks && c.HasCandles() }

// AlpacaSeries are the series Alpaca's stream delivers of a symbol: its
// minute bars and its daily bar. Every longer intraday timeframe stays on
// REST: Alpaca pushes no such bars, and none is derived here.
func AlpacaSeries(symbol string) []Series {
	return []Series{{Symbol: symbol, Timeframe: domain.TF1m}, {Symbol: symbol, Timeframe: domain.TF1d}}
}

// AlpacaFinal reports whether Alpaca's pushes of a timeframe are final
// candles, as complete as REST's: the minute bars are (pushed once their
// minute has closed, and again if a late trade corrects them); the daily
// bar is the day so far, and REST's daily bar stays the day's record.
func AlpacaFinal(tf domain.Timeframe) bool { return tf == domain.TF1m }

// alpacaMsg is one decoded element of an Alpaca frame.
type alpacaMsg struct {
	typ string // T
	// control messages: success and error, and the subscription lists
	msg        string
	code       int
	subscribed map[string][]string // channel → symbols
	// bars
	symbol string
	tf     domain.Timeframe
	candle domain.Candle
	closed bool
}

// alpacaHead is what every element is first decoded into. Its "t" has a
// field of its own: encoding/json matches keys case-insensitively when no
// field has the exact name, so a bar's "t" (its time) would overwrite
// "T" (its type) in a struct that has only T.
type alpacaHead struct {
	T    string          `json:"T"`
	Time json.RawMessage `json:"t"`
}

// alpacaControl is a success, error or subscription message ([docs-md]).
type alpacaControl struct {
	Msg         string   `json:"msg"`
	Code        int      `json:"code"`
	Bars        []string `json:"bars"`
	UpdatedBars []string `json:"updatedBars"`
	DailyBars   []string `json:"dailyBars"`
}

// alpacaBar is a minute, updated or daily bar ([docs-md] "Minute Bar
// Schema", "Daily Bar Schema"). Each key the bar carries has a field of
// its exact name ("T" and "t", "S"), so none is matched by another's
// case-insensitively.
type alpacaBar struct {
	T    string   `json:"T"`
	S    string   `json:"S"`
	O    *float64 `json:"o"`
	H    *float64 `json:"h"`
	L    *float64 `json:"l"`
	C    *float64 `json:"c"`
	V    *float64 `json:"v"`
	Time string   `json:"t"`
}

// decodeAlpaca decodes one frame (an array of messages) and emits its
// control messages and bars in order. Other data points (trades, quotes,
// statuses) are skipped. A bad bar is left out and reported in the
// error, after the rest of the frame has been emitted.
func decodeAlpaca(data []byte, emit func(alpacaMsg)) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return fmt.Errorf("alpaca: frame: %w", err)
	}
	var errs []error
	for _, raw := range elems {
		var h alpacaHead
		if err := json.Unmarshal(raw, &h); err != nil {
			errs = append(errs, fmt.Errorf("alpaca: message: %w", err))
			continue
		}
		switch h.T {
		case "success", "error", "subscription":
			var c alpacaControl
			if err := json.Unmarshal(raw, &c); err != nil {
				errs = append(errs, fmt.Errorf("alpaca: %s message: %w", h.T, err))
				continue
			}
			m := alpacaMsg{typ: h.T, msg: c.Msg, code: c.Code}
			if h.T == "subscription" {
				m.subscribed = map[string][]string{"bars": c.Bars, "updatedBars": c.UpdatedBars, "dailyBars": c.DailyBars}
			}
			emit(m)
		case "b", "u", "d":
			m, err := parseAlpacaBar(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("alpaca: %q bar: %w", h.T, err))
				continue
			}
			emit(m)
		}
	}
	return errors.Join(errs...)
}

// parseAlpacaBar turns a bar into a candle update: a minute bar ("b") and
// an updated one ("u") are the closed 1m candle of their minute, a daily
// bar ("d") the open 1d candle of its date. Alpaca stamps a daily bar at
// New York's midnight; it is stored at the UTC midnight of that date, as
// the REST adapter stores daily bars (feeds/alpaca.go).
func parseAlpacaBar(raw json.RawMessage) (alpacaMsg, error) {
	var b alpacaBar
	if err := json.Unmarshal(raw, &b); err != nil {
		return alpacaMsg{}, err
	}
	if b.S == "" {
		return alpacaMsg{}, errors.New("no symbol")
	}
	ts, err := time.Parse(time.RFC3339Nano, b.Time)
	if err != nil {
		return alpacaMsg{}, fmt.Errorf("%s: time %q: %w", b.S, b.Time, err)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"o", b.O}, {"h", b.H}, {"l", b.L}, {"c", b.C}, {"v", b.V}} {
		if f.v == nil || math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
			return alpacaMsg{}, fmt.Errorf("%s: %s: missing or not a finite number", b.S, f.name)
		}
	}
	m := alpacaMsg{typ: b.T, symbol: b.S, tf: domain.TF1m, closed: true,
		candle: domain.Candle{Time: ts.UTC(), Open: *b.O, High: *b.H, Low: *b.L, Close: *b.C, Volume: *b.V}}
	if b.T == "d" {
		m.tf, m.closed = domain.TF1d, false
		m.candle.Time = domain.TF1d.Truncate(ts)
	}
	return m, nil
}

// alpacaAuth is the auth message ([docs-md] "Authentication").
func alpacaAuth(a AlpacaConfig) []byte {
	b, _ := json.Marshal(struct {
		Action string `json:"action"`
		Key    string `json:"key"`
		Secret string `json:"secret"`
	}{"auth", a.KeyID, a.Secret})
	return b
}

// alpacaSubscribeSymbols caps the symbols of one subscribe message: Alpaca
// documents no size limit, and a paid plan's whole universe (≈ 11,500
// symbols on three channels) in one message is ≈ 300 KB. Each message is
// confirmed by a subscription message of its own.
const alpacaSubscribeSymbols = 1000

// alpacaSubscribe builds the subscribe messages: minute and updated bars
// of bars, daily bars of daily ([docs-stock] "Bars").
func alpacaSubscribe(bars, daily []string) [][]byte {
	var msgs [][]byte
	for i := 0; i < max(len(bars), len(daily)); i += alpacaSubscribeSymbols {
		part := func(s []string) []string {
			if i >= len(s) {
				return []string{}
			}
			return s[i:min(i+alpacaSubscribeSymbols, len(s))]
		}
		b, _ := json.Marshal(struct {
			Action      string   `json:"action"`
			Bars        []string `json:"bars"`
			UpdatedBars []string `json:"updatedBars"`
			DailyBars   []string `json:"dailyBars"`
		}{"subscribe", part(bars), part(bars), part(daily)})
		msgs = append(msgs, b)
	}
	return msgs
}

// alpacaOutcome is how a connection ended, by what Alpaca said.
type alpacaOutcome int

const (
	// alpacaDropped: the connection failed or was closed (a network error,
	// 407 slow client, 500); reconnect with back-off and repair the gap.
	alpacaDropped alpacaOutcome = iota
	// alpacaBusy: 406, another connection of the same keys holds the
	// plan's one connection (another deployment); retry with back-off.
	alpacaBusy
	// alpacaRefused: the account was refused (401, 402, 404, 408); no
	// reconnect will change that soon, so wait long between attempts.
	alpacaRefused
	// alpacaBug: a message of ours was refused (400, 403, 410); as
	// alpacaRefused.
	alpacaBug
	// alpacaStopped: the plan cannot carry what is asked (405 symbol
	// limit, 409 feed not in the subscription, 411 scope); streaming stops
	// and REST keeps every series.
	alpacaStopped
)

// alpacaOutcomeOf classifies an error code ([docs-md] "Errors", [sdk-go]
// errors.go).
func alpacaOutcomeOf(code int) alpacaOutcome {
	switch code {
	case 406:
		return alpacaBusy
	case 405, 409, 411:
		return alpacaStopped
	case 401, 402, 404, 408:
		return alpacaRefused
	case 400, 403, 410:
		return alpacaBug
	}
	return alpacaDropped
}
