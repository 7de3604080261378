package feeds

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

const (
	coinbaseURL = "https://api.exchange.coinbase.com"
	// coinbasePage is the most candles one request returns.
	coinbasePage = 300
	// coinbaseConcurrency bounds parallel /stats requests; with the 100 ms
	// pacing it stays under the public limit of 10 requests per second.
	coinbaseConcurrency = 4
)

// coinbaseLimit is the Exchange API's public budget per IP: 10 requests
// a second.
var coinbaseLimit = hostbudget.Limit{Window: time.Second, Max: 10}

// coinbaseListed reports whether the screener lists products of a quote
// currency: the US region's liquid books. Each listed product costs one
// /stats request per ticker refresh, so the list is deliberately short.
func coinbaseListed(quote string) bool {
	return quote == "USD" || quote == "USDT" || quote == "BTC"
}

// coinbase serves crypto/coinbase/spot from the Coinbase Exchange public
// REST API.
type coinbase struct {
	log *slog.Logger
	now func() time.Time
	api *apiClient

	products *symbolCache // one entry: spot
}

func newCoinbase(cfg Config) *coinbase {
	log := cfg.Logger.With("feed", NameCoinbase)
	c := &coinbase{
		log:      log,
		now:      cfg.Now,
		api:      newAPIClient(NameCoinbase, NameCoinbase, cfg.baseURL(NameCoinbase, coinbaseURL), coinbaseLimit, cfg),
		products: newSymbolCache(log, cfg.Now, NameCoinbase, "products"),
	}
	c.api.minInterval = 100 * time.Millisecond
	return c
}

// Name implements Provider.
func (c *coinbase) Name() string { return NameCoinbase }

// Supports implements Provider.
func (c *coinbase) Supports(comb domain.Combination) bool {
	return comb == domain.Combination{Market: domain.Crypto, Exchange: NameCoinbase, Instrument: "spot"}
}

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

// Tickers implements Provider from each product's 24 h /stats.
func (c *coinbase) Tickers(ctx context.Context, comb domain.Combination) ([]domain.Ticker, error) {
	m, err := c.symbols(ctx, comb)
	if err != nil {
		return nil, err
	}
	now := c.now().UTC()
	return tickersEach(m.symbols, coinbaseConcurrency, func(sym string) (*domain.Ticker, error) {
		id := m.fromCanon[sym]
		body, err := c.api.get(ctx, "/products/"+url.PathEscape(id)+"/stats", nil)
		if err != nil {
			return nil, err
		}
		t, err := parseCoinbaseStats(body, sym, now)
		if err != nil {
			c.log.Warn("feeds: dropping bad ticker row", "symbol", id, "err", err)
			return nil, nil
		}
		return &t, nil
	})
}

// parseCoinbaseStats turns /products/{id}/stats into a ticker: change is
// against the 24 h open, volume (base) is converted to quote at the last price.
func parseCoinbaseStats(body []byte, symbol string, now time.Time) (domain.Ticker, error) {
	var s struct {
		Open   *string `json:"open"`
		Last   *string `json:"last"`
		Volume *string `json:"volume"`
	}
	t := domain.Ticker{Symbol: symbol, UpdatedAt: now}
	if err := decodeJSON(body, &s); err != nil {
		return t, err
	}
	var open, last, volume float64
	if err := parseDecimalFields(decimalField{"open", s.Open, &open}, decimalField{"last", s.Last, &last}, decimalField{"volume", s.Volume, &volume}); err != nil {
		return t, err
	}
	if open <= 0 {
		return t, fmt.Errorf("open: %v is not positive: %w", open, errBadField)
	}
	t.Price = last
	t.ChangePct = (last/open - 1) * 100
	t.Volume = volume * last
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
		if len(raw) > 0 && len(page) > 0 && !page[0].Time.After(raw[len(raw)-1].Time) {
			return nil, fmt.Errorf("feeds: coinbase: candles %s %s: %w", symbol, tf,
				domain.Errorf(domain.EINVALID, "candles out of order across pages"))
		}
		raw = append(raw, page...)
		start = end.Add(time.Second)
	}
	out := aggregateCandles(raw, tf)
	return clipCandles(out, from, limit), nil
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
