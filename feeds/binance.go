package feeds

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

// Binance hosts and limits. Spot and USDT-M futures have separate request
// weight budgets, so each gets its own apiClient and host budget.
const (
	binanceSpotWeight   = 6000 // REQUEST_WEIGHT per minute
	binanceFutureWeight = 2400
	binanceSpotKlines   = 1000 // max klines per request
	binanceFutureKlines = 1500
	// binanceFuturesHost names the fapi host's budget (and its
	// MARKET_FEED_URLS entry).
	binanceFuturesHost = HostBinanceFutures
	// binanceFuturesDataHost names the budget of /futures/data/*, which
	// the docs give weight 0 but a limit of its own per IP: 1,000
	// requests per 5 minutes (openInterestHist).
	binanceFuturesDataHost = NameBinance + "-futures-data"
)

// The documented budgets, per IP, so per deployment. Spot: "REQUEST_WEIGHT
// 6000 / MINUTE" (exchangeInfo's rateLimits, rest-api.md "LIMITS",
// https://developers.binance.com/docs/binance-spot-api-docs/rest-api/limits);
// USDⓈ-M: 2,400 / minute (/fapi/v1/exchangeInfo's rateLimits,
// https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info);
// /futures/data/openInterestHist: "IP rate limit 1000 requests/5min".
var (
	binanceSpotLimit        = hostbudget.Limit{Window: time.Minute, Max: binanceSpotWeight}
	binanceFuturesLimit     = hostbudget.Limit{Window: time.Minute, Max: binanceFutureWeight}
	binanceFuturesDataLimit = hostbudget.Limit{Window: 5 * time.Minute, Max: 1000}
)

// binance serves crypto/binance/spot from the spot API, perpetual from the
// USDT-M PERPETUAL contracts and futures from the USDT-M CURRENT_QUARTER
// contracts (continuous klines, so BTC_USDT always means the front quarter).
type binance struct {
	log     *slog.Logger
	spot    *apiClient
	futures *apiClient
	info    *symbolCache // by instrument
	now     func() time.Time
	funding binanceFunding
}

func newBinance(cfg Config) *binance {
	log := cfg.Logger.With("feed", NameBinance)
	b := &binance{
		log:     log,
		spot:    newAPIClient(NameBinance, NameBinance, cfg.BaseURL(HostBinance), binanceSpotLimit, cfg),
		futures: newAPIClient(NameBinance, binanceFuturesHost, cfg.BaseURL(HostBinanceFutures), binanceFuturesLimit, cfg),
		info:    newSymbolCache(log, cfg.Now, NameBinance, "exchangeInfo"),
		now:     cfg.Now,
	}
	b.spot.weigh, b.futures.weigh = binanceSpotWeightOf, binanceFuturesWeightOf
	b.spot.usedWeight, b.futures.usedWeight = binanceUsedWeight, binanceUsedWeight
	dataLimit := cfg.limit(binanceFuturesDataHost, binanceFuturesDataLimit)
	b.futures.extraLimit = func(path string) (hostbudget.Limit, bool) {
		return dataLimit, strings.HasPrefix(path, "/futures/data/")
	}
	// Binance bans clients that ignore 429s, so a pause of up to a minute
	// (its window) is waited out rather than failed.
	b.spot.maxWait, b.futures.maxWait = 65*time.Second, 65*time.Second
	return b
}

// binanceUsedWeight reads X-MBX-USED-WEIGHT-1M, the IP's weight in the
// current minute as Binance counts it (-1 when absent).
func binanceUsedWeight(h http.Header) int {
	used, err := strconv.Atoi(h.Get("X-MBX-USED-WEIGHT-1M"))
	if err != nil || used < 0 {
		return -1
	}
	return used
}

