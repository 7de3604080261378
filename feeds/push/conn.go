package push

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/marketscreener/market/domain"
)

// protocol is what differs between exchanges: URLs, subscribe requests,
// keep-alive and push payloads.
type protocol interface {
	// maxTopics is the most topics one connection may carry.
	maxTopics() int
	// controlInterval is the minimum spacing of the control messages sent.
	controlInterval() time.Duration
	// dialURL is the URL to dial for topics at base, and the topics left to
	// subscribe by messages once connected.
	dialURL(base string, topics []topic) (url string, rest []topic)
	// subscribe builds the subscribe requests of topics and says how many
	// acknowledgements the server will send for them.
	subscribe(topics []topic) (msgs [][]byte, acks int)
	// keepalive is the text the client sends after every seconds of
	// silence (nil when the server pings instead).
	keepalive() (msg []byte, every time.Duration)
	// decode turns one server message into events.
	decode(data []byte, emit func(event)) error
}

// topic is one subscription: a Binance stream name or an OKX channel key.
type topic struct {
	name    string
	series  Series // of a candle topic
	tickers bool
}

type eventKind int

const (
	evCandle   eventKind = iota + 1
	evTickers            // tickers pushed
	evAck                // a subscribe request accepted
	evRefused            // a subscribe request refused
	evPong               // keep-alive answered
	evShutdown           // the server asks for a new connection
)

// event is one decoded item of a server message.
type event struct {
	kind    eventKind
	topic   string // the candle's topic name
	candle  domain.Candle
	closed  bool
	tickers []exchangeTicker
	msg     string // of a refusal
}

// exchangeTicker is a ticker row under the exchange's symbol.
type exchangeTicker struct {
	symbol string
	ticker domain.Ticker
}

// readLimit bounds one message: an all-market ticker array of ~2,000
// symbols is a few hundred KB.
const readLimit = 16 << 20

// conn is one websocket connection of a shard.
type conn struct {
	ws      *websocket.Conn
	cancel  context.CancelFunc
	done    chan struct{} // closed when the reader stops
	err     error         // why it stopped, read after done
	acked   chan struct{} // closed once every subscription is acknowledged
	ready   chan struct{} // closed once subscribed and delivering
	retire  chan struct{} // closed when the server announces a shutdown
	born    time.Time
	lastMsg atomic.Int64 // unix nano of the last message or ping
	// retried: a replacement asked for by retire failed; the age timer
	// retries it (run goroutine only).
	retried bool

	// reader goroutine state
	acksWanted, acks int
	subscribed       bool
	readyOnce        sync.Once
	ackedOnce        sync.Once
	retireOnce       sync.Once
}

func (c *conn) touch() { c.lastMsg.Store(time.Now().UnixNano()) }

func (c *conn) close() {
	c.cancel()
	_ = c.ws.CloseNow()
	<-c.done
}

// run keeps the shard connected until ctx ends: it dials, replaces the
// connection before MaxAge or when the server announces a shutdown, and
// after a drop reconnects with back-off and asks for the gap to be repaired.
//
// A new connection counts as live (Manager.Live) only once its
// subscriptions are acknowledged: what is read over REST from then on (the
// catch-up, a gap repair) can miss nothing the stream does not bring,
// while a candle closing between the dial and the last acknowledgement
// would reach neither.
func (s *shard) run(ctx context.Context) {
	cfg := s.m.cfg
	bo := backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff}
	var cur *conn
	dropped := false
	var acked <-chan struct{} // cur's, until it is subscribed
	defer func() {
		if cur != nil {
			s.closeConn(cur)
		}
		s.live.Store(false)
	}()
	for ctx.Err() == nil {
		if cur == nil {
			c, err := s.connect(ctx)
			if err != nil {
				if ctx.Err() == nil {
					cfg.Logger.Warn("push: connect failed", "endpoint", s.ep.name, "combination", s.comb.String(), "err", err)
					_ = sleep(ctx, bo.delay())
				}
				continue
			}
			cur, acked = c, c.acked
		}
		age := time.NewTimer(time.Until(cur.born.Add(cfg.MaxAge)))
		retire := cur.retire
		if cur.retried {
			retire = nil
		}
		select {
		case <-ctx.Done():
		case <-acked:
			acked = nil
			s.live.Store(true)
			if dropped {
				cfg.Metrics.Reconnect(s.ep.name)
			}
			go s.repair(ctx) // the gaps noted at drops, if any
		case <-cur.done:
			cfg.Logger.Warn("push: connection dropped", "endpoint", s.ep.name, "combination", s.comb.String(), "err", cur.err)
			s.live.Store(false)
			s.noteGaps(cur)
			if time.Since(cur.born) > cfg.MaxBackoff {
				bo.reset()
			}
			s.closeConn(cur)
			cur, dropped = nil, true
			_ = sleep(ctx, bo.delay())
		case <-age.C:
			cur = s.replace(ctx, cur)
		case <-retire:
			cur = s.replace(ctx, cur)
		}
		if acked != nil && cur != nil {
			acked = cur.acked // a replacement made before the acknowledgements
		}
		age.Stop()
	}
}

