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

const (
	alpacaFeed      = "iex" // the free plan's feed; "sip" needs a subscription
	alpacaBatch     = 100   // symbols per snapshots request
	alpacaMaxLimit  = 10000 // bars per request
	alpacaPageLimit = 20    // pages followed for one Candles call
)

// alpacaLimit is the market-data API's budget per account (so per
// deployment): 200 requests a minute on the free plan.
var alpacaLimit = hostbudget.Limit{Window: time.Minute, Max: 200}

// alpaca serves stocks/nasdaq/stock and stocks/nyse/stock from the Alpaca
// market data v2 API. The instruments are the curated universe of the
// synthetic feed (≈110 large caps split by listing exchange), which keeps a
// ticker refresh to two requests.
// alpacaExchanges are the listing exchanges served, with the table of
// their curated tickers.
var alpacaExchanges = map[string]string{"nasdaq": syntheticNasdaq, "nyse": syntheticNYSE}

type alpaca struct {
	log      *slog.Logger
	now      func() time.Time
	api      *apiClient
	universe map[string][]string // exchange → tickers
}

func newAlpaca(cfg Config) *alpaca {
	a := &alpaca{
		log:      cfg.Logger.With("feed", NameAlpaca),
		now:      cfg.Now,
		api:      newAPIClient(NameAlpaca, NameAlpaca, cfg.BaseURL(HostAlpacaData), alpacaLimit, cfg),
		universe: map[string][]string{},
	}
	for exchange, table := range alpacaExchanges {
		for _, as := range parseAssets(table) {
			a.universe[exchange] = append(a.universe[exchange], as.name)
		}
	}
	keyID, secret := cfg.AlpacaKeyID, cfg.AlpacaSecret
	a.api.authorize = func(h http.Header) {
		h.Set("APCA-API-KEY-ID", keyID)
		h.Set("APCA-API-SECRET-KEY", secret)
	}
	a.api.pauseUntil = alpacaRatePause
	return a
}

// alpacaRatePause pauses until X-RateLimit-Reset when the minute's budget
// (200 requests on the free plan) is spent.
func alpacaRatePause(h http.Header, now time.Time) time.Time {
	remaining, err := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	if err != nil || remaining > 1 {
		return time.Time{}
	}
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		return now.Add(time.Second)
	}
	return time.Unix(reset, 0)
}

// Name implements Provider.
func (a *alpaca) Name() string { return NameAlpaca }

// Supports implements Provider.
func (a *alpaca) Supports(c domain.Combination) bool { return alpacaServes(c) }

// Symbols implements Provider.
func (a *alpaca) Symbols(_ context.Context, c domain.Combination) ([]string, error) {
	if !a.Supports(c) {
		return nil, unsupported(NameAlpaca, c)
	}
	return slices.Clone(a.universe[c.Exchange]), nil
}

type alpacaBar struct {
	T  string   `json:"t"`
	O  *float64 `json:"o"`
	H  *float64 `json:"h"`
	L  *float64 `json:"l"`
	C  *float64 `json:"c"`
	V  *float64 `json:"v"`
	VW *float64 `json:"vw"`
}

type alpacaSnapshot struct {
	LatestTrade *struct {
		T string   `json:"t"`
		P *float64 `json:"p"`
	} `json:"latestTrade"`
	DailyBar     *alpacaBar `json:"dailyBar"`
	PrevDailyBar *alpacaBar `json:"prevDailyBar"`
}

// Tickers implements Provider from multi-symbol snapshots: the latest
// trade, the change against the previous daily close, and today's dollar
// volume (volume × VWAP). A snapshot without a previous daily bar (Alpaca
// sends prevDailyBar: null for a first session, or when the feed has no
// previous bar) changes against today's open instead: the move of the only
// session there is, as exchanges quote a listing's first day.
func (a *alpaca) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	syms, err := a.Symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make([]domain.Ticker, 0, len(syms))
	for batch := range slices.Chunk(syms, alpacaBatch) {
		q := url.Values{"symbols": {strings.Join(batch, ",")}, "feed": {alpacaFeed}}
		body, err := a.api.get(ctx, "/v2/stocks/snapshots", q)
		if err != nil {
			return nil, err
		}
		// Decoded per symbol, so one malformed snapshot drops one row.
		var snaps map[string]json.RawMessage
		if err := decodeJSON(body, &snaps); err != nil {
			return nil, fmt.Errorf("feeds: alpaca: /v2/stocks/snapshots: %w", err)
		}
		for _, sym := range batch {
			raw, ok := snaps[sym]
			if !ok {
				a.log.Warn("feeds: no snapshot for symbol", "symbol", sym)
				continue
			}
			var snap alpacaSnapshot
			err := decodeJSON(raw, &snap)
			var t domain.Ticker
			if err == nil {
				t, err = alpacaTicker(sym, snap)
			}
			if err != nil {
				a.log.Warn("feeds: dropping bad ticker row", "symbol", sym, "err", err)
				continue
			}
			out = append(out, t)
		}
	}
	return out, nil
}

