package feeds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

// Provider serves one or more catalogue combinations.
type Provider interface {
	// Name is the feed name as written in MARKET_FEEDS ("binance", "synthetic").
	Name() string
	// Supports reports whether the provider can serve the combination.
	Supports(c domain.Combination) bool
	// Tickers returns the live screener rows of every instrument of the
	// combination (canonical symbols). Rows that fail validation are dropped
	// and logged.
	Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error)
	// Candles returns closed-or-current candles of one symbol, oldest to
	// newest, open time ≥ since, at most limit: the oldest limit candles from
	// since, so a backfill pages forward from the last open time it got. A
	// zero since asks for the newest limit candles. A response with any
	// invalid candle is an error; an unknown symbol is a domain ENOTFOUND.
	Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error)
	// Symbols lists the canonical symbols of the combination (for candle
	// ingest and backfill).
	Symbols(ctx context.Context, c domain.Combination) ([]string, error)
}

// BulkCandleProvider is implemented by providers that read the candles of
// many symbols in one request (Alpaca's multi-symbol bars), where asking
// one symbol at a time would not fit the request budget. It is optional:
// check with a type assertion.
type BulkCandleProvider interface {
	// BulkCandles returns candles of one timeframe for the symbols of
	// from, each from its own start (included) up to now, oldest first;
	// a zero start asks for the newest limit candles. A symbol whose
	// candles fail validation is in failed, not in got; err means the
	// read as a whole failed (got holds what was read before).
	BulkCandles(ctx context.Context, c domain.Combination, tf domain.Timeframe, from map[string]time.Time, limit int) (got map[string][]domain.Candle, failed map[string]error, err error)
	// BulkBatches splits symbols, in their order, into the batches one
	// request carries (of any timeframe, from any start): BulkCandles of
	// one batch from one start sends one request a page.
	BulkBatches(symbols []string) [][]string
}

// FundamentalsProvider is implemented by providers that also supply the raw
// inputs of the fundamental score. It is optional: check with a type
// assertion.
type FundamentalsProvider interface {
	// Fundamentals returns the inputs known for one symbol of a market;
	// a missing key means the input is unknown, not zero.
	Fundamentals(ctx context.Context, market domain.Market, symbol string) (FundamentalInputs, error)
}

// FundamentalInputs are raw fundamental inputs keyed by the Fundamental*
// constants. The analytics package maps them onto its own input struct.
type FundamentalInputs map[string]float64

// Keys of FundamentalInputs. Percentages are in percent (1.5 = 1.5 %).
const (
	// Crypto.
	FundamentalFundingRate     = "funding_rate_pct"         // perpetual funding rate per 8 h
	FundamentalOpenInterestChg = "open_interest_change_pct" // 24 h change of open interest
	FundamentalVolumeToMcap    = "volume_to_market_cap"     // 24 h volume / market cap (liquidity)
	FundamentalMarketCap       = "market_cap_usd"           // circulating market cap
	// Stocks.
	FundamentalPE            = "pe_ratio"           // price / trailing earnings
	FundamentalSectorPE      = "sector_pe_ratio"    // median P/E of the sector
	FundamentalRevenueGrowth = "revenue_growth_pct" // year-over-year revenue growth
	FundamentalNetMargin     = "net_margin_pct"     // net income / revenue
	FundamentalDebtToEquity  = "debt_to_equity"     // total debt / equity
	FundamentalEPSGrowth     = "eps_growth_pct"     // year-over-year EPS growth
	// Forex (base minus quote currency).
	FundamentalRateDiff      = "policy_rate_diff_pct" // policy-rate differential
	FundamentalInflationDiff = "inflation_diff_pct"   // CPI inflation differential
)

// ErrUnsupported is returned when a provider is asked for a combination it
// does not serve.
var ErrUnsupported = errors.New("feeds: combination not supported by provider")