// replace opens the successor of old and closes old once the successor is
// subscribed and delivering, so no update falls between the two. If the
// successor cannot be had, or is not delivering within ReadyTimeout, old
// stays until it drops (or a later attempt succeeds).
func (s *shard) replace(ctx context.Context, old *conn) *conn {
	cfg := s.m.cfg
	next, err := s.connect(ctx)
	if err != nil {
		cfg.Logger.Warn("push: replacement connect failed", "endpoint", s.ep.name, "err", err)
		return retryLater(old, cfg)
	}
	t := time.NewTimer(cfg.ReadyTimeout)
	defer t.Stop()
	select {
	case <-next.ready:
	case <-t.C:
		// A successor whose subscriptions are not acknowledged may never
		// deliver the streams subscribed by message: switching to it would
		// leave them silent while the shard reads live. The old connection
		// stays until it ends (then the shard reconnects and repairs the
		// gap) or a later replacement is ready.
		cfg.Logger.Warn("push: replacement not delivering in time, keeping the old connection", "endpoint", s.ep.name,
			"combination", s.comb.String(), "waited", cfg.ReadyTimeout)
		s.closeConn(next)
		return retryLater(old, cfg)
	case <-next.done:
		s.closeConn(next)
		return retryLater(old, cfg)
	case <-ctx.Done():
	}
	_ = sleep(ctx, cfg.Overlap)
	s.closeConn(old)
	return next
}

// retryLater keeps old and has its replacement tried again after the
// longest back-off.
func retryLater(old *conn, cfg Config) *conn {
	old.born = time.Now().Add(-cfg.MaxAge + cfg.MaxBackoff)
	old.retried = true
	return old
}

func (s *shard) closeConn(c *conn) {
	c.close()
	s.m.cfg.Metrics.Connections(s.ep.name, -1)
}

// connect dials within the host's attempt budget, starts reading, sends the
// subscribe requests paced under the message limit and starts keep-alive.
func (s *shard) connect(ctx context.Context) (*conn, error) {
	cfg := s.m.cfg
	if err := s.ep.attempts.wait(ctx); err != nil {
		return nil, err
	}
	url, rest := s.ep.proto.dialURL(s.ep.url, s.topics)
	msgs, acks := s.ep.proto.subscribe(rest)
	c := &conn{done: make(chan struct{}), acked: make(chan struct{}), ready: make(chan struct{}), retire: make(chan struct{}),
		born: time.Now(), acksWanted: acks}
	if acks == 0 {
		close(c.acked) // every topic went in the URL: subscribed by the handshake
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	ws, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{
		HTTPClient: cfg.HTTPClient,
		// The library answers every ping with a pong of the same payload
		// while Read runs; a ping is also proof the connection is alive.
		OnPingReceived: func(context.Context, []byte) bool { c.touch(); return true },
	})
	if err != nil {
		return nil, fmt.Errorf("push: %s: dial: %w", s.ep.name, err)
	}
	ws.SetReadLimit(readLimit)
	cctx, cancel := context.WithCancel(ctx)
	c.ws, c.cancel = ws, cancel
	c.touch()
	cfg.Metrics.Connections(s.ep.name, 1)
	go s.read(cctx, c)
	go s.watch(cctx, c)
	p := pacer{interval: s.ep.proto.controlInterval()}
	for _, m := range msgs {
		if err := p.wait(cctx); err != nil {
			s.closeConn(c)
			return nil, err
		}
		if err := ws.Write(cctx, websocket.MessageText, m); err != nil {
			s.closeConn(c)
			return nil, fmt.Errorf("push: %s: subscribe: %w", s.ep.name, err)
		}
	}
	return c, nil
}

