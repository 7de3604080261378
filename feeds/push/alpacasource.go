package push

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/marketscreener/market/domain"
)

// Timing of an Alpaca connection.
const (
	// alpacaHandshake bounds the wait for each handshake message:
	// authentication must be done within 10 seconds [docs-stream].
	alpacaHandshake = 10 * time.Second
	// alpacaAckWait bounds the wait for the subscriptions' confirmations.
	alpacaAckWait = 30 * time.Second
	// alpacaPingEvery and alpacaPongWait keep a quiet connection checked:
	// outside the sessions nothing is pushed for hours, so silence proves
	// nothing; the SDK pings every 10 s and waits 5 s for the pong
	// ([sdk-go] conn.go).
	alpacaPingEvery = 20 * time.Second
	alpacaPongWait  = 10 * time.Second
	// alpacaRefusedBackoff is how many times MaxBackoff the wait after a
	// refused account may grow to (30 min with the default 1 min): the
	// keys or the plan need an operator, and attempts would only fill the
	// log and Alpaca's.
	alpacaRefusedBackoff = 30
)

// Alpaca follows the stock bars of Alpaca's market-data websocket: every
// plan's symbols on one connection, since a plan allows one
// [docs-stream], subscribed to minute bars (delivered as closed 1m
// candles), updated bars (the same candles corrected) and daily bars (the
// open 1d candle). Config.Alpaca authenticates it; Config.BaseURLs'
// NameAlpacaStream overrides the host.
//
// A connection refused for the account (auth failed, timeout) is retried
// after a long back-off; one refused because another holds the plan's
// connection (406) after the usual back-off, logged once; a subscription
// the plan cannot carry (405, 409) stops streaming until Run is called
// again, logged at error level: REST keeps every series either way.
type Alpaca struct {
	cfg Config

	mu   sync.Mutex
	live map[domain.Combination]bool
}

var _ Source = (*Alpaca)(nil)

// NewAlpaca returns an Alpaca source; Run starts it.
func NewAlpaca(cfg Config) *Alpaca {
	return &Alpaca{cfg: cfg.withDefaults(), live: map[domain.Combination]bool{}}
}

// Live implements Source: the connection is up and has every subscription
// confirmed.
func (a *Alpaca) Live(c domain.Combination) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live[c]
}

func (a *Alpaca) setLive(combs []domain.Combination) {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.live)
	for _, c := range combs {
		a.live[c] = true
	}
}

// alpacaSubscription is what the plans ask of the connection.
type alpacaSubscription struct {
	bars, daily []string // symbols, in the plans' order
	combs       []domain.Combination
	combOf      map[string]domain.Combination // symbol → its combination
	series      map[Series]bool
}

// subscriptionOf checks the plans (stock combinations, 1m and 1d series,
// within the plan's symbol limit) and gathers their symbols.
func (a *Alpaca) subscriptionOf(plans []Plan) (alpacaSubscription, error) {
	sub := alpacaSubscription{combOf: map[string]domain.Combination{}, series: map[Series]bool{}}
	for _, p := range plans {
		if !AlpacaSupports(p.Combination) {
			return sub, fmt.Errorf("push: alpaca: %s: not a stock combination", p.Combination)
		}
		if len(p.Series) == 0 {
			continue
		}
		sub.combs = append(sub.combs, p.Combination)
		for _, se := range p.Series {
			if c, dup := sub.combOf[se.Symbol]; dup && c != p.Combination {
				return sub, fmt.Errorf("push: alpaca: %s is planned on %s and %s", se.Symbol, c, p.Combination)
			}
			sub.combOf[se.Symbol] = p.Combination
			switch se.Timeframe {
			case domain.TF1m:
				sub.bars = append(sub.bars, se.Symbol)
			case domain.TF1d:
				sub.daily = append(sub.daily, se.Symbol)
			default:
				return sub, fmt.Errorf("push: alpaca: %s %s: Alpaca pushes 1m and 1d bars only", se.Symbol, se.Timeframe)
			}
			sub.series[se] = true
		}
	}
	if limit := a.cfg.Alpaca.SymbolLimit(); limit > 0 && len(sub.combOf) > limit {
		return sub, fmt.Errorf("push: alpaca: %d symbols planned, the %s feed's plan streams %d", len(sub.combOf), a.cfg.Alpaca.feed(), limit)
	}
	return sub, nil
}

