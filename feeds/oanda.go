package feeds

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

// OANDA v20's documented limits and the adapter's refresh periods.
//
// Rate limiting (development guide, "Rate Limiting" and "Connection
// Limiting", https://developer.oanda.com/rest-live-v20/development-guide/):
// 120 REST requests per second per IP, excess answered 429; 20 active
// streams per IP; no more than 2 new connections per second, excess
// rejected. The best-practices page
// (https://developer.oanda.com/rest-live-v20/best-practices/) recommends
// at most 100 requests a second on one persistent connection: the
// budget's headroom (80 % of 120) keeps under that too.
const (
	oandaMaxCount    = 5000 // candles per request (instrument-ep: count maximum=5000)
	oandaConcurrency = 4
	oandaMaxStreams  = 20
	// oandaConnectionsHost names the budget of new connections (REST and
	// stream alike): the limit is the client's, whatever the host.
	oandaConnectionsHost = "oanda-connections"

	// The account's instruments change when OANDA lists or delists a
	// pair: daily is enough. A failed refresh keeps the last list and is
	// tried again after oandaInstrumentsRetry.
	oandaInstrumentsEvery = 24 * time.Hour
	oandaInstrumentsRetry = 5 * time.Minute
	// oandaPricesFresh is how long one pricing response of every pair
	// serves Tickers: the major and the minor task of one tick share it.
	oandaPricesFresh = 2 * time.Second
)

var (
	oandaLimit            = hostbudget.Limit{Window: time.Second, Max: 120}
	oandaConnectionsLimit = hostbudget.Limit{Window: time.Second, Max: 2}
)

// oandaMajors are the seven pairs of the US dollar against the euro, the
// pound, the yen, the Swiss franc and the Australian, Canadian and New
// Zealand dollars: forex/oanda/major. Every other CURRENCY pair of the
// account, crosses and exotics alike, is forex/oanda/minor.
var oandaMajors = []string{"AUD_USD", "EUR_USD", "GBP_USD", "NZD_USD", "USD_CAD", "USD_CHF", "USD_JPY"}

// oanda serves forex/oanda/major and minor from the OANDA v20 REST API:
// the CURRENCY instruments of the account (CFDs and metals are left out),
// screener rows from the account's current prices completed by each
// pair's daily reference (oandaReferences), and mid candles. Forex has no
// central traded volume: volumes are OANDA's tick volume, the number of
// prices it made.
type oanda struct {
	log     *slog.Logger
	now     func() time.Time
	api     *apiClient
	account string
	token   string

	// stream reaches the pricing stream (OpenPriceStream): its base URL
	// and a client without a time-out, on the REST client's transport (one
	// dial pacer for both); open counts the streams in flight.
	streamURL  string
	streamHTTP *http.Client
	open       atomic.Int32

	refs *oandaReferences

	listMu sync.Mutex // held while the list is fetched: one download at a time
	mu     sync.Mutex
	list   oandaList

	pricesMu sync.Mutex // held while prices are fetched
	prices   oandaPrices
}

// oandaList is the account's currency pairs, split into majors and minors.
type oandaList struct {
	majors, minors, all []string
	fetched             time.Time
	retryAt             time.Time // after a failed refresh
}

// oandaPrices is one pricing response of every pair, by symbol, with the
// bad rows it dropped (logged when parsed).
type oandaPrices struct {
	bySymbol map[string]oandaQuote
	bad      map[string]bool
	fetched  time.Time
}

// oandaQuote is one pair's current price: the mid of the best bid and ask.
type oandaQuote struct {
	price     float64
	time      time.Time
	tradeable bool
}

func newOanda(cfg Config) *oanda {
	pacer := &dialPacer{budget: cfg.Budget, limit: cfg.limit(oandaConnectionsHost, oandaConnectionsLimit), now: cfg.Now, sleep: cfg.Sleep}
	if pacer.budget == nil {
		pacer.budget = hostbudget.New(hostbudget.Options{Logger: cfg.Logger})
	}
	restHTTP, streamHTTP := pacer.clients(cfg.HTTPClient)
	cfg.HTTPClient = restHTTP
	o := &oanda{
		log:        cfg.Logger.With("feed", NameOanda),
		now:        cfg.Now,
		api:        newAPIClient(NameOanda, NameOanda, cfg.BaseURL(HostOanda), oandaLimit, cfg),
		account:    cfg.OandaAccountID,
		token:      cfg.OandaToken,
		streamURL:  cfg.BaseURL(HostOandaStream),
		streamHTTP: streamHTTP,
	}
	o.api.authorize = o.authorize
	o.refs = newOandaReferences(o)
	return o
}