// read decodes messages until the connection fails or is closed.
func (s *shard) read(ctx context.Context, c *conn) {
	defer close(c.done)
	defer c.cancel()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.err = err
			return
		}
		c.touch()
		if err := s.ep.proto.decode(data, func(ev event) { s.handle(c, ev) }); err != nil {
			s.m.cfg.Logger.Warn("push: undecodable message", "endpoint", s.ep.name, "err", err)
		}
	}
}

// watch sends the protocol's keep-alive, probes a connection gone quiet
// and closes one that is half-open, so its gap is repaired after a
// reconnect instead of the shard reading live while nothing arrives.
//
// Silence alone is a weak sign on Binance: a kline stream pushes every
// 2 s only while its symbol trades, and the server's pings come every
// 20 s on spot but every 3 min on USDⓈ-M ("The websocket server will send
// a ping frame every 3 minutes"). So after ProbeAfter of silence the
// client sends a websocket ping of its own (RFC 6455 5.5.2: the peer
// answers with a pong; Binance: "the WebSocket server will respond with a
// pong frame") and closes the connection unless the pong is back within
// ProbeTimeout. A protocol with a text keep-alive (OKX's "ping", answered
// "pong") is half-open when nothing came back within ProbeTimeout of it.
// StaleAfter stays the outer bound.
func (s *shard) watch(ctx context.Context, c *conn) {
	cfg := s.m.cfg
	msg, every := s.ep.proto.keepalive()
	tick := min(cfg.StaleAfter/4, cfg.ProbeAfter/2)
	if msg != nil {
		tick = min(tick, every/2)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		silent := time.Since(time.Unix(0, c.lastMsg.Load()))
		// The keep-alive goes out within a tick of every; its answer is
		// due ProbeTimeout later.
		halfOpen := msg != nil && silent > every+tick+cfg.ProbeTimeout
		if silent > cfg.StaleAfter || halfOpen {
			cfg.Logger.Warn("push: connection silent, closing", "endpoint", s.ep.name, "combination", s.comb.String(), "silent", silent)
			c.cancel()
			return
		}
		if msg != nil && silent >= every {
			_ = c.ws.Write(ctx, websocket.MessageText, msg)
		}
		if msg == nil && silent >= cfg.ProbeAfter {
			pctx, cancel := context.WithTimeout(ctx, cfg.ProbeTimeout)
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					cfg.Logger.Warn("push: connection not answering a ping, closing", "endpoint", s.ep.name,
						"combination", s.comb.String(), "silent", silent, "err", err)
				}
				c.cancel()
				return
			}
			c.touch()
		}
	}
}

// handle applies one event of connection c.
func (s *shard) handle(c *conn, ev event) {
	cfg := s.m.cfg
	switch ev.kind {
	case evAck, evRefused:
		if ev.kind == evRefused {
			cfg.Logger.Error("push: subscription refused", "endpoint", s.ep.name, "combination", s.comb.String(), "msg", ev.msg)
		}
		c.acks++
		if c.acks >= c.acksWanted {
			c.subscribed = true
			c.ackedOnce.Do(func() { close(c.acked) })
		}
		return
	case evShutdown:
		c.retireOnce.Do(func() { close(c.retire) })
		return
	case evPong:
		return
	}
	if c.subscribed || c.acksWanted == 0 {
		c.readyOnce.Do(func() { close(c.ready) })
	}
	switch ev.kind {
	case evCandle:
		s.candle(ev)
	case evTickers:
		s.tickers(ev.tickers)
	}
}