// binanceSpotWeightOf is the documented REQUEST_WEIGHT of a spot request
// (binance-spot-api-docs rest-api.md, "General endpoints" and "Market Data
// endpoints"): exchangeInfo 20; klines 2; ticker/24hr 2 for one symbol
// (symbol=, or symbols= with 1–20), 40 for 21–100 symbols, 80 for more or
// for all (no symbol).
func binanceSpotWeightOf(path string, q url.Values) int {
	switch path {
	case "/api/v3/exchangeInfo":
		return 20
	case "/api/v3/klines", "/api/v3/uiKlines":
		return 2
	case "/api/v3/ticker/24hr":
		if q.Get("symbol") != "" {
			return 2
		}
		switch n := symbolsCount(q.Get("symbols")); {
		case n == 0 || n > 100:
			return 80
		case n > 20:
			return 40
		}
		return 2
	}
	return 2 // undocumented here: the heavier of the common weights
}

// binanceFuturesWeightOf is the documented request weight of a USDⓈ-M
// request (developers.binance.com/docs/derivatives/usds-margined-futures,
// market-data/rest-api): klines and continuousKlines by limit (default
// 500): [1,100) 1, [100,500) 2, [500,1000] 5, above 10; exchangeInfo 1;
// ticker/24hr 1 for a symbol, 40 for all; premiumIndex 1 with a symbol,
// 10 without ("Mark Price", developers.binance.com/docs/zh-CN/derivatives/
// usds-margined-futures/market-data/rest-api/Mark-Price: 请求权重 "带symbol
// 1, 不带symbol 10");
// /futures/data/* 0 (their own limit, binanceFuturesDataLimit);
// fundingInfo 0 (it shares 500 requests / 5 min with fundingRate, far
// above one call a minute; counted 1).
func binanceFuturesWeightOf(path string, q url.Values) int {
	switch path {
	case "/fapi/v1/klines", "/fapi/v1/continuousKlines", "/fapi/v1/markPriceKlines", "/fapi/v1/indexPriceKlines":
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			limit = 500
		}
		switch {
		case limit < 100:
			return 1
		case limit < 500:
			return 2
		case limit <= 1000:
			return 5
		}
		return 10
	case "/fapi/v1/ticker/24hr":
		if q.Get("symbol") != "" {
			return 1
		}
		return 40
	case "/fapi/v1/premiumIndex":
		if q.Get("symbol") != "" {
			return 1
		}
		return 10
	case "/fapi/v1/exchangeInfo", "/fapi/v1/fundingInfo":
		return 1
	}
	if strings.HasPrefix(path, "/futures/data/") {
		return 0
	}
	return 5 // undocumented here: the weight of a default klines page
}

// symbolsCount counts the symbols of a symbols= parameter
// (["BTCUSDT","BNBUSDT"]); 0 when absent.
func symbolsCount(v string) int {
	v = strings.Trim(strings.TrimSpace(v), "[]")
	if v == "" {
		return 0
	}
	return strings.Count(v, ",") + 1
}

// Name implements Provider.
func (b *binance) Name() string { return NameBinance }

// Supports implements Provider.
func (b *binance) Supports(c domain.Combination) bool { return binanceServes(c) }

func (b *binance) client(c domain.Combination) *apiClient {
	if c.Instrument == "spot" {
		return b.spot
	}
	return b.futures
}

// Symbols implements Provider.
func (b *binance) Symbols(ctx context.Context, c domain.Combination) ([]string, error) {
	return symbolList(b.symbols(ctx, c))
}

// symbols returns the cached symbol map of the instrument, fetching
// exchangeInfo when it is missing or older than exchangeInfoTTL.
func (b *binance) symbols(ctx context.Context, c domain.Combination) (*symbolMap, error) {
	if !b.Supports(c) {
		return nil, unsupported(NameBinance, c)
	}
	path := "/api/v3/exchangeInfo"
	if c.Instrument != "spot" {
		path = "/fapi/v1/exchangeInfo"
	}
	return b.info.get(c.Instrument,
		func() ([]byte, error) { return b.client(c).get(ctx, path, nil) },
		func(body []byte, now time.Time) (*symbolMap, error) {
			m, err := parseBinanceExchangeInfo(body, c.Instrument, now)
			if err != nil {
				return nil, fmt.Errorf("feeds: binance: %s: %w", path, err)
			}
			return m, nil
		})
}