// Config configures the providers. cmd/marketd fills it from the
// environment; tests fill it directly.
type Config struct {
	// Names are the feeds to enable, in priority order (MARKET_FEEDS), e.g.
	// ["synthetic"] or ["binance", "okx", "coinbase", "oanda", "alpaca"].
	Names []string
	// OandaToken is the OANDA v20 personal access token (required for "oanda").
	OandaToken string
	// OandaAccountID is the v20 account whose instruments and prices the
	// oanda feed serves ("101-004-1234567-001"; required for "oanda").
	OandaAccountID string
	// AlpacaKeyID and AlpacaSecret are the Alpaca market-data credentials
	// (required for "alpaca").
	AlpacaKeyID, AlpacaSecret string
	// AlpacaFeed is Alpaca's market-data feed: AlpacaIEX (the free plan's,
	// the default) or AlpacaSIP (every US exchange; a paid plan).
	AlpacaFeed string
	// OandaEnvironment is "live" (default) or "practice": which OANDA
	// host the oanda feed uses unless BaseURLs overrides it.
	OandaEnvironment string
	// BaseURLs overrides upstream hosts by host name (HostNames; the
	// operator's MARKET_FEED_URLS): a testnet, a practice account, a
	// mirror or a local replay. Read them with BaseURL.
	BaseURLs map[string]string
	// Budget shares each provider host's request budget with every caller
	// of the deployment, in every process (package hostbudget); nil means
	// a budget of this process alone.
	Budget *hostbudget.Budget
	// Limits replaces the documented budget of a host by name ("binance",
	// "binance-futures", "okx", ...): for a simulator or a testnet with
	// other limits, and for tests that shorten the window.
	Limits map[string]hostbudget.Limit
	// HTTPClient is shared by the real adapters; nil means a client with a
	// 20 s time-out that keeps up to 64 idle connections per host.
	HTTPClient *http.Client
	// Logger receives dropped rows, retries and rate-limit pauses; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Seed makes the synthetic feed reproducible.
	Seed int64
	// SyntheticCryptoAssets is the synthetic feed's count of crypto base
	// assets; 0 means SyntheticDefaultCryptoAssets.
	SyntheticCryptoAssets int
	// Sleep waits between retries; nil means a real timer that honours ctx.
	// Tests inject a recorder so back-off and Retry-After cost no time.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Feed names accepted in Config.Names.
const (
	NameSynthetic = "synthetic"
	NameBinance   = "binance"
	NameOKX       = "okx"
	NameCoinbase  = "coinbase"
	NameOanda     = "oanda"
	NameAlpaca    = "alpaca"
)

// KnownNames lists every feed name New accepts.
func KnownNames() []string {
	return []string{NameSynthetic, NameBinance, NameOKX, NameCoinbase, NameOanda, NameAlpaca}
}

// BudgetHosts names every provider host budget the real adapters book
// requests in (the host label of the marketd_upstream_* series).
func BudgetHosts() []string {
	return []string{NameBinance, binanceFuturesHost, binanceFuturesDataHost, NameOKX, NameCoinbase, NameOanda, oandaConnectionsHost, HostAlpaca, HostAlpacaData}
}

// Registry holds the configured providers in priority order.
type Registry struct {
	providers []Provider
}

// New builds the configured providers. It fails naming an unknown feed, a
// keyed feed without its key, or an empty list.
func New(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults()
	r := &Registry{}
	var seen []string
	for _, raw := range cfg.Names {
		name := strings.ToLower(strings.TrimSpace(raw))
		if name == "" || slices.Contains(seen, name) {
			continue
		}
		seen = append(seen, name)
		p, err := newProvider(name, cfg)
		if err != nil {
			return nil, err
		}
		r.providers = append(r.providers, p)
	}
	if len(r.providers) == 0 {
		return nil, fmt.Errorf("feeds: no feed configured (known: %s)", strings.Join(KnownNames(), ", "))
	}
	return r, nil
}

func newProvider(name string, cfg Config) (Provider, error) {
	switch name {
	case NameSynthetic:
		return NewSyntheticSized(cfg.Seed, cfg.Now, cfg.SyntheticCryptoAssets), nil
	case NameBinance:
		return newBinance(cfg), nil
	case NameOKX:
		return newOKX(cfg), nil
	case NameCoinbase:
		return newCoinbase(cfg), nil
	case NameOanda:
		if cfg.OandaToken == "" {
			return nil, fmt.Errorf("feeds: oanda: needs an API token (MARKET_OANDA_TOKEN)")
		}
		if cfg.OandaAccountID == "" {
			return nil, fmt.Errorf("feeds: oanda: needs an account id (MARKET_OANDA_ACCOUNT_ID)")
		}
		return newOanda(cfg), nil
	case NameAlpaca:
		if cfg.AlpacaKeyID == "" || cfg.AlpacaSecret == "" {
			return nil, fmt.Errorf("feeds: alpaca: needs a key id and secret (MARKET_ALPACA_KEY_ID, MARKET_ALPACA_SECRET)")
		}
		return newAlpaca(cfg), nil
	}
	return nil, fmt.Errorf("feeds: unknown feed %q (known: %s)", name, strings.Join(KnownNames(), ", "))
}

func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		// Many requests a second to one host reuse their connections
		// (net/http keeps only 2 idle per host by default).
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		cfg.HTTPClient = &http.Client{Timeout: 20 * time.Second, Transport: tr}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	if cfg.Budget == nil {
		cfg.Budget = hostbudget.New(hostbudget.Options{Logger: cfg.Logger})
	}
	return cfg
}

// limit is the budget of host: cfg.Limits' entry, else the documented one.
func (cfg Config) limit(host string, documented hostbudget.Limit) hostbudget.Limit {
	if l, ok := cfg.Limits[host]; ok {
		documented = l
	}
	documented.Name = host
	return documented
}

// For returns the provider serving a combination: the first configured
// provider that supports it.
func (r *Registry) For(c domain.Combination) (Provider, bool) {
	for _, p := range r.providers {
		if p.Supports(c) {
			return p, true
		}
	}
	return nil, false
}

// Providers returns the configured providers in priority order.
func (r *Registry) Providers() []Provider { return slices.Clone(r.providers) }

func unsupported(name string, c domain.Combination) error {
	return fmt.Errorf("feeds: %s: %s: %w", name, c, ErrUnsupported)
}

func unknownSymbol(name string, c domain.Combination, symbol string) error {
	return fmt.Errorf("feeds: %s: %w", name, domain.Errorf(domain.ENOTFOUND, "unknown symbol %q in %s", symbol, c))
}

func unknownTimeframe(name string, tf domain.Timeframe) error {
	return domain.Errorf(domain.EINVALID, "feeds: %s: unknown timeframe %q", name, tf)
}

// listedSymbol checks that symbol is one of the provider's symbols of c,
// for the Candles of providers with a fixed universe.
func listedSymbol(ctx context.Context, p Provider, c domain.Combination, symbol string) error {
	syms, err := p.Symbols(ctx, c)
	if err != nil {
		return err
	}
	if !slices.Contains(syms, symbol) {
		return unknownSymbol(p.Name(), c, symbol)
	}
	return nil
}

// rejectCandles logs a candle response that failed parsing or validation
// and returns the error of the Candles call; what names the endpoint
// ("klines", "candles", "bars") and tf the timeframe as the feed spells it.
func rejectCandles(log *slog.Logger, name, what, symbol, tf string, err error) error {
	log.Warn("feeds: rejecting bad klines response", "symbol", symbol, "timeframe", tf, "err", err)
	return fmt.Errorf("feeds: %s: %s %s %s: %w", name, what, symbol, tf, err)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
