package push

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
)

// Names of the base URLs in Config.BaseURLs (the MARKET_FEED_URLS names) and
// their defaults. Paths are appended by the protocol.
const (
	NameBinanceStream        = "binance-stream"
	NameBinanceFuturesStream = "binance-futures-stream"
	NameOKXStream            = "okx-stream"

	DefaultBinanceStream        = "wss://stream.binance.com:9443"
	DefaultBinanceFuturesStream = "wss://fstream.binance.com"
	DefaultOKXStream            = "wss://ws.okx.com:8443"
)

// Series is one candle series of a combination to follow.
type Series struct {
	Symbol    string // canonical (BTC_USDT)
	Timeframe domain.Timeframe
}

// Plan is what to follow for one combination.
type Plan struct {
	Combination domain.Combination
	// Series are the candle series to stream.
	Series []Series
	// Tickers asks for the screener rows of Symbols as they change.
	Tickers bool
	// Symbols are the canonical symbols whose tickers are delivered; rows of
	// other instruments are dropped.
	Symbols []string
	// Partial says Series leave out some of the combination's symbols (a
	// plan's symbol limit): the stream only shortens the latency of the
	// series it carries, and REST keeps polling every series.
	Partial bool
}

// CandleUpdate is one pushed state of a candle: the open one as it changes,
// then the closed one (Closed true) once its interval has ended.
type CandleUpdate struct {
	Combination domain.Combination
	Symbol      string
	Timeframe   domain.Timeframe
	Candle      domain.Candle
	Closed      bool
}

// Gap asks for the candles of one series from Since (the open time of the
// last candle the stream delivered, included: it may have closed while the
// stream was down) up to now.
type Gap struct {
	Combination domain.Combination
	Symbol      string
	Timeframe   domain.Timeframe
	Since       time.Time
}

// Metrics receives the stream events operators watch. Endpoint is one of a
// fixed set (binance-spot, binance-futures, okx-public, okx-business).
type Metrics interface {
	// Connections adds delta (+1 opened, -1 closed) to the open
	// connections of an endpoint.
	Connections(endpoint string, delta int)
	// Reconnect counts a connection re-established after a drop.
	Reconnect(endpoint string)
	// GapRepair counts one repair call and whether it failed.
	GapRepair(endpoint string, err error)
}

// Config configures a Manager. OnCandle, OnTickers and Repair are called
// from the connections' goroutines, concurrently: they must be safe for
// concurrent use and return quickly (hand the work to a queue), or the
// connection stops reading and the exchange drops it.
type Config struct {
	// BaseURLs overrides the default hosts by name (NameBinanceStream, ...).
	BaseURLs map[string]string
	// OnCandle receives every candle update of a followed series.
	OnCandle func(CandleUpdate)
	// OnTickers receives the ticker rows of one push.
	OnTickers func(domain.Combination, []domain.Ticker)
	// Repair fetches a gap over REST after a reconnect; nil skips repairs.
	Repair func(ctx context.Context, g Gap) error
	// RepairBatch is how an Alpaca source repairs: the gaps of many series
	// of one combination and timeframe in one call (its connection carries
	// every stock series, and Alpaca's REST reads many symbols a request);
	// nil has it call Repair for each gap. The Manager uses Repair.
	RepairBatch func(ctx context.Context, gaps []Gap) error
	// Alpaca is the account and feed of Alpaca's stream (NewAlpaca).
	Alpaca AlpacaConfig
	// Metrics, nil for none.
	Metrics Metrics
	// Logger; nil discards.
	Logger *slog.Logger
	// HTTPClient dials the websockets; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MaxAge is how long a connection is used before it is replaced; 0
	// means 23 h, an hour before the exchanges' 24 h cut.
	MaxAge time.Duration
	// ReadyTimeout bounds how long a replacement connection may take to
	// deliver before the old one is closed anyway; 0 means 30 s.
	ReadyTimeout time.Duration
	// Overlap is how long the old connection keeps reading once its
	// replacement delivers, so what was already in flight on it is not
	// lost; 0 means 5 s.
	Overlap time.Duration
	// PingAfter is the silence after which OKX connections send "ping";
	// 0 means 25 s (OKX closes a connection silent for 30 s).
	PingAfter time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay; 0 means 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// StaleAfter closes a connection that received nothing (no message, no
	// ping) for that long; 0 means 5 min, above USDⓈ-M's 3-minute pings.
	StaleAfter time.Duration
	// ProbeAfter is the silence after which a Binance connection is sent a
	// websocket ping; ProbeTimeout how long its pong (or OKX's "pong" to
	// the text keep-alive) may take before the connection is taken for
	// half-open and closed (then reconnected and its gap repaired). 0
	// means 30 s and 10 s.
	ProbeAfter, ProbeTimeout time.Duration
}