// Run follows the plans until ctx ends; it returns an error only for plans
// it cannot follow (checked before anything is dialled).
func (a *Alpaca) Run(ctx context.Context, plans []Plan) error {
	sub, err := a.subscriptionOf(plans)
	if err != nil {
		return err
	}
	defer a.setLive(nil)
	if len(sub.combOf) == 0 {
		<-ctx.Done()
		return nil
	}
	r := &alpacaRun{a: a, cfg: a.cfg, sub: sub, lastOpen: map[seriesOf]time.Time{}}
	r.loop(ctx)
	return nil
}

// seriesOf is a series of a combination.
type seriesOf struct {
	comb domain.Combination
	Series
}

// alpacaRun is one Run's connections, one at a time.
type alpacaRun struct {
	a   *Alpaca
	cfg Config
	sub alpacaSubscription

	mu       sync.Mutex
	lastOpen map[seriesOf]time.Time // open time of the newest candle seen per series
	// gapFrom is lastOpen as it stood when the connection dropped (the
	// first drop since the last repair): where each series' gap begins.
	// The repair starts after the next connection is confirmed, and by
	// then it may have delivered newer candles.
	gapFrom map[seriesOf]time.Time
}

// dropped notes where each series' gap begins, at a connection's end: a
// series already noted by an earlier drop keeps that start.
func (r *alpacaRun) dropped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gapFrom == nil {
		r.gapFrom = make(map[seriesOf]time.Time, len(r.lastOpen))
	}
	for se, t := range r.lastOpen {
		if _, ok := r.gapFrom[se]; !ok {
			r.gapFrom[se] = t
		}
	}
}

// loop keeps a connection until ctx ends or the plan is refused.
func (r *alpacaRun) loop(ctx context.Context) {
	cfg := r.cfg
	log := cfg.Logger.With("endpoint", alpacaEndpoint, "feed", cfg.Alpaca.feed())
	bo := backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff}
	refused := backoff{min: cfg.MaxBackoff, max: alpacaRefusedBackoff * cfg.MaxBackoff}
	busyLogged, reconnect := false, false
	for ctx.Err() == nil {
		end := r.session(ctx, reconnect)
		if ctx.Err() != nil {
			return
		}
		r.dropped()
		if end.subscribed {
			reconnect, busyLogged = true, false
			refused.reset()
			if end.lived > cfg.MaxBackoff {
				bo.reset()
			}
		}
		switch end.outcome {
		case alpacaStopped:
			log.Error("push: alpaca refused the subscription; streaming stopped, REST keeps every series: "+alpacaStopReason(end.code, cfg.Alpaca, len(r.sub.combOf)),
				"code", end.code, "msg", end.msg, "symbols", len(r.sub.combOf), "symbol_limit", cfg.Alpaca.SymbolLimit())
			<-ctx.Done()
			return
		case alpacaBusy:
			d := bo.delay()
			if !busyLogged {
				log.Warn("push: alpaca: connection limit exceeded (406): another connection of these keys holds the plan's one connection (another deployment?); retrying with back-off",
					"retry_in", d)
				busyLogged = true
			} else {
				log.Debug("push: alpaca: connection limit still exceeded (406)", "retry_in", d)
			}
			_ = sleep(ctx, d)
		case alpacaRefused, alpacaBug:
			d := refused.delay()
			what := "the account was refused: check the key id, the secret and that the keys have market data"
			if end.outcome == alpacaBug {
				what = "a message of this client was refused (a bug)"
			}
			log.Error("push: alpaca: "+what, "code", end.code, "msg", end.msg, "retry_in", d)
			_ = sleep(ctx, d)
		default:
			d := bo.delay()
			log.Warn("push: alpaca: connection dropped", "err", end.err, "code", end.code, "msg", end.msg, "retry_in", d)
			_ = sleep(ctx, d)
		}
	}
}

// alpacaStopReason names the limit behind a stopping error.
func alpacaStopReason(code int, a AlpacaConfig, symbols int) string {
	switch code {
	case 405:
		return fmt.Sprintf("symbol limit exceeded (405): the keys' plan streams fewer symbols than the %d subscribed", symbols)
	case 409:
		return fmt.Sprintf("insufficient subscription (409): the keys' plan has no %s feed (sip needs a paid plan)", a.feed())
	}
	return "insufficient scope (411): the credentials may not read market data"
}

// sessionEnd is how one connection ended.
type sessionEnd struct {
	outcome    alpacaOutcome
	code       int // Alpaca's error code, 0 without one
	msg        string
	err        error
	subscribed bool          // every subscription was confirmed
	lived      time.Duration // from the dial to the end
}