func alpacaTicker(sym string, s alpacaSnapshot) (domain.Ticker, error) {
	t := domain.Ticker{Symbol: sym}
	switch {
	case s.LatestTrade == nil || s.LatestTrade.P == nil:
		return t, fmt.Errorf("latestTrade: missing: %w", errBadField)
	case s.DailyBar == nil || s.DailyBar.V == nil || s.DailyBar.VW == nil:
		return t, fmt.Errorf("dailyBar: missing: %w", errBadField)
	}
	ref := s.DailyBar.O
	if s.PrevDailyBar != nil {
		ref = s.PrevDailyBar.C
	}
	if ref == nil || *ref <= 0 {
		return t, fmt.Errorf("prevDailyBar.c or dailyBar.o: missing or not positive: %w", errBadField)
	}
	ts, err := time.Parse(time.RFC3339Nano, s.LatestTrade.T)
	if err != nil {
		return t, fmt.Errorf("latestTrade.t %q: %w", s.LatestTrade.T, errBadField)
	}
	t.Price = *s.LatestTrade.P
	t.ChangePct = (t.Price / *ref - 1) * 100
	t.Volume = *s.DailyBar.V * *s.DailyBar.VW
	t.UpdatedAt = ts.UTC()
	return t, t.Validate()
}

// alpacaTimeframe maps a timeframe to Alpaca's notation.
func alpacaTimeframe(tf domain.Timeframe) (string, bool) {
	s, ok := map[domain.Timeframe]string{
		domain.TF1m: "1Min", domain.TF5m: "5Min", domain.TF15m: "15Min", domain.TF30m: "30Min",
		domain.TF1h: "1Hour", domain.TF4h: "4Hour", domain.TF1d: "1Day", domain.TF1w: "1Week",
	}[tf]
	return s, ok
}

// Candles implements Provider. Alpaca stamps daily and weekly bars at
// midnight New York time; open times are re-aligned with tf.Truncate so
// they match the domain's UTC candles.
func (a *alpaca) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	if err := listedSymbol(ctx, a, c, symbol); err != nil {
		return nil, err
	}
	atf, ok := alpacaTimeframe(tf)
	if !ok {
		return nil, unknownTimeframe(NameAlpaca, tf)
	}
	if limit <= 0 {
		limit = 1000
	}
	q := url.Values{
		"symbols": {symbol}, "timeframe": {atf}, "feed": {alpacaFeed}, "adjustment": {"raw"},
		"limit": {strconv.Itoa(min(limit, alpacaMaxLimit))}, "sort": {"asc"},
	}
	if since.IsZero() {
		// Newest first from far enough back to cover nights and weekends.
		q.Set("sort", "desc")
		q.Set("start", a.now().Add(-time.Duration(limit)*tf.Duration()*5-7*24*time.Hour).UTC().Format(time.RFC3339))
	} else {
		q.Set("start", since.UTC().Format(time.RFC3339))
	}
	var out []domain.Candle
	for range alpacaPageLimit {
		body, err := a.api.get(ctx, "/v2/stocks/bars", q)
		if err != nil {
			return nil, err
		}
		page, next, err := parseAlpacaBars(body, symbol, tf)
		if err != nil {
			return nil, rejectCandles(a.log, NameAlpaca, "bars", symbol, string(tf), err)
		}
		out = append(out, page...)
		if next == "" || len(out) >= limit {
			break
		}
		q.Set("page_token", next)
	}
	if since.IsZero() {
		reverseCandles(out)
	}
	if err := domain.ValidateCandles(out); err != nil {
		return nil, fmt.Errorf("feeds: alpaca: bars %s %s: %w", symbol, tf, err)
	}
	if since.IsZero() && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return clipCandles(out, since, limit), nil
}

// parseAlpacaBars parses one page of /v2/stocks/bars for one symbol, in
// the order served, and returns the next page token.
func parseAlpacaBars(body []byte, symbol string, tf domain.Timeframe) ([]domain.Candle, string, error) {
	var r struct {
		Bars          map[string][]alpacaBar `json:"bars"`
		NextPageToken *string                `json:"next_page_token"`
	}
	if err := decodeJSON(body, &r); err != nil {
		return nil, "", err
	}
	bars := r.Bars[symbol]
	out := make([]domain.Candle, 0, len(bars))
	for i, b := range bars {
		ts, err := time.Parse(time.RFC3339Nano, b.T)
		if err != nil {
			return nil, "", fmt.Errorf("bar %d: time %q: %w", i, b.T, errBadField)
		}
		if b.O == nil || b.H == nil || b.L == nil || b.C == nil || b.V == nil {
			return nil, "", fmt.Errorf("bar %d: missing field: %w", i, errBadField)
		}
		c := domain.Candle{Time: tf.Truncate(ts), Open: *b.O, High: *b.H, Low: *b.L, Close: *b.C, Volume: *b.V}
		if err := c.Validate(); err != nil {
			return nil, "", err
		}
		out = append(out, c)
	}
	next := ""
	if r.NextPageToken != nil {
		next = *r.NextPageToken
	}
	return out, next, nil
}
