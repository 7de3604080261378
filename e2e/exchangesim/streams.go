package exchangesim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/jsonenc"
)

// streamHub serves one family's combined streams (spot on /stream,
// USDⓈ-M on /market/stream) with pushtest's protocol implementation,
// and pushes the simulator's own candles and tickers to what is
// subscribed. Connection attempts are counted per IP in a rolling window
// (Binance: 300 per 5 minutes); an attempt over it is refused 429 before
// the upgrade.
type streamHub struct {
	ex        *pushtest.Exchange
	syms      map[string]*symbol
	rows      []*symbol // !miniTicker@arr's rows
	attempts  int
	window    time.Duration
	mu        sync.Mutex
	byIP      map[string][]time.Time
	refused   int64
	accepted  int64
	maxPerSec int
	maxTopics int
}

func newStreamHub(maxTopics, maxPerSec int, cfg Config, syms map[string]*symbol, rows []*symbol) *streamHub {
	return &streamHub{ex: pushtest.Binance(maxTopics, maxPerSec).CutAfter(cfg.StreamMaxAge), syms: syms, rows: rows,
		attempts: cfg.StreamAttempts, window: cfg.StreamAttemptWindow, byIP: map[string][]time.Time{},
		maxPerSec: maxPerSec, maxTopics: maxTopics}
}

// admit records a connection attempt of ip at now; false when it is over
// the window's budget.
func (h *streamHub) admit(ip string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := h.byIP[ip]
	cut := 0
	for cut < len(ts) && now.Sub(ts[cut]) >= h.window {
		cut++
	}
	ts = append(ts[cut:], now)
	h.byIP[ip] = ts
	if len(ts) > h.attempts {
		h.refused++
		return false
	}
	h.accepted++
	return true
}

// serveStream is a family's websocket route: the attempt budget, then the protocol.
func (s *Sim) serveStream(h *streamHub) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.admit(clientIP(r), s.cfg.Now()) {
			writeError(w, http.StatusTooManyRequests, &apiError{Code: -1003, Msg: "Too many connection attempts."})
			return
		}
		s.pushOnce.Do(func() { go s.pushLoop() })
		h.ex.ServeHTTP(w, r)
	}
}

// StreamStats count one family's stream traffic (every IP together).
type StreamStats struct {
	MaxStreamsPerConn int      `json:"max_streams_per_conn"` // the documented limit
	MaxMessagesPerSec int      `json:"max_messages_per_sec"` // incoming, the documented limit
	Connections       int64    `json:"connections"`          // accepted since start
	Open              int      `json:"open"`
	Refused429        int64    `json:"refused_429"` // attempts over the per-IP budget
	MostStreams       int      `json:"most_streams"`
	MostMessagesInSec int      `json:"most_messages_in_sec"`
	Received          int64    `json:"received"` // incoming messages (subscribe requests)
	Pushed            int64    `json:"pushed"`   // pushes written
	Breaches          []string `json:"breaches"` // limits broken (the connection was closed)
}

func (h *streamHub) stats() StreamStats {
	_, most, inSec, _, breaches := h.ex.Stats()
	open, received, pushed := h.ex.Traffic()
	h.mu.Lock()
	defer h.mu.Unlock()
	return StreamStats{MaxStreamsPerConn: h.maxTopics, MaxMessagesPerSec: h.maxPerSec, Connections: h.accepted, Open: open,
		Refused429: h.refused, MostStreams: most, MostMessagesInSec: inSec, Received: received, Pushed: pushed,
		Breaches: breaches}
}

// pushLoop drives the streams from the candle model until Close: every
// subscribed kline's current state every KlineEvery, a candle's final
// state (closed flag set) within a tick of its close, and
// !miniTicker@arr every TickerEvery.
func (s *Sim) pushLoop() {
	const tick = 100 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var lastKline, lastTicker time.Time
	last := s.cfg.Now()
	for {
		select {
		case <-s.stop.Done():
			return
		case <-t.C:
		}
		now := s.cfg.Now()
		for _, h := range s.hubs {
			if !now.Truncate(time.Minute).Equal(last.Truncate(time.Minute)) {
				h.pushClosed(last, now)
			}
			if now.Sub(lastTicker) >= s.cfg.TickerEvery {
				h.pushMiniTickers(now)
			}
			if now.Sub(lastKline) >= s.cfg.KlineEvery {
				h.pushKlines(now)
			}
		}
		if now.Sub(lastTicker) >= s.cfg.TickerEvery {
			lastTicker = now
		}
		if now.Sub(lastKline) >= s.cfg.KlineEvery {
			lastKline = now
		}
		last = now
	}
}

// klineTopic parses "btcusdt@kline_1m".
func (h *streamHub) klineTopic(topic string) (*symbol, interval, bool) {
	name, ivName, ok := strings.Cut(topic, "@kline_")
	if !ok {
		return nil, interval{}, false
	}
	sym, ok := h.syms[strings.ToUpper(name)]
	iv, ivOK := intervals[ivName]
	return sym, iv, ok && ivOK
}

