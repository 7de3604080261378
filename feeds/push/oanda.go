package push

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
)

// OANDA's pricing stream (v20, GET /v3/accounts/{accountID}/pricing/stream;
// oanda/v20-openapi json/v20.json and
// https://developer.oanda.com/rest-live-v20/pricing-ep/): a chunked HTTP
// response, not a websocket, of one JSON object a line, a Price ("type":
// "PRICE") or a PricingHeartbeat ("type": "HEARTBEAT") sent every 5
// seconds; at most 4 prices a second per instrument, a snapshot of every
// instrument first. OANDA allows 20 active streams and 2 new connections a
// second per IP (https://developer.oanda.com/rest-live-v20/development-guide/,
// "Rate Limiting"): every plan is followed on one connection, and its
// connections are opened by the feed, which paces them.
const (
	oandaEndpoint = "oanda-pricing" // the metrics label
	// oandaHeartbeat is the documented heartbeat interval; a connection
	// that delivered nothing for three of them is considered dead.
	oandaHeartbeat  = 5 * time.Second
	oandaStaleAfter = 3 * oandaHeartbeat
	// oandaLineLimit bounds one line: a price of one instrument with a
	// few liquidity buckets is under a kilobyte.
	oandaLineLimit = 1 << 20
)

// Price is one pushed price of an instrument: the mid of its best bid and
// ask (the closeout prices when a side has no liquidity).
type Price struct {
	Symbol    string // canonical (OANDA names its instruments BASE_QUOTE already)
	Price     float64
	Time      time.Time
	Tradeable bool // false while the market is closed
}

// OandaPricingConfig configures an OandaPricing.
type OandaPricingConfig struct {
	// Open starts the stream of symbols and returns its body (the feed's
	// PricePusher.OpenPriceStream: host, account, token, connection
	// limits).
	Open func(ctx context.Context, symbols []string) (io.ReadCloser, error)
	// Tickers completes the newest prices of a combination into screener
	// rows (the feed's daily change and volume). It may take a REST
	// request, so it runs apart from the reading: a slow one only makes
	// the next call carry newer prices.
	Tickers func(ctx context.Context, c domain.Combination, prices []Price) ([]domain.Ticker, error)
	// OnTickers receives the rows of one combination.
	OnTickers func(domain.Combination, []domain.Ticker)
	// Metrics, nil for none; Logger, nil discards.
	Metrics Metrics
	Logger  *slog.Logger
	// StaleAfter closes a connection silent for that long; 0 means 15 s,
	// three of the documented 5-second heartbeats.
	StaleAfter time.Duration
	// EmitEvery is how often the prices received are completed and
	// delivered; 0 means 1 s.
	EmitEvery time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay; 0 means 1 s and
	// 1 min.
	MinBackoff, MaxBackoff time.Duration
}

// OandaPricing follows OANDA's pricing stream of the plans' symbols and
// delivers screener rows (Plan.Tickers; it has no candles). It reconnects
// with back-off after a drop or a silence. While the market is closed
// (weekends) OANDA sends heartbeats alone: the connection stays up, no row
// is delivered and nothing is logged, so the last prices stay.
type OandaPricing struct {
	cfg  OandaPricingConfig
	live atomic.Bool

	mu     sync.Mutex
	combos map[domain.Combination]bool // of the running plans
}

var _ Source = (*OandaPricing)(nil)

// NewOandaPricing returns an OandaPricing; Run starts it.
func NewOandaPricing(cfg OandaPricingConfig) *OandaPricing {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.OnTickers == nil {
		cfg.OnTickers = func(domain.Combination, []domain.Ticker) {}
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = oandaStaleAfter
	}
	if cfg.EmitEvery <= 0 {
		cfg.EmitEvery = time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	return &OandaPricing{cfg: cfg, combos: map[domain.Combination]bool{}}
}

// Live implements Source: the connection is up and not silent, and c is
// one of the running plans.
func (p *OandaPricing) Live(c domain.Combination) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live.Load() && p.combos[c]
}

// Run follows the plans' symbols on one connection until ctx ends.
func (p *OandaPricing) Run(ctx context.Context, plans []Plan) error {
	if p.cfg.Open == nil || p.cfg.Tickers == nil {
		return errors.New("push: oanda pricing: Open and Tickers are required")
	}
	comboOf := map[string]domain.Combination{}
	var symbols []string
	for _, pl := range plans {
		if !pl.Tickers {
			continue
		}
		for _, s := range pl.Symbols {
			if _, dup := comboOf[s]; !dup {
				symbols = append(symbols, s)
			}
			comboOf[s] = pl.Combination
		}
	}
	p.mu.Lock()
	clear(p.combos)
	for _, c := range comboOf {
		p.combos[c] = true
	}
	p.mu.Unlock()
	defer func() {
		p.live.Store(false)
		p.mu.Lock()
		clear(p.combos)
		p.mu.Unlock()
	}()
	if len(symbols) == 0 {
		<-ctx.Done()
		return nil
	}
	book := newPriceBook(comboOf)
	var wg sync.WaitGroup
	wg.Go(func() { p.emit(ctx, book) })
	p.follow(ctx, symbols, book)
	wg.Wait()
	return nil
}