// binanceExchangeInfo is the part of /api/v3/exchangeInfo and
// /fapi/v1/exchangeInfo the feed reads.
type binanceExchangeInfo struct {
	Symbols []struct {
		Symbol       string `json:"symbol"`
		Pair         string `json:"pair"`         // futures only
		ContractType string `json:"contractType"` // futures only: PERPETUAL, CURRENT_QUARTER, NEXT_QUARTER
		Status       string `json:"status"`
		BaseAsset    string `json:"baseAsset"`
		QuoteAsset   string `json:"quoteAsset"`
	} `json:"symbols"`
}

// parseBinanceExchangeInfo keeps the TRADING symbols of the instrument.
func parseBinanceExchangeInfo(body []byte, instrument string, now time.Time) (*symbolMap, error) {
	var info binanceExchangeInfo
	if err := decodeJSON(body, &info); err != nil {
		return nil, err
	}
	wantContract := map[string]string{"spot": "", "perpetual": "PERPETUAL", "futures": "CURRENT_QUARTER"}[instrument]
	m := newSymbolMap(now)
	for _, s := range info.Symbols {
		if s.Status != "TRADING" || s.ContractType != wantContract {
			continue
		}
		canonical, ok := canonicalPair(domain.Crypto, s.BaseAsset, s.QuoteAsset)
		if !ok {
			if canonical, ok = splitConcatSymbol(s.Symbol); !ok {
				continue
			}
		}
		request := s.Symbol
		if instrument == "futures" {
			request = s.Pair // continuous klines take the pair, not the dated contract
		}
		m.add(s.Symbol, canonical, request)
	}
	if len(m.symbols) == 0 {
		return nil, fmt.Errorf("no trading %s symbols in exchangeInfo", instrument)
	}
	slices.Sort(m.symbols)
	return m, nil
}

// Tickers implements Provider from the 24 h rolling ticker of every symbol.
func (b *binance) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	m, err := b.symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	path := "/api/v3/ticker/24hr"
	if c.Instrument != "spot" {
		path = "/fapi/v1/ticker/24hr"
	}
	body, err := b.client(c).get(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	out, err := parseBinanceTickers(body, m, b.log)
	if err != nil {
		return nil, fmt.Errorf("feeds: binance: %s: %w", path, err)
	}
	return out, nil
}

// binanceTicker is one row of /api/v3/ticker/24hr (and the fapi twin).
// Pointers tell a missing field from a zero one.
type binanceTicker struct {
	Symbol             string  `json:"symbol"`
	PriceChangePercent *string `json:"priceChangePercent"`
	LastPrice          *string `json:"lastPrice"`
	QuoteVolume        *string `json:"quoteVolume"`
	CloseTime          int64   `json:"closeTime"`
}

