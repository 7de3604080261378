package feeds

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

const (
	// coinbasePage is the most candles one request returns.
	coinbasePage = 300
	// coinbaseProductsPage is the page size asked of Advanced Trade's
	// public product list (every product's price and 24 h change). The
	// documentation (List Public Products, docs.cdp.coinbase.com/api-reference/
	// advanced-trade-api/rest-api/public/list-public-products; the official
	// coinbase-advanced-py get_public_products) gives limit and offset but no
	// maximum page size, so a page shorter than asked does not end the list:
	// num_products does.
	coinbaseProductsPage = 250
	// coinbasePublicInterval paces requests to the documented public limit
	// of 10 requests per second per IP.
	coinbasePublicInterval = 100 * time.Millisecond
)

// coinbaseLimit is the Exchange API's public budget per IP: 10 requests
// a second.
var coinbaseLimit = hostbudget.Limit{Window: time.Second, Max: 10}

// coinbaseListed reports whether the screener lists products of a quote
// currency: the US region's liquid books.
func coinbaseListed(quote string) bool {
	return quote == "USD" || quote == "USDT" || quote == "BTC"
}

// coinbase serves crypto/coinbase/spot from the Coinbase Exchange public
// REST API.
type coinbase struct {
	log      *slog.Logger
	now      func() time.Time
	api      *apiClient // Exchange: products and candles
	advanced *apiClient // Advanced Trade: every ticker in one request

	products *symbolCache // one entry: spot
}

func newCoinbase(cfg Config) *coinbase {
	log := cfg.Logger.With("feed", NameCoinbase)
	c := &coinbase{
		log:      log,
		now:      cfg.Now,
		api:      newAPIClient(NameCoinbase, NameCoinbase, cfg.BaseURL(HostCoinbase), coinbaseLimit, cfg),
		advanced: newAPIClient(NameCoinbase, HostCoinbaseAdvanced, cfg.BaseURL(HostCoinbaseAdvanced), coinbaseLimit, cfg),
		products: newSymbolCache(log, cfg.Now, NameCoinbase, "products"),
	}
	c.api.minInterval, c.advanced.minInterval = coinbasePublicInterval, coinbasePublicInterval
	return c
}

// Name implements Provider.
func (c *coinbase) Name() string { return NameCoinbase }

// Supports implements Provider.
func (c *coinbase) Supports(comb domain.Combination) bool { return coinbaseServes(comb) }

// Symbols implements Provider.
func (c *coinbase) Symbols(ctx context.Context, comb domain.Combination) ([]string, error) {
	return symbolList(c.symbols(ctx, comb))
}

func (c *coinbase) symbols(ctx context.Context, comb domain.Combination) (*symbolMap, error) {
	if !c.Supports(comb) {
		return nil, unsupported(NameCoinbase, comb)
	}
	return c.products.get(comb.Instrument,
		func() ([]byte, error) { return c.api.get(ctx, "/products", nil) },
		func(body []byte, now time.Time) (*symbolMap, error) {
			m, err := parseCoinbaseProducts(body, now)
			if err != nil {
				return nil, fmt.Errorf("feeds: coinbase: /products: %w", err)
			}
			return m, nil
		})
}

type coinbaseProduct struct {
	ID              string `json:"id"`
	BaseCurrency    string `json:"base_currency"`
	QuoteCurrency   string `json:"quote_currency"`
	Status          string `json:"status"`
	TradingDisabled bool   `json:"trading_disabled"`
	CancelOnly      bool   `json:"cancel_only"`
	AuctionMode     bool   `json:"auction_mode"`
}

// parseCoinbaseProducts keeps online, tradable products of listed quotes.
func parseCoinbaseProducts(body []byte, now time.Time) (*symbolMap, error) {
	var products []coinbaseProduct
	if err := decodeJSON(body, &products); err != nil {
		return nil, err
	}
	m := newSymbolMap(now)
	for _, p := range products {
		if p.Status != "online" || p.TradingDisabled || p.CancelOnly || !coinbaseListed(p.QuoteCurrency) {
			continue
		}
		if canonical, ok := canonicalPair(domain.Crypto, p.BaseCurrency, p.QuoteCurrency); ok {
			m.add(p.ID, canonical, p.ID)
		}
	}
	if len(m.symbols) == 0 {
		return nil, fmt.Errorf("no online products")
	}
	slices.Sort(m.symbols)
	return m, nil
}