func (s *shard) candle(ev event) {
	se, ok := s.series[ev.topic]
	if !ok {
		return
	}
	if err := ev.candle.Validate(); err != nil {
		s.m.cfg.Logger.Warn("push: dropping bad candle", "endpoint", s.ep.name, "symbol", se.Symbol, "timeframe", string(se.Timeframe), "err", err)
		return
	}
	s.mu.Lock()
	if ev.candle.Time.After(s.lastOpen[se]) {
		s.lastOpen[se] = ev.candle.Time
	}
	s.mu.Unlock()
	s.m.cfg.OnCandle(CandleUpdate{Combination: s.comb, Symbol: se.Symbol, Timeframe: se.Timeframe, Candle: ev.candle, Closed: ev.closed})
}

func (s *shard) tickers(rows []exchangeTicker) {
	out := make([]domain.Ticker, 0, len(rows))
	for _, r := range rows {
		canonical, ok := s.symbols[r.symbol]
		if !ok {
			continue
		}
		r.ticker.Symbol = canonical
		if err := r.ticker.Validate(); err != nil {
			s.m.cfg.Logger.Warn("push: dropping bad ticker", "endpoint", s.ep.name, "symbol", r.symbol, "err", err)
			continue
		}
		out = append(out, r.ticker)
	}
	if len(out) > 0 {
		s.m.cfg.OnTickers(s.comb, out)
	}
}

// noteGaps records, when connection c has dropped, where the gap of each
// of the shard's series begins: the open time of the newest candle seen
// before the drop (it may have closed while the stream was down), or for
// a series never delivered, the start of its candle at c's dial or of the
// one before the drop, whichever is later (a stream silent for the
// connection's life had nothing to push before). The gap is fixed now,
// not when the repair runs: by then the next connection has delivered
// newer candles. A gap not yet repaired keeps its earlier start.
func (s *shard) noteGaps(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, se := range s.series {
		since, ok := s.lastOpen[se]
		if !ok {
			d := se.Timeframe.Duration()
			since = c.born.Truncate(d)
			if before := now.Add(-d).Truncate(d); before.After(since) {
				since = before
			}
		}
		if old, pending := s.gaps[se]; !pending || since.Before(old) {
			s.gaps[se] = since
		}
	}
}

// repair loads the gaps noted at the drops, once the new connection is
// live: each series from where its gap begins through now, over REST. A
// failed repair keeps its gap and is tried again with back-off while the
// shard is live; a repair running already takes new gaps in its next
// round. Only one runs per shard.
func (s *shard) repair(ctx context.Context) {
	cfg := s.m.cfg
	if cfg.Repair == nil {
		return
	}
	s.mu.Lock()
	if s.repairing {
		s.mu.Unlock()
		return
	}
	s.repairing = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.repairing = false; s.mu.Unlock() }()
	bo := backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff}
	for ctx.Err() == nil {
		s.mu.Lock()
		if !s.live.Load() || len(s.gaps) == 0 {
			// Gaps noted while not live wait for the next connection's
			// acknowledgements (their repair starts then).
			s.mu.Unlock()
			return
		}
		gaps := make([]Gap, 0, len(s.gaps))
		for se, t := range s.gaps {
			gaps = append(gaps, Gap{Combination: s.comb, Symbol: se.Symbol, Timeframe: se.Timeframe, Since: t})
		}
		clear(s.gaps)
		s.mu.Unlock()
		failed := 0
		for i, g := range gaps {
			err := ctx.Err()
			if err == nil {
				err = cfg.Repair(ctx, g)
				cfg.Metrics.GapRepair(s.ep.name, err)
			}
			if err == nil {
				continue
			}
			if ctx.Err() == nil {
				cfg.Logger.Warn("push: gap repair failed", "endpoint", s.ep.name, "symbol", g.Symbol, "timeframe", string(g.Timeframe), "err", err)
			}
			failed++
			s.keepGap(gaps[i])
		}
		if failed == 0 {
			bo.reset()
			continue
		}
		_ = sleep(ctx, bo.delay())
	}
}

// keepGap puts a gap not repaired back, unless an earlier one is pending.
func (s *shard) keepGap(g Gap) {
	se := Series{Symbol: g.Symbol, Timeframe: g.Timeframe}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.gaps[se]; !ok || g.Since.Before(old) {
		s.gaps[se] = g.Since
	}
}