func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.OnCandle == nil {
		cfg.OnCandle = func(CandleUpdate) {}
	}
	if cfg.OnTickers == nil {
		cfg.OnTickers = func(domain.Combination, []domain.Ticker) {}
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 23 * time.Hour
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.Overlap <= 0 {
		cfg.Overlap = 5 * time.Second
	}
	if cfg.PingAfter <= 0 {
		cfg.PingAfter = okxPingAfter
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 5 * time.Minute
	}
	if cfg.ProbeAfter <= 0 {
		cfg.ProbeAfter = 30 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 10 * time.Second
	}
	return cfg
}

func (cfg Config) baseURL(name, fallback string) string {
	if u := cfg.BaseURLs[name]; u != "" {
		return strings.TrimRight(u, "/")
	}
	return fallback
}

type noMetrics struct{}

func (noMetrics) Connections(string, int) {}
func (noMetrics) Reconnect(string)        {}
func (noMetrics) GapRepair(string, error) {}

// Supports reports whether a combination has streams here: Binance spot and
// perpetual (USDⓈ-M), OKX spot and perpetual (linear USDT swaps). Binance's
// quarterly futures stay on REST.
func Supports(c domain.Combination) bool {
	if c.Market != domain.Crypto {
		return false
	}
	switch c.Exchange {
	case "binance", "okx":
		return c.Instrument == "spot" || c.Instrument == "perpetual"
	}
	return false
}

// Manager runs the stream connections of a set of plans.
type Manager struct {
	cfg Config
	// attempts are the per-host connection-attempt budgets, shared by every
	// shard dialling that host.
	attempts map[string]*windowLimiter

	mu     sync.Mutex
	shards map[domain.Combination][]*shard
}

// New returns a Manager; Run starts it.
func New(cfg Config) *Manager {
	return &Manager{
		cfg: cfg.withDefaults(),
		attempts: map[string]*windowLimiter{
			"binance-spot":    newWindowLimiter(binanceAttempts, binanceAttemptWindow),
			"binance-futures": newWindowLimiter(binanceAttempts, binanceAttemptWindow),
			"okx":             newWindowLimiter(okxAttempts, okxAttemptWindow),
		},
		shards: map[domain.Combination][]*shard{},
	}
}

// Run follows the plans until ctx ends; it returns an error only for a plan
// it cannot follow (checked before anything is dialled). To change what is
// followed, cancel and Run again with the new plans.
func (m *Manager) Run(ctx context.Context, plans []Plan) error {
	var all []*shard
	byComb := map[domain.Combination][]*shard{}
	for _, p := range plans {
		shards, err := m.shardsOf(p)
		if err != nil {
			return err
		}
		byComb[p.Combination] = append(byComb[p.Combination], shards...)
		all = append(all, shards...)
	}
	m.mu.Lock()
	m.shards = byComb
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.run(ctx) })
	}
	wg.Wait()
	return nil
}

// Live reports whether every connection of the combination is up, so a
// caller can fall back to REST polling while it is not.
func (m *Manager) Live(c domain.Combination) bool {
	m.mu.Lock()
	shards := m.shards[c]
	m.mu.Unlock()
	if len(shards) == 0 {
		return false
	}
	for _, s := range shards {
		if !s.live.Load() {
			return false
		}
	}
	return true
}