// follow keeps one connection open until ctx ends.
func (p *OandaPricing) follow(ctx context.Context, symbols []string, book *priceBook) {
	cfg := p.cfg
	bo := backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff}
	dropped := false
	for ctx.Err() == nil {
		body, err := cfg.Open(ctx, symbols)
		if err != nil {
			if ctx.Err() == nil {
				cfg.Logger.Warn("push: oanda pricing: connect failed", "err", err)
				_ = sleep(ctx, bo.delay())
			}
			continue
		}
		cfg.Metrics.Connections(oandaEndpoint, 1)
		if dropped {
			cfg.Metrics.Reconnect(oandaEndpoint)
		}
		born := time.Now()
		err = p.read(ctx, body, book)
		cfg.Metrics.Connections(oandaEndpoint, -1)
		p.live.Store(false)
		if ctx.Err() != nil {
			return
		}
		cfg.Logger.Warn("push: oanda pricing: connection dropped", "err", err)
		if time.Since(born) > cfg.MaxBackoff {
			bo.reset()
		}
		dropped = true
		_ = sleep(ctx, bo.delay())
	}
}

// read decodes the lines of one connection into the book until the body
// ends, fails, stays silent for StaleAfter or ctx ends; it closes body.
func (p *OandaPricing) read(ctx context.Context, body io.ReadCloser, book *priceBook) error {
	cfg := p.cfg
	var silent atomic.Bool
	watchdog := time.AfterFunc(cfg.StaleAfter, func() { silent.Store(true); _ = body.Close() })
	stop := context.AfterFunc(ctx, func() { _ = body.Close() })
	defer func() {
		watchdog.Stop()
		stop()
		_ = body.Close()
	}()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), oandaLineLimit)
	bad := 0
	for sc.Scan() {
		watchdog.Reset(cfg.StaleAfter)
		p.live.Store(true)
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		pr, isPrice, err := parseOandaLine(line)
		switch {
		case err != nil:
			if bad++; bad == 1 {
				cfg.Logger.Warn("push: oanda pricing: undecodable line (later ones on this connection are counted, not logged)", "err", err)
			}
		case isPrice:
			book.put(pr)
		}
	}
	err := sc.Err()
	switch {
	case silent.Load():
		err = fmt.Errorf("silent for %s (heartbeats are sent every %s)", cfg.StaleAfter, oandaHeartbeat)
	case err == nil:
		err = io.EOF
	}
	if bad > 0 {
		err = fmt.Errorf("%w (%d undecodable lines)", err, bad)
	}
	return err
}

// emit completes and delivers the book's new prices every EmitEvery.
func (p *OandaPricing) emit(ctx context.Context, book *priceBook) {
	t := time.NewTicker(p.cfg.EmitEvery)
	defer t.Stop()
	var lastWarn time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for c, prices := range book.take() {
			rows, err := p.cfg.Tickers(ctx, c, prices)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				book.putBack(prices) // tried again with the next push
				if time.Since(lastWarn) > time.Minute {
					lastWarn = time.Now()
					p.cfg.Logger.Warn("push: oanda pricing: completing prices failed; retried, logged once a minute", "combination", c.String(), "err", err)
				}
				continue
			}
			valid := rows[:0]
			for _, r := range rows {
				if r.Validate() == nil {
					valid = append(valid, r)
				}
			}
			if len(valid) > 0 {
				p.cfg.OnTickers(c, valid)
			}
		}
	}
}

// priceBook keeps the newest price of every symbol not delivered yet: a
// push that arrives while the previous ones are being completed replaces
// them instead of queueing behind them.
type priceBook struct {
	comboOf map[string]domain.Combination

	mu      sync.Mutex
	pending map[string]Price
}

func newPriceBook(comboOf map[string]domain.Combination) *priceBook {
	return &priceBook{comboOf: comboOf, pending: map[string]Price{}}
}

// put records a price of a followed symbol, unless an as new one waits.
func (b *priceBook) put(p Price) {
	if _, ok := b.comboOf[p.Symbol]; !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.pending[p.Symbol]; !ok || !p.Time.Before(old.Time) {
		b.pending[p.Symbol] = p
	}
}

func (b *priceBook) putBack(ps []Price) {
	for _, p := range ps {
		b.put(p)
	}
}

// take removes the pending prices, by combination.
func (b *priceBook) take() map[domain.Combination][]Price {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[domain.Combination][]Price{}
	for s, p := range b.pending {
		c := b.comboOf[s]
		out[c] = append(out[c], p)
	}
	clear(b.pending)
	return out
}

// oandaLine is a Price (a v20 ClientPrice, read as the pricing endpoint's
// are: feeds.OandaClientPrice) or PricingHeartbeat line.
type oandaLine struct {
	Type string `json:"type"`
	feeds.OandaClientPrice
}

// parseOandaLine decodes one line: a price (isPrice), a heartbeat (neither
// a price nor an error) or an error for anything else.
func parseOandaLine(line []byte) (p Price, isPrice bool, err error) {
	var l oandaLine
	if err := json.Unmarshal(line, &l); err != nil {
		return Price{}, false, fmt.Errorf("oanda: %w", err)
	}
	switch l.Type {
	case "HEARTBEAT":
		if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil {
			return Price{}, false, fmt.Errorf("oanda: heartbeat time %q", l.Time)
		}
		return Price{}, false, nil
	case "PRICE":
	default:
		return Price{}, false, fmt.Errorf("oanda: unknown message type %q", l.Type)
	}
	if l.Instrument == "" {
		return Price{}, false, fmt.Errorf("oanda: price without an instrument at %q", l.Time)
	}
	price, at, tradeable, err := l.Mid()
	if err != nil {
		return Price{}, false, fmt.Errorf("oanda: price of %s: %w", l.Instrument, err)
	}
	return Price{Symbol: l.Instrument, Price: price, Time: at, Tradeable: tradeable}, true, nil
}