// parseBinanceTickers keeps rows of symbols in m; a row with a missing or
// bad field is logged and dropped.
func parseBinanceTickers(body []byte, m *symbolMap, log *slog.Logger) ([]domain.Ticker, error) {
	var rows []binanceTicker
	if err := decodeJSON(body, &rows); err != nil {
		return nil, err
	}
	out := make([]domain.Ticker, 0, len(m.symbols))
	for _, r := range rows {
		canonical, ok := m.toCanon[r.Symbol]
		if !ok {
			continue // not trading, or another contract type
		}
		t, err := binanceTickerRow(canonical, r)
		if err != nil {
			log.Warn("feeds: dropping bad ticker row", "symbol", r.Symbol, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

func binanceTickerRow(canonical string, r binanceTicker) (domain.Ticker, error) {
	t := domain.Ticker{Symbol: canonical}
	if err := parseDecimalFields(
		decimalField{"lastPrice", r.LastPrice, &t.Price},
		decimalField{"priceChangePercent", r.PriceChangePercent, &t.ChangePct},
		decimalField{"quoteVolume", r.QuoteVolume, &t.Volume},
	); err != nil {
		return t, err
	}
	if r.CloseTime <= 0 {
		return t, fmt.Errorf("closeTime: missing: %w", errBadField)
	}
	t.UpdatedAt = time.UnixMilli(r.CloseTime).UTC()
	return t, t.Validate()
}

// Candles implements Provider. Binance's intervals match the domain's,
// weeks open on Monday 00:00 UTC as domain.TF1w.Truncate expects.
func (b *binance) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	m, err := b.symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	exSymbol, ok := m.fromCanon[symbol]
	if !ok {
		return nil, unknownSymbol(NameBinance, c, symbol)
	}
	if tf.Duration() <= 0 {
		return nil, unknownTimeframe(NameBinance, tf)
	}
	path, pageMax := "/api/v3/klines", binanceSpotKlines
	q := url.Values{"symbol": {exSymbol}, "interval": {string(tf)}}
	switch c.Instrument {
	case "perpetual":
		path, pageMax = "/fapi/v1/klines", binanceFutureKlines
	case "futures":
		path, pageMax = "/fapi/v1/continuousKlines", binanceFutureKlines
		q = url.Values{"pair": {exSymbol}, "contractType": {"CURRENT_QUARTER"}, "interval": {string(tf)}}
	}
	if limit <= 0 {
		limit = pageMax
	}
	page := func(start time.Time, n int) ([]domain.Candle, error) {
		pq := url.Values{}
		for k, v := range q {
			pq[k] = v
		}
		pq.Set("limit", strconv.Itoa(n))
		if !start.IsZero() {
			pq.Set("startTime", strconv.FormatInt(start.UnixMilli(), 10))
		}
		body, err := b.client(c).get(ctx, path, pq)
		if err != nil {
			return nil, err
		}
		cs, err := parseBinanceKlines(body)
		if err != nil {
			return nil, rejectCandles(b.log, NameBinance, "klines", symbol, string(tf), err)
		}
		return cs, nil
	}
	return pageForward(since, limit, pageMax, tf, page)
}

// pageForward collects up to limit candles from since, one page at a time,
// for APIs that take a start time and return oldest first. A zero since
// asks once for the newest candles.
func pageForward(since time.Time, limit, pageMax int, tf domain.Timeframe, page func(start time.Time, n int) ([]domain.Candle, error)) ([]domain.Candle, error) {
	if since.IsZero() {
		cs, err := page(time.Time{}, min(limit, pageMax))
		if err != nil {
			return nil, err
		}
		if len(cs) > limit {
			cs = cs[len(cs)-limit:]
		}
		return cs, nil
	}
	var out []domain.Candle
	start := since
	for len(out) < limit {
		n := min(limit-len(out), pageMax)
		cs, err := page(start, n)
		if err != nil {
			return nil, err
		}
		cs = clipCandles(cs, start, n)
		if len(out) > 0 && len(cs) > 0 && !cs[0].Time.After(out[len(out)-1].Time) {
			return nil, domain.Errorf(domain.EINVALID, "candles out of order across pages at %s", cs[0].Time.Format(time.RFC3339))
		}
		out = append(out, cs...)
		if len(cs) < n {
			break
		}
		start = cs[len(cs)-1].Time.Add(tf.Duration())
	}
	if out == nil {
		out = []domain.Candle{}
	}
	return out, nil
}

// parseBinanceKlines parses a klines response: rows of [open time ms,
// "open", "high", "low", "close", "volume", close time, ...], oldest
// first. Any bad row fails the whole response.
func parseBinanceKlines(body []byte) ([]domain.Candle, error) {
	return parseCandleRows(body, false, func(i int, r []json.RawMessage) (domain.Candle, error) {
		if len(r) < 6 {
			return domain.Candle{}, fmt.Errorf("kline %d: %d fields, want at least 6: %w", i, len(r), errBadField)
		}
		c, err := klineRow(r[0], r[1], r[2], r[3], r[4], r[5])
		if err != nil {
			return c, fmt.Errorf("kline %d: %w", i, err)
		}
		return c, nil
	})
}

// klineRow parses the six OHLCV fields shared by Binance and OKX rows.
func klineRow(ts, o, h, l, c, v json.RawMessage) (domain.Candle, error) {
	var k domain.Candle
	var err error
	if k.Time, err = parseRawMillis("time", ts); err != nil {
		return k, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *float64
	}{{"open", o, &k.Open}, {"high", h, &k.High}, {"low", l, &k.Low}, {"close", c, &k.Close}, {"volume", v, &k.Volume}} {
		if *f.dst, err = parseRawNumber(f.name, f.raw); err != nil {
			return k, err
		}
	}
	return k, nil
}