// shardsOf splits a plan's topics over connections of its endpoints.
func (m *Manager) shardsOf(p Plan) ([]*shard, error) {
	if !Supports(p.Combination) {
		return nil, fmt.Errorf("push: %s: no stream for this combination", p.Combination)
	}
	for _, s := range p.Series {
		if s.Timeframe.Duration() <= 0 {
			return nil, fmt.Errorf("push: %s: unknown timeframe %q", p.Combination, s.Timeframe)
		}
	}
	var out []*shard
	for _, g := range m.endpointsOf(p) {
		for i := 0; i < len(g.topics); i += g.proto.maxTopics() {
			out = append(out, newShard(m, p.Combination, g.ep, g.topics[i:min(i+g.proto.maxTopics(), len(g.topics))], g.tickerSymbols))
		}
	}
	return out, nil
}

// endpointGroup is the topics of one plan served by one endpoint.
type endpointGroup struct {
	ep            endpoint
	proto         protocol
	topics        []topic
	tickerSymbols map[string]string // exchange symbol → canonical
}

type endpoint struct {
	name     string // metrics label: binance-spot, binance-futures, okx-public, okx-business
	url      string
	proto    protocol
	attempts *windowLimiter
}

func (m *Manager) endpointsOf(p Plan) []endpointGroup {
	c := p.Combination
	if c.Exchange == "binance" {
		proto, ep := binanceSpot(), endpoint{name: "binance-spot", url: m.cfg.baseURL(NameBinanceStream, DefaultBinanceStream)}
		if c.Instrument == "perpetual" {
			proto, ep = binanceFutures(), endpoint{name: "binance-futures", url: m.cfg.baseURL(NameBinanceFuturesStream, DefaultBinanceFuturesStream)}
		}
		ep.proto, ep.attempts = proto, m.attempts[ep.name]
		g := endpointGroup{ep: ep, proto: proto, tickerSymbols: map[string]string{}}
		if p.Tickers {
			g.topics = append(g.topics, topic{name: binanceMiniTickers, tickers: true})
			for _, s := range p.Symbols {
				g.tickerSymbols[binanceSymbol(s)] = s
			}
		}
		for _, s := range p.Series {
			g.topics = append(g.topics, topic{name: binanceKlineStream(s), series: s})
		}
		return []endpointGroup{g}
	}
	base := m.cfg.baseURL(NameOKXStream, DefaultOKXStream)
	swap := c.Instrument == "perpetual"
	business, public := okxBusiness(m.cfg.PingAfter), okxPublic(m.cfg.PingAfter)
	candles := endpointGroup{ep: endpoint{name: "okx-business", url: base, proto: business, attempts: m.attempts["okx"]}, proto: business}
	for _, s := range p.Series {
		candles.topics = append(candles.topics, topic{name: okxCandleKey(s, swap), series: s})
	}
	tickers := endpointGroup{ep: endpoint{name: "okx-public", url: base, proto: public, attempts: m.attempts["okx"]}, proto: public, tickerSymbols: map[string]string{}}
	if p.Tickers {
		for _, s := range p.Symbols {
			inst := okxInstID(s, swap)
			tickers.tickerSymbols[inst] = s
			tickers.topics = append(tickers.topics, topic{name: okxTickersKey(inst), tickers: true})
		}
	}
	var out []endpointGroup
	for _, g := range []endpointGroup{candles, tickers} {
		if len(g.topics) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// shard is one connection's worth of topics of one combination; it keeps
// one connection open (two while replacing it).
type shard struct {
	m       *Manager
	comb    domain.Combination
	ep      endpoint
	topics  []topic
	series  map[string]Series // topic name → series
	symbols map[string]string // exchange symbol → canonical, for tickers
	live    atomic.Bool

	mu       sync.Mutex
	lastOpen map[Series]time.Time // open time of the newest candle seen per series
	// gaps are where the gaps of dropped connections begin, per series,
	// until repaired (noteGaps, repair).
	gaps      map[Series]time.Time
	repairing bool
}

func newShard(m *Manager, c domain.Combination, ep endpoint, topics []topic, symbols map[string]string) *shard {
	s := &shard{m: m, comb: c, ep: ep, topics: topics, series: map[string]Series{}, symbols: symbols, lastOpen: map[Series]time.Time{},
		gaps: map[Series]time.Time{}}
	for _, t := range topics {
		if !t.tickers {
			s.series[t.name] = t.series
		}
	}
	return s
}