// session runs one connection: dial, welcome, auth, subscribe, then
// deliver until it ends. Once every subscription is confirmed the plans'
// combinations are live and, on a reconnect, the series seen before get
// their gaps repaired.
func (r *alpacaRun) session(ctx context.Context, reconnect bool) (end sessionEnd) {
	cfg := r.cfg
	born := time.Now()
	defer func() { end.lived = time.Since(born) }()
	url := cfg.baseURL(NameAlpacaStream, DefaultAlpacaStream) + "/v2/" + cfg.Alpaca.feed()
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	ws, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: cfg.HTTPClient})
	dcancel()
	if err != nil {
		return sessionEnd{err: fmt.Errorf("push: alpaca: dial: %w", err)}
	}
	ws.SetReadLimit(readLimit)
	cfg.Metrics.Connections(alpacaEndpoint, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		_ = ws.CloseNow()
		cfg.Metrics.Connections(alpacaEndpoint, -1)
		r.a.setLive(nil)
	}()
	c := &alpacaConn{run: r, ws: ws, runCtx: ctx}
	if end, ok := c.handshake(cctx); !ok {
		return end
	}
	msgs := alpacaSubscribe(r.sub.bars, r.sub.daily)
	for _, m := range msgs {
		if err := ws.Write(cctx, websocket.MessageText, m); err != nil {
			return sessionEnd{err: fmt.Errorf("push: alpaca: subscribe: %w", err)}
		}
	}
	c.acksWanted = len(msgs)
	pingErr := make(chan error, 1)
	go c.ping(cctx, cancel, pingErr)
	end = c.deliver(cctx, reconnect)
	if end.err != nil && ctx.Err() == nil {
		select {
		case perr := <-pingErr:
			end.err = perr
		default:
		}
	}
	return end
}

// alpacaConn is one connection's reading side.
type alpacaConn struct {
	run        *alpacaRun
	ws         *websocket.Conn
	runCtx     context.Context // the Run's: a repair outlives the connection
	acksWanted int
	acks       int
	subscribed bool
}

// next reads one frame before deadline (none if zero) and decodes it.
func (c *alpacaConn) next(ctx context.Context, deadline time.Time) ([]alpacaMsg, error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	var msgs []alpacaMsg
	if err := decodeAlpaca(data, func(m alpacaMsg) { msgs = append(msgs, m) }); err != nil {
		c.run.cfg.Logger.Warn("push: alpaca: undecodable message", "endpoint", alpacaEndpoint, "err", err)
	}
	return msgs, nil
}

// handshake waits for the welcome, authenticates and waits for the
// answer ([docs-md] "Establishment"); false with how it ended otherwise.
func (c *alpacaConn) handshake(ctx context.Context) (sessionEnd, bool) {
	if end, ok := c.await(ctx, "connected"); !ok {
		return end, false
	}
	if err := c.ws.Write(ctx, websocket.MessageText, alpacaAuth(c.run.cfg.Alpaca)); err != nil {
		return sessionEnd{err: fmt.Errorf("push: alpaca: auth: %w", err)}, false
	}
	return c.await(ctx, "authenticated")
}

// await reads until the success message msg; an error message ends the
// connection with its outcome.
func (c *alpacaConn) await(ctx context.Context, msg string) (sessionEnd, bool) {
	deadline := time.Now().Add(alpacaHandshake)
	for {
		msgs, err := c.next(ctx, deadline)
		if err != nil {
			return sessionEnd{err: fmt.Errorf("push: alpaca: waiting for %q: %w", msg, err)}, false
		}
		for _, m := range msgs {
			switch {
			case m.typ == "error":
				return sessionEnd{outcome: alpacaOutcomeOf(m.code), code: m.code, msg: m.msg}, false
			case m.typ == "success" && m.msg == msg:
				return sessionEnd{}, true
			}
		}
	}
}

// deliver reads until the connection ends: confirmations, errors and
// bars, handed to Config.OnCandle as they come.
func (c *alpacaConn) deliver(ctx context.Context, reconnect bool) sessionEnd {
	deadline := time.Now().Add(alpacaAckWait)
	for {
		if c.subscribed {
			deadline = time.Time{}
		}
		msgs, err := c.next(ctx, deadline)
		if err != nil {
			what := "read"
			if !c.subscribed {
				what = "waiting for the subscription's confirmation"
			}
			return sessionEnd{subscribed: c.subscribed, err: fmt.Errorf("push: alpaca: %s: %w", what, err)}
		}
		for _, m := range msgs {
			switch m.typ {
			case "error":
				return sessionEnd{subscribed: c.subscribed, outcome: alpacaOutcomeOf(m.code), code: m.code, msg: m.msg}
			case "subscription":
				c.confirmed(m, reconnect)
			case "b", "u", "d":
				c.run.candle(m)
			}
		}
	}
}