// Tickers implements Provider from Advanced Trade's public product list,
// which carries every product's price, 24 h change and volume: one request
// a page instead of one /stats request per product.
func (c *coinbase) Tickers(ctx context.Context, comb domain.Combination) ([]domain.Ticker, error) {
	m, err := c.symbols(ctx, comb)
	if err != nil {
		return nil, err
	}
	now := c.now().UTC()
	out := make([]domain.Ticker, 0, len(m.symbols))
	for offset := 0; ; {
		q := url.Values{"product_type": {"SPOT"}, "limit": {strconv.Itoa(coinbaseProductsPage)}, "offset": {strconv.Itoa(offset)}}
		var page coinbasePublicProducts
		if err := c.advanced.getJSON(ctx, "/api/v3/brokerage/market/products", q, &page); err != nil {
			return nil, err
		}
		for _, p := range page.Products {
			canonical, ok := m.toCanon[p.ProductID]
			if !ok {
				continue // not listed, or not a spot book of ours
			}
			t, err := p.ticker(canonical, now)
			if err != nil {
				c.log.Warn("feeds: dropping bad ticker row", "symbol", p.ProductID, "err", err)
				continue
			}
			out = append(out, t)
		}
		offset += len(page.Products)
		if len(page.Products) == 0 || offset >= page.NumProducts && (page.NumProducts > 0 || len(page.Products) < coinbaseProductsPage) {
			return out, nil
		}
	}
}

// coinbasePublicProducts is a page of /api/v3/brokerage/market/products.
type coinbasePublicProducts struct {
	Products    []coinbasePublicProduct `json:"products"`
	NumProducts int                     `json:"num_products"`
}

type coinbasePublicProduct struct {
	ProductID   string  `json:"product_id"`
	Price       *string `json:"price"`
	Change24h   *string `json:"price_percentage_change_24h"`
	Volume24h   *string `json:"volume_24h"`                   // base currency
	QuoteVolume *string `json:"approximate_quote_24h_volume"` // quote currency
}

// ticker turns a product into a screener row. The 24 h change is in
// percent (the docs' example writes "9.43%", the API "9.43"); volume is
// the quote volume, or the base volume at the last price when absent.
func (p coinbasePublicProduct) ticker(symbol string, now time.Time) (domain.Ticker, error) {
	t := domain.Ticker{Symbol: symbol, UpdatedAt: now}
	var change string
	if p.Change24h != nil {
		change = strings.TrimSuffix(strings.TrimSpace(*p.Change24h), "%")
	}
	if err := parseDecimalFields(decimalField{"price", p.Price, &t.Price},
		decimalField{"price_percentage_change_24h", &change, &t.ChangePct}); err != nil {
		return t, err
	}
	if parseDecimalFields(decimalField{"approximate_quote_24h_volume", p.QuoteVolume, &t.Volume}) != nil {
		var base float64
		if err := parseDecimalFields(decimalField{"volume_24h", p.Volume24h, &base}); err != nil {
			return t, err
		}
		t.Volume = base * t.Price
	}
	return t, t.Validate()
}

// coinbaseGranularity is the native candle a timeframe is built from:
// Coinbase serves 1m, 5m, 15m, 1h, 6h and 1d, so 30m, 4h and 1w are
// aggregated from 15m, 1h and 1d.
func coinbaseGranularity(tf domain.Timeframe) domain.Timeframe {
	switch tf {
	case domain.TF30m:
		return domain.TF15m
	case domain.TF4h:
		return domain.TF1h
	case domain.TF1w:
		return domain.TF1d
	}
	return tf
}