// pushClosed sends the final state of every subscribed candle that closed
// between last and now.
func (h *streamHub) pushClosed(last, now time.Time) {
	for _, topic := range h.ex.Topics() {
		sym, iv, ok := h.klineTopic(topic)
		if !ok {
			continue
		}
		open := iv.truncate(now)
		if open.Equal(iv.truncate(last)) {
			continue
		}
		h.ex.Publish(topic, klineEvent(sym, iv, sym.candleAt(iv.prev(open), iv, now), now, true))
	}
}

func (h *streamHub) pushKlines(now time.Time) {
	for _, topic := range h.ex.Topics() {
		if sym, iv, ok := h.klineTopic(topic); ok {
			h.ex.Publish(topic, klineEvent(sym, iv, sym.candleAt(iv.truncate(now), iv, now), now, false))
		}
	}
}

// klineEvent is the documented kline payload, written as encoding/json
// writes the map of it (keys in byte order) without its reflection: every
// open kline of every subscribed stream is pushed every two seconds, and
// the simulator shares the cores with what it measures.
// TestKlineEventIsMarshal holds it to encoding/json's bytes.
func klineEvent(sym *symbol, iv interval, k candle, now time.Time, closed bool) string {
	b := make([]byte, 0, 400)
	b = append(b, `{"E":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, `,"e":"kline","k":{"B":"0","L":`...)
	b = strconv.AppendInt(b, 100+k.trades, 10)
	b = appendNum(append(b, `,"Q":`...), k.quoteV/2)
	b = append(b, `,"T":`...)
	b = strconv.AppendInt(b, k.close.UnixMilli(), 10)
	b = appendNum(append(b, `,"V":`...), k.volume/2)
	b = appendNum(append(b, `,"c":`...), k.c)
	b = append(b, `,"f":100`...)
	b = appendNum(append(b, `,"h":`...), k.h)
	b = jsonenc.AppendString(append(b, `,"i":`...), iv.name)
	b = appendNum(append(b, `,"l":`...), k.l)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, k.trades, 10)
	b = appendNum(append(b, `,"o":`...), k.o)
	b = appendNum(append(b, `,"q":`...), k.quoteV)
	b = jsonenc.AppendString(append(b, `,"s":`...), sym.name)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, k.open.UnixMilli(), 10)
	b = appendNum(append(b, `,"v":`...), k.volume)
	b = strconv.AppendBool(append(b, `,"x":`...), closed)
	b = jsonenc.AppendString(append(b, `},"s":`...), sym.name)
	return string(append(b, '}'))
}

// appendNum appends num(v) as a JSON string.
func appendNum(b []byte, v float64) []byte {
	return append(appendDecimal(append(b, '"'), v), '"')
}

// pushMiniTickers sends !miniTicker@arr: the 24 h rolling window of every
// symbol (Binance sends only the changed ones; every simulated one moves).
func (h *streamHub) pushMiniTickers(now time.Time) {
	const topic = "!miniTicker@arr"
	if !h.subscribed(topic) {
		return
	}
	rows := make([]map[string]any, len(h.rows))
	day := interval{"1d", 24 * time.Hour}
	for i, sym := range h.rows {
		k := sym.candleAt(now.Add(-24*time.Hour), day, now)
		rows[i] = map[string]any{"e": "24hrMiniTicker", "E": now.UnixMilli(), "s": sym.name, "c": num(k.c), "o": num(k.o),
			"h": num(k.h), "l": num(k.l), "v": num(k.volume), "q": num(k.quoteV)}
	}
	b, _ := json.Marshal(rows)
	h.ex.Publish(topic, string(b))
}

func (h *streamHub) subscribed(topic string) bool {
	return h.ex.AllSubscribed([]string{topic})
}

// Close ends the streams: the push loop stops and every connection is
// dropped. The REST routes keep answering.
func (s *Sim) Close() {
	s.cancel()
	s.alpaca.close()
	for _, h := range s.hubs {
		h.ex.Close()
	}
}

// DropStreams cuts every stream connection of both families without a
// close handshake, as a network failure does (the client reconnects and
// repairs the gap).
func (s *Sim) DropStreams() {
	for _, h := range s.hubs {
		h.ex.DropAll()
	}
}

// HoldSubscriptions leaves the SUBSCRIBE requests received from now on
// (both families) unapplied and unanswered until release is called:
// Binance answers each with {"result":null,"id":N} once applied
// (WebSocket Streams, "Subscribe to a stream"), and a client waiting for
// that answer of a successor connection must not take it for subscribed.
// The streams named in a connection's URL are served as usual.
func (s *Sim) HoldSubscriptions() (release func()) {
	var rels []func()
	for _, h := range s.hubs {
		rels = append(rels, h.ex.HoldSubscriptions())
	}
	return func() {
		for _, r := range rels {
			r()
		}
	}
}