// authorize adds the bearer token and asks for RFC 3339 times (the v20
// default, said explicitly: the UNIX format would break every parser).
func (o *oanda) authorize(h http.Header) {
	h.Set("Authorization", "Bearer "+o.token)
	h.Set("Accept-Datetime-Format", "RFC3339")
}

// Name implements Provider.
func (o *oanda) Name() string { return NameOanda }

// Supports implements Provider.
func (o *oanda) Supports(c domain.Combination) bool { return oandaServes(c) }

// Symbols implements Provider: the account's currency pairs of the
// combination, sorted.
func (o *oanda) Symbols(ctx context.Context, c domain.Combination) ([]string, error) {
	if !o.Supports(c) {
		return nil, unsupported(NameOanda, c)
	}
	l, err := o.instruments(ctx)
	if err != nil {
		return nil, err
	}
	if c.Instrument == "major" {
		return slices.Clone(l.majors), nil
	}
	return slices.Clone(l.minors), nil
}

// instruments returns the account's currency pairs, listed again once a
// day. A failed refresh keeps the last list (logged, tried again after
// oandaInstrumentsRetry); with no list yet, the failure is the caller's.
func (o *oanda) instruments(ctx context.Context) (oandaList, error) {
	if l, ok := o.cachedList(); ok {
		return l, nil
	}
	o.listMu.Lock()
	defer o.listMu.Unlock()
	if l, ok := o.cachedList(); ok { // another caller fetched it meanwhile
		return l, nil
	}
	now := o.now()
	body, err := o.api.get(ctx, "/v3/accounts/"+url.PathEscape(o.account)+"/instruments", nil)
	var all []string
	if err == nil {
		all, err = parseOandaInstruments(body)
		if err != nil {
			err = fmt.Errorf("feeds: oanda: account instruments: %w", err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		if o.list.all == nil {
			return oandaList{}, err
		}
		o.list.retryAt = now.Add(oandaInstrumentsRetry)
		o.log.Warn("feeds: oanda: refreshing the account's instruments failed, keeping the last list",
			"pairs", len(o.list.all), "listed_at", o.list.fetched.UTC().Format(time.RFC3339), "retry_in", oandaInstrumentsRetry.String(), "err", err)
		return o.list, nil
	}
	o.list = splitOandaPairs(all, now)
	return o.list, nil
}

// cachedList is the list while it is fresh, or while a failed refresh
// waits for its retry.
func (o *oanda) cachedList() (oandaList, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	l := o.list
	return l, l.all != nil && (now.Sub(l.fetched) < oandaInstrumentsEvery || now.Before(l.retryAt))
}

// splitOandaPairs splits sorted pairs into majors (oandaMajors) and minors.
func splitOandaPairs(all []string, now time.Time) oandaList {
	l := oandaList{all: all, fetched: now}
	for _, s := range all {
		if slices.Contains(oandaMajors, s) {
			l.majors = append(l.majors, s)
		} else {
			l.minors = append(l.minors, s)
		}
	}
	return l
}

// oandaInstrument is the part of a v20 Instrument read here
// (developer.oanda.com/rest-live-v20/primitives-df/, "Instrument"; type
// is one of CURRENCY, CFD and METAL).
type oandaInstrument struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// parseOandaInstruments reads GET /v3/accounts/{accountID}/instruments and
// returns the CURRENCY pairs, sorted. A name that is not a BASE_QUOTE pair
// is skipped; a response without any pair is an error (an account always
// has some: it would mean a changed or broken response).
func parseOandaInstruments(body []byte) ([]string, error) {
	var r struct {
		Instruments []oandaInstrument `json:"instruments"`
	}
	if err := decodeJSON(body, &r); err != nil {
		return nil, err
	}
	var out []string
	for _, in := range r.Instruments {
		if in.Type != "CURRENCY" {
			continue
		}
		base, quote, ok := strings.Cut(in.Name, "_")
		if !ok || !isCurrencyCode(base) || !isCurrencyCode(quote) {
			continue
		}
		if !slices.Contains(out, in.Name) {
			out = append(out, in.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CURRENCY instrument among %d: %w", len(r.Instruments), errBadField)
	}
	slices.Sort(out)
	return out, nil
}

// isCurrencyCode: three upper-case letters (ISO 4217, as OANDA names them).
func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// oandaGranularity maps a timeframe to OANDA's granularity.
func oandaGranularity(tf domain.Timeframe) (string, bool) {
	g, ok := map[domain.Timeframe]string{
		domain.TF1m: "M1", domain.TF5m: "M5", domain.TF15m: "M15", domain.TF30m: "M30",
		domain.TF1h: "H1", domain.TF4h: "H4", domain.TF1d: "D", domain.TF1w: "W",
	}[tf]
	return g, ok
}

// Tickers implements Provider: the account's current prices of every pair
// in one request (shared for oandaPricesFresh by the major and the minor
// combination), each completed by its daily reference. On a weekend (the
// market closes from Friday to Sunday 17:00 New York: OANDA's hours of
// operation, oanda.com/us-en/trading/hours-of-operation/) the prices are
// Friday's last, not tradeable, and still served: the screener keeps the
// last price, and nothing fails.
func (o *oanda) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	syms, err := o.Symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	prices, err := o.currentPrices(ctx)
	if err != nil {
		return nil, err
	}
	quotes := make([]Quote, 0, len(syms))
	for _, s := range syms {
		q, ok := prices.bySymbol[s]
		if !ok && !prices.bad[s] {
			o.log.Warn("feeds: dropping bad ticker row", "symbol", s, "err", "no price in the pricing response")
		}
		if !ok {
			continue
		}
		quotes = append(quotes, Quote{Symbol: s, Price: q.price, Time: q.time})
	}
	return o.QuoteTickers(ctx, c, quotes)
}

// currentPrices returns the pricing response of every pair of the account
// (GET /v3/accounts/{accountID}/pricing), fetched at most once per
// oandaPricesFresh.
func (o *oanda) currentPrices(ctx context.Context) (oandaPrices, error) {
	o.pricesMu.Lock()
	defer o.pricesMu.Unlock()
	if o.prices.bySymbol != nil && o.now().Sub(o.prices.fetched) < oandaPricesFresh {
		return o.prices, nil
	}
	l, err := o.instruments(ctx)
	if err != nil {
		return oandaPrices{}, err
	}
	q := url.Values{"instruments": {strings.Join(l.all, ",")}}
	body, err := o.api.get(ctx, "/v3/accounts/"+url.PathEscape(o.account)+"/pricing", q)
	if err != nil {
		return oandaPrices{}, err
	}
	prices, err := parseOandaPricing(body, o.log)
	if err != nil {
		return oandaPrices{}, fmt.Errorf("feeds: oanda: pricing: %w", err)
	}
	prices.fetched = o.now()
	o.prices = prices
	return prices, nil
}

// OandaClientPrice is the part of a v20 ClientPrice read here
// (developer.oanda.com/rest-live-v20/pricing-df/), from the pricing
// endpoint and the pricing stream alike: the best bid and ask are the
// first buckets; the closeout prices stand in when a side has no
// liquidity (the docs allow an empty list).
type OandaClientPrice struct {
	Instrument string `json:"instrument"`
	Time       string `json:"time"`
	Tradeable  *bool  `json:"tradeable"`
	Status     string `json:"status"` // deprecated; older accounts send it alone
	Bids       []struct {
		Price string `json:"price"`
	} `json:"bids"`
	Asks []struct {
		Price string `json:"price"`
	} `json:"asks"`
	CloseoutBid string `json:"closeoutBid"`
	CloseoutAsk string `json:"closeoutAsk"`
}

// Mid is the price's mid of the best bid and ask: the midpoint, as the
// mid candles (price=M) are built, so the screener price and the last
// candle's close agree; with its time (UTC) and whether the instrument
// trades (the deprecated status when tradeable is absent).
func (p OandaClientPrice) Mid() (price float64, at time.Time, tradeable bool, err error) {
	t, err := time.Parse(time.RFC3339Nano, p.Time)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("time %q: %w", p.Time, errBadField)
	}
	bid, ask := p.CloseoutBid, p.CloseoutAsk
	if len(p.Bids) > 0 {
		bid = p.Bids[0].Price
	}
	if len(p.Asks) > 0 {
		ask = p.Asks[0].Price
	}
	var b, a float64
	if err := parseDecimalFields(decimalField{"bid", &bid, &b}, decimalField{"ask", &ask, &a}); err != nil {
		return 0, time.Time{}, false, err
	}
	if b <= 0 || a <= 0 {
		return 0, time.Time{}, false, fmt.Errorf("bid %v, ask %v: %w", b, a, errBadField)
	}
	tradeable = p.Status == "tradeable"
	if p.Tradeable != nil {
		tradeable = *p.Tradeable
	}
	return (b + a) / 2, t.UTC(), tradeable, nil
}

// parseOandaPricing reads a pricing response; a bad row is logged and
// dropped alone.
func parseOandaPricing(body []byte, log *slog.Logger) (oandaPrices, error) {
	var r struct {
		Prices []OandaClientPrice `json:"prices"`
	}
	if err := decodeJSON(body, &r); err != nil {
		return oandaPrices{}, err
	}
	out := oandaPrices{bySymbol: make(map[string]oandaQuote, len(r.Prices)), bad: map[string]bool{}}
	for _, p := range r.Prices {
		price, at, tradeable, err := p.Mid()
		q := oandaQuote{price: price, time: at, tradeable: tradeable}
		if err != nil {
			log.Warn("feeds: dropping bad ticker row", "symbol", p.Instrument, "err", err)
			out.bad[p.Instrument] = true
			continue
		}
		out.bySymbol[p.Instrument] = q
	}
	return out, nil
}

// Candles implements Provider. Candles are aligned as the domain's
// timeframes are: daily ones on UTC midnight (dailyAlignment=0,
// alignmentTimezone=UTC) and weekly ones on Monday, not on OANDA's
// default 17:00 New York trading day. So a week has a short Sunday candle
// (from the 17:00 New York open, 21:00 or 22:00 UTC, to midnight), a
// Friday candle ending at the close, and no Saturday candle.
func (o *oanda) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	if err := listedSymbol(ctx, o, c, symbol); err != nil {
		return nil, err
	}
	g, ok := oandaGranularity(tf)
	if !ok {
		return nil, unknownTimeframe(NameOanda, tf)
	}
	if limit <= 0 {
		limit = 500
	}
	limit = min(limit, oandaMaxCount)
	q := url.Values{"count": {strconv.Itoa(limit)}}
	if !since.IsZero() {
		q.Set("from", since.UTC().Format(time.RFC3339))
	}
	q.Set("dailyAlignment", "0")
	q.Set("alignmentTimezone", "UTC")
	q.Set("weeklyAlignment", "Monday")
	cs, err := o.fetch(ctx, symbol, g, q)
	if err != nil {
		return nil, err
	}
	out := make([]domain.Candle, len(cs))
	for i, k := range cs {
		out[i] = k.Candle
	}
	return clipCandles(out, since, limit), nil
}

// fetch gets and parses mid candles of one instrument with the alignment
// q asks for.
func (o *oanda) fetch(ctx context.Context, instrument, granularity string, q url.Values) ([]oandaCandle, error) {
	q.Set("granularity", granularity)
	q.Set("price", "M")
	body, err := o.api.get(ctx, "/v3/instruments/"+url.PathEscape(instrument)+"/candles", q)
	if err != nil {
		return nil, err
	}
	cs, err := parseOandaCandles(body)
	if err != nil {
		return nil, rejectCandles(o.log, NameOanda, "candles", instrument, granularity, err)
	}
	return cs, nil
}

type oandaCandles struct {
	Instrument string `json:"instrument"`
	Candles    []struct {
		Complete bool       `json:"complete"`
		Volume   *float64   `json:"volume"`
		Time     string     `json:"time"`
		Mid      *oandaOHLC `json:"mid"`
	} `json:"candles"`
}

type oandaOHLC struct {
	O, H, L, C string
}

// oandaCandle is a mid candle and whether OANDA calls it complete (its end
// is not in the future).
type oandaCandle struct {
	domain.Candle
	complete bool
}

// parseOandaCandles parses a v20 candles response (price=M), oldest first.
func parseOandaCandles(body []byte) ([]oandaCandle, error) {
	var r oandaCandles
	if err := decodeJSON(body, &r); err != nil {
		return nil, err
	}
	out := make([]oandaCandle, 0, len(r.Candles))
	plain := make([]domain.Candle, 0, len(r.Candles))
	for i, c := range r.Candles {
		ts, err := time.Parse(time.RFC3339Nano, c.Time)
		if err != nil {
			return nil, fmt.Errorf("candle %d: time %q: %w", i, c.Time, errBadField)
		}
		if c.Mid == nil || c.Volume == nil {
			return nil, fmt.Errorf("candle %d: mid or volume: missing: %w", i, errBadField)
		}
		k := domain.Candle{Time: ts.UTC(), Volume: *c.Volume}
		for _, f := range []struct {
			name, raw string
			dst       *float64
		}{{"o", c.Mid.O, &k.Open}, {"h", c.Mid.H, &k.High}, {"l", c.Mid.L, &k.Low}, {"c", c.Mid.C, &k.Close}} {
			if *f.dst, err = parseDecimal(f.name, f.raw); err != nil {
				return nil, fmt.Errorf("candle %d: %w", i, err)
			}
		}
		out = append(out, oandaCandle{Candle: k, complete: c.Complete})
		plain = append(plain, k)
	}
	if err := domain.ValidateCandles(plain); err != nil {
		return nil, err
	}
	return out, nil
}