// confirmed counts a subscription confirmation; the last one makes the
// plans live and, on a reconnect, starts the gap repair.
func (c *alpacaConn) confirmed(m alpacaMsg, reconnect bool) {
	r := c.run
	c.acks++
	if c.subscribed || c.acks < c.acksWanted {
		return
	}
	c.subscribed = true
	// The confirmation lists every current subscription [docs-md]: a
	// planned symbol missing from it is not streamed.
	missing := 0
	for ch, want := range map[string][]string{"bars": r.sub.bars, "updatedBars": r.sub.bars, "dailyBars": r.sub.daily} {
		got := make(map[string]bool, len(m.subscribed[ch]))
		for _, s := range m.subscribed[ch] {
			got[s] = true
		}
		for _, s := range want {
			if !got[s] && !got["*"] {
				missing++
			}
		}
	}
	if missing > 0 {
		r.cfg.Logger.Warn("push: alpaca: subscriptions missing from the confirmation", "endpoint", alpacaEndpoint, "missing", missing)
	}
	r.a.setLive(r.sub.combs)
	if reconnect {
		r.cfg.Metrics.Reconnect(alpacaEndpoint)
		go r.repair(c.runCtx)
	}
}

// ping checks a quiet connection with websocket pings; a missing pong
// ends it (cancel).
func (c *alpacaConn) ping(ctx context.Context, cancel context.CancelFunc, failed chan<- error) {
	t := time.NewTicker(alpacaPingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(ctx, alpacaPongWait)
		err := c.ws.Ping(pctx)
		pcancel()
		if err != nil && ctx.Err() == nil {
			failed <- fmt.Errorf("push: alpaca: no pong: %w", err)
			cancel()
			return
		}
	}
}

// candle hands a planned series' bar to Config.OnCandle.
func (r *alpacaRun) candle(m alpacaMsg) {
	comb, ok := r.sub.combOf[m.symbol]
	if !ok || !r.sub.series[Series{Symbol: m.symbol, Timeframe: m.tf}] {
		return // a symbol recently unsubscribed may still come [docs-md]
	}
	if err := m.candle.Validate(); err != nil {
		r.cfg.Logger.Warn("push: dropping bad candle", "endpoint", alpacaEndpoint, "symbol", m.symbol, "timeframe", string(m.tf), "err", err)
		return
	}
	key := seriesOf{comb, Series{Symbol: m.symbol, Timeframe: m.tf}}
	r.mu.Lock()
	if m.candle.Time.After(r.lastOpen[key]) {
		r.lastOpen[key] = m.candle.Time
	}
	r.mu.Unlock()
	r.cfg.OnCandle(CandleUpdate{Combination: comb, Symbol: m.symbol, Timeframe: m.tf, Candle: m.candle, Closed: m.closed})
}

// repair asks for the gaps of every series seen before the drop, from
// the newest candle each had delivered at the drop (gapFrom), grouped
// by combination and timeframe for Config.RepairBatch (a connection of a
// paid plan carries thousands of series, and Alpaca's REST reads many
// symbols a request), else one by one with Config.Repair.
func (r *alpacaRun) repair(ctx context.Context) {
	cfg := r.cfg
	r.mu.Lock()
	from := r.gapFrom
	r.gapFrom = nil
	groups := map[seriesOf][]Gap{} // by combination and timeframe
	for se, t := range from {
		k := seriesOf{comb: se.comb, Series: Series{Timeframe: se.Timeframe}}
		groups[k] = append(groups[k], Gap{Combination: se.comb, Symbol: se.Symbol, Timeframe: se.Timeframe, Since: t})
	}
	r.mu.Unlock()
	for _, gaps := range groups {
		if ctx.Err() != nil {
			return
		}
		slices.SortFunc(gaps, func(a, b Gap) int { return strings.Compare(a.Symbol, b.Symbol) })
		var err error
		switch {
		case cfg.RepairBatch != nil:
			err = cfg.RepairBatch(ctx, gaps)
		case cfg.Repair != nil:
			for _, g := range gaps {
				err = errors.Join(err, cfg.Repair(ctx, g))
			}
		default:
			return
		}
		for range gaps { // the metric counts series
			cfg.Metrics.GapRepair(alpacaEndpoint, err)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			cfg.Logger.Warn("push: alpaca: gap repair failed", "endpoint", alpacaEndpoint, "combination", gaps[0].Combination.String(),
				"timeframe", string(gaps[0].Timeframe), "series", len(gaps), "err", err)
		}
	}
}