// Candles implements Provider.
func (c *coinbase) Candles(ctx context.Context, comb domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	m, err := c.symbols(ctx, comb)
	if err != nil {
		return nil, err
	}
	id, ok := m.fromCanon[symbol]
	if !ok {
		return nil, unknownSymbol(NameCoinbase, comb, symbol)
	}
	if tf.Duration() <= 0 {
		return nil, unknownTimeframe(NameCoinbase, tf)
	}
	if limit <= 0 {
		limit = coinbasePage
	}
	now := c.now().UTC()
	last := tf.Truncate(now)
	from := tf.Truncate(since)
	if since.IsZero() {
		from = last.Add(-time.Duration(limit-1) * tf.Duration())
	} else if from.Before(since) {
		from = from.Add(tf.Duration())
	}
	native := coinbaseGranularity(tf)
	step := native.Duration()
	var raw []domain.Candle
	for start := from; !start.After(now) && len(raw) < limit*int(tf.Duration()/step); {
		end := start.Add(coinbasePage*step - time.Second)
		q := url.Values{
			"granularity": {strconv.Itoa(int(step / time.Second))},
			"start":       {start.Format(time.RFC3339)},
			"end":         {end.Format(time.RFC3339)},
		}
		body, err := c.api.get(ctx, "/products/"+url.PathEscape(id)+"/candles", q)
		if err != nil {
			return nil, err
		}
		page, err := parseCoinbaseCandles(body)
		if err != nil {
			return nil, rejectCandles(c.log, NameCoinbase, "candles", symbol, string(tf), err)
		}
		raw = append(raw, pageFrom(page, start, raw)...)
		start = end.Add(time.Second)
	}
	out := aggregateCandles(raw, tf)
	return clipCandles(out, from, limit), nil
}

// pageFrom keeps the candles of a page from its start on and after the
// last one already collected: Coinbase documents that a page "may
// contain candles preceding your declared start", which the previous
// page already holds.
func pageFrom(page []domain.Candle, start time.Time, collected []domain.Candle) []domain.Candle {
	page = clipCandles(page, start, 0)
	if n := len(collected); n > 0 {
		last := collected[n-1].Time
		i := 0
		for i < len(page) && !page[i].Time.After(last) {
			i++
		}
		page = page[i:]
	}
	return page
}

// parseCoinbaseCandles parses rows of [time s, low, high, open, close,
// volume], newest first, into oldest-first candles.
func parseCoinbaseCandles(body []byte) ([]domain.Candle, error) {
	return parseCandleRows(body, true, func(i int, r []json.RawMessage) (domain.Candle, error) {
		if len(r) != 6 {
			return domain.Candle{}, fmt.Errorf("candle %d: %d fields, want 6: %w", i, len(r), errBadField)
		}
		secs, err := parseRawNumber("time", r[0])
		if err != nil || secs <= 0 || secs > 1e11 || secs != float64(int64(secs)) {
			return domain.Candle{}, fmt.Errorf("candle %d: time: %w", i, errBadField)
		}
		k := domain.Candle{Time: time.Unix(int64(secs), 0).UTC()}
		for _, f := range []struct {
			name string
			raw  json.RawMessage
			dst  *float64
		}{{"low", r[1], &k.Low}, {"high", r[2], &k.High}, {"open", r[3], &k.Open}, {"close", r[4], &k.Close}, {"volume", r[5], &k.Volume}} {
			if *f.dst, err = parseRawNumber(f.name, f.raw); err != nil {
				return k, fmt.Errorf("candle %d: %w", i, err)
			}
		}
		return k, nil
	})
}

// aggregateCandles merges consecutive candles into tf buckets (open times
// by tf.Truncate); input already in tf passes through.
func aggregateCandles(cs []domain.Candle, tf domain.Timeframe) []domain.Candle {
	var out []domain.Candle
	for _, c := range cs {
		open := tf.Truncate(c.Time)
		if n := len(out); n > 0 && out[n-1].Time.Equal(open) {
			b := &out[n-1]
			b.High, b.Low = max(b.High, c.High), min(b.Low, c.Low)
			b.Close = c.Close
			b.Volume += c.Volume
			continue
		}
		c.Time = open
		out = append(out, c)
	}
	return out
}
