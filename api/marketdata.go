package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// MarketData is what the market-data operations read.
type MarketData interface {
	Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error)
	Candles(ctx context.Context, k store.CandleKey, limit int) ([]domain.Candle, error)
	CandleSymbols(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe) ([]string, error)
	FeedHealthOf(ctx context.Context, c domain.Combination, kind string) (store.FeedHealth, error)
}

// Staleness bounds: past them, data of a failing feed is refused with 502
// instead of served as if it were live, while its market trades (a closed
// market's data is its last session's, whatever its age: markethours.go).
// They count from the session's open when the data is older.
const (
	tickerStaleAfter = 5 * time.Minute
	maxCandleLimit   = MaxCandleLimit
)

// MaxCandleLimit is the most candles GET /ohlcv serves at once: candle
// retention keeps at least that span of every timeframe.
const MaxCandleLimit = 1000

// ScreenerRecord is one screener row.
type ScreenerRecord struct {
	Symbol    string    `json:"symbol" doc:"Canonical symbol: BASE_QUOTE for crypto and forex, the ticker for stocks" example:"BTC_USDT"`
	Price     float64   `json:"price" doc:"Last price in the quote currency" example:"97250.5"`
	ChangePct float64   `json:"change_pct" doc:"Percent change over 24 hours" example:"-1.85"`
	Volume    float64   `json:"volume" doc:"24-hour volume in the quote currency" example:"1843000000"`
	UpdatedAt time.Time `json:"updated_at" doc:"When this row was last ingested (RFC 3339 UTC)" example:"2026-11-22T10:15:00Z"`
}

// Candle is one OHLCV candle; time is its open time.
type Candle struct {
	Time      time.Time `json:"time" doc:"Open time of the candle (RFC 3339 UTC)" example:"2026-11-22T10:00:00Z"`
	Open      float64   `json:"open" example:"97010.1"`
	High      float64   `json:"high" example:"97400"`
	Low       float64   `json:"low" example:"96880.2"`
	Close     float64   `json:"close" example:"97250.5"`
	Volume    float64   `json:"volume" doc:"Volume in the base asset" example:"812.4"`
	UpdatedAt time.Time `json:"updated_at" doc:"When the series was last ingested" example:"2026-11-22T10:15:00Z"`
}

// The bounds and defaults of the data GETs' inputs. A struct tag cannot
// name a constant, so each tag below writes its value once more; the hot
// routes' decoders use these, and enums_test.go holds the document to them.
const (
	maxExchangeLen     = 32
	maxInstrumentLen   = 32
	maxSymbolLen       = 40
	defaultCandleLimit = 200
)

// MarketPath is the market and exchange of a market-data path.
type MarketPath struct {
	MarketType domain.Market `path:"market_type" doc:"Market" example:"crypto"`
	Exchange   string        `path:"exchange" maxLength:"32" doc:"Lower-case exchange identifier; see the region's catalogue" example:"binance"`
}

type screenerInput struct {
	MarketPath
	Instrument string                 `path:"instrument" maxLength:"32" doc:"Instrument type: spot, perpetual, futures (crypto), major, minor (forex), stock (stocks)" example:"spot"`
	VolumeMin  OptionalParam[float64] `query:"volume_min" doc:"Keep rows with volume ≥ this (inclusive)"`
	VolumeMax  OptionalParam[float64] `query:"volume_max" doc:"Keep rows with volume ≤ this (inclusive)"`
	ChangeMin  OptionalParam[float64] `query:"change_min" doc:"Keep rows with change_pct ≥ this (inclusive)"`
	ChangeMax  OptionalParam[float64] `query:"change_max" doc:"Keep rows with change_pct ≤ this (inclusive)"`
	SymbolsParam
	ConditionalParams
}

// The screener's answer is a dataOutput, documented as []ScreenerRecord:
// the snapshot is encoded once per ingest, not per request.

type ohlcvInput struct {
	MarketPath
	Symbol    string           `path:"symbol" maxLength:"40" doc:"BTC_USDT, or BTC%2FUSDT (a raw BTC/USDT is accepted too); case-insensitive" example:"BTC_USDT"`
	Timeframe domain.Timeframe `path:"timeframe" doc:"Candle timeframe" example:"1h"`
	Limit     int              `query:"limit" default:"200" minimum:"1" maximum:"1000" doc:"Number of newest candles, returned oldest first"`
	ConditionalParams
}

type ohlcvSplitInput struct {
	MarketType domain.Market    `path:"market_type"`
	Exchange   string           `path:"exchange" maxLength:"32"`
	Base       string           `path:"base" maxLength:"20"`
	Quote      string           `path:"quote" maxLength:"20"`
	Timeframe  domain.Timeframe `path:"timeframe"`
	Limit      int              `query:"limit" default:"200" minimum:"1" maximum:"1000"`
	ConditionalParams
}

// jsonResponse documents a raw-bytes body as JSON of the given Go type.
func (s *Server) jsonResponse(v any, description string) map[string]*huma.Response {
	schema := s.humaAPI.OpenAPI().Components.Schemas.Schema(reflect.TypeOf(v), true, "")
	return map[string]*huma.Response{"200": {Description: description,
		Content: map[string]*huma.MediaType{"application/json": {Schema: schema}}}}
}

func (s *Server) registerMarketData() {
	register(s, huma.Operation{
		OperationID: "get-screener",
		Summary:     "Live screener: price, change and volume of every instrument of a combination",
		Description: "One row per instrument of the market/exchange/instrument combination, ordered by symbol. " +
			"Filters are inclusive. The combinations of this deployment are listed in the 404 detail of an unknown one. " +
			"When the upstream feed fails, the last good rows are served with their `updated_at`; once they are older than 5 minutes while the market trades the answer is 502. " +
			"While the market is closed (stocks outside the New York session, forex at the weekend) the rows are the last session's, served whatever their age; `X-Market-Open: false` says so, with the close and the next open.",
		Tags:      []string{tagMarketData},
		Errors:    errorResponses(http.StatusNotFound, http.StatusBadGateway),
		Responses: s.dataResponses([]ScreenerRecord{}, "One row per instrument, ordered by symbol"),
	}, s.getScreener)

	ohlcvOp := huma.Operation{
		OperationID: "get-ohlcv",
		Summary:     "OHLCV candles of a symbol",
		Description: "The newest `limit` candles (default 200, 1..1000; outside that range is 400), oldest first. " +
			"Crypto candles are those of the exchange's spot market. `BTC_USDT`, `BTC%2FUSDT` and a raw `BTC/USDT` give the same candles. " +
			"Stock and forex candles exist only where the market traded: a stock's daily candle is its session's (09:30-16:00 New York, 13:00 on an early close), and there is none for a weekend or a holiday. " +
			"While the market is closed the newest candle is the last session's, served whatever its age, and `X-Market-Open: false` says so.",
		Tags:      []string{tagMarketData},
		Errors:    errorResponses(http.StatusNotFound, http.StatusBadGateway),
		Responses: s.dataResponses([]Candle{}, "Candles, oldest first"),
	}
	register(s, ohlcvOp, s.getOHLCV)
	split := ohlcvOp
	split.OperationID = "get-ohlcv-slash-symbol"
	split.Hidden = true
	register(s, split, func(ctx context.Context, in *ohlcvSplitInput) (*dataOutput, error) {
		return s.getOHLCV(ctx, &ohlcvInput{MarketPath: MarketPath{MarketType: in.MarketType, Exchange: in.Exchange},
			Symbol: in.Base + "/" + in.Quote, Timeframe: in.Timeframe, Limit: in.Limit, ConditionalParams: in.ConditionalParams})
	})
}

func finiteFilter(loc string, p OptionalParam[float64]) error {
	if p.IsSet && (math.IsNaN(p.Value) || math.IsInf(p.Value, 0)) {
		return domain.Invalid(loc, p.Value, "must be a finite number")
	}
	return nil
}

func orderedBounds(minLoc string, lo OptionalParam[float64], maxLoc string, hi OptionalParam[float64]) error {
	if lo.IsSet && hi.IsSet && lo.Value > hi.Value {
		return domain.Invalid(minLoc, lo.Value, "must not exceed %s (%v)", maxLoc[len("query."):], hi.Value)
	}
	return nil
}

func (s *Server) getScreener(ctx context.Context, in *screenerInput) (*dataOutput, error) {
	for _, f := range [...]struct {
		loc string
		p   OptionalParam[float64]
	}{{"query.volume_min", in.VolumeMin}, {"query.volume_max", in.VolumeMax}, {"query.change_min", in.ChangeMin}, {"query.change_max", in.ChangeMax}} {
		if err := finiteFilter(f.loc, f.p); err != nil {
			return nil, s.problem(ctx, err)
		}
	}
	if err := orderedBounds("query.volume_min", in.VolumeMin, "query.volume_max", in.VolumeMax); err != nil {
		return nil, s.problem(ctx, err)
	}
	if err := orderedBounds("query.change_min", in.ChangeMin, "query.change_max", in.ChangeMax); err != nil {
		return nil, s.problem(ctx, err)
	}
	m := domain.Market(in.MarketType)
	wanted, err := parseSymbols(m, in.Symbols)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	combo, ok := domain.LookupCombination(s.cfg.Region, m, in.Exchange, in.Instrument)
	if !ok || !s.cfg.Served.Has(combo) {
		return nil, s.notAvailable(m, string(in.MarketType)+"/"+in.Exchange+"/"+in.Instrument, ok)
	}
	snap, err := readcache.Load(ctx, s.cache, readcache.TickerSnapshot(combo), func(ctx context.Context) (tickerSnapshot, error) {
		return s.loadTickers(ctx, combo)
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	st := s.marketState(ctx, m)
	if snap.failing && (len(snap.rows) == 0 || st.Open && s.now(ctx).Sub(staleFrom(snap.newest, st)) > tickerStaleAfter) {
		return nil, huma.Error502BadGateway(fmt.Sprintf("the upstream feed of %s is failing and the stored data is stale; retry later", combo))
	}
	if !in.VolumeMin.IsSet && !in.VolumeMax.IsSet && !in.ChangeMin.IsSet && !in.ChangeMax.IsSet && wanted == nil {
		return s.withMarketHeaders(s.respond(ctx, &in.ConditionalParams, snap.body, freshTickers), m, st), nil
	}
	filter := store.TickerFilter{VolumeMin: in.VolumeMin.Ptr(), VolumeMax: in.VolumeMax.Ptr(),
		ChangeMin: in.ChangeMin.Ptr(), ChangeMax: in.ChangeMax.Ptr()}
	var kept []domain.Ticker
	found := wanted.tracker()
	for _, t := range snap.rows {
		if !wanted.has(t.Symbol) {
			continue
		}
		found.see(t.Symbol)
		if filter.Match(t) {
			kept = append(kept, t)
		}
	}
	body, err := encodeScreener(kept)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	// Filtered bodies are not cached: their tag covers the body and the
	// unknown symbols, computed for this request.
	unknown := found.unknown()
	out := s.respond(ctx, &in.ConditionalParams, readcache.NewBodyTagged(body, snap.newest, body, []byte(unknown)), freshTickers)
	out.Unknown = unknown
	return s.withMarketHeaders(out, m, st), nil
}

const jsonContentType = "application/json"

func encodeScreener(rows []domain.Ticker) ([]byte, error) {
	out := make([]ScreenerRecord, len(rows))
	for i, t := range rows {
		out[i] = ScreenerRecord{Symbol: t.Symbol, Price: t.Price, ChangePct: t.ChangePct, Volume: t.Volume, UpdatedAt: t.UpdatedAt}
	}
	return json.Marshal(out)
}

type tickerSnapshot struct {
	rows    []domain.Ticker
	body    readcache.Body // every row as the response body
	newest  time.Time
	failing bool
}

func (s *Server) loadTickers(ctx context.Context, c domain.Combination) (tickerSnapshot, error) {
	rows, err := s.data.Tickers(ctx, c)
	if err != nil {
		return tickerSnapshot{}, err
	}
	h, err := s.data.FeedHealthOf(ctx, c, store.FeedKindTickers)
	if err != nil {
		return tickerSnapshot{}, err
	}
	snap := tickerSnapshot{rows: rows, failing: h.Failing()}
	for _, t := range rows {
		if t.UpdatedAt.After(snap.newest) {
			snap.newest = t.UpdatedAt
		}
	}
	if len(rows) == 0 && !snap.failing {
		return snap, domain.Errorf(domain.EUNAVAILABLE, "no data ingested yet for %s; retry shortly", c)
	}
	encoded, err := encodeScreener(rows)
	snap.body = readcache.NewBody(encoded, snap.newest)
	return snap, err
}

// CandleCombination is the key of an exchange's candle feed (its health is
// recorded there): candles are per exchange and symbol, not per
// instrument, so the instrument is domain.CandleInstrument. served reports
// whether a candle-bearing combination of the exchange is served.
func CandleCombination(region string, m domain.Market, exchange string, served domain.Served) (key domain.Combination, known, ok bool) {
	for _, c := range domain.Catalogue(region) {
		if c.Market == m && c.Exchange == exchange {
			known = true
			if c.HasCandles() && served.Has(c) {
				return domain.Combination{Market: m, Exchange: exchange, Instrument: domain.CandleInstrument}, true, true
			}
		}
	}
	return domain.Combination{}, known, false
}

// notAvailable is the 404 of a combination (what) of market m that the
// region's catalogue lacks (known false) or that no configured feed
// serves; its detail lists the market's served combinations.
func (s *Server) notAvailable(m domain.Market, what string, known bool) error {
	why := "no " + what + " in this region"
	if known {
		why = what + " is not served in this region"
	}
	return huma.Error404NotFound(fmt.Sprintf("%s (%s); available for %s: %s",
		why, s.cfg.Region, m, domain.DescribeAvailable(s.cfg.Region, m, s.cfg.Served)))
}

type candleSeries struct {
	candles []domain.Candle
	updated time.Time
	failing bool
}

func (s *Server) getOHLCV(ctx context.Context, in *ohlcvInput) (*dataOutput, error) {
	m := domain.Market(in.MarketType)
	tf := in.Timeframe
	symbol, ok := domain.NormalizeSymbol(m, in.Symbol)
	if !ok {
		form := "BASE_QUOTE such as BTC_USDT or EUR_USD (BTC/USDT also accepted)"
		if m == domain.Stocks {
			form = "a ticker such as AAPL"
		}
		return nil, s.problem(ctx, domain.Invalid("path.symbol", in.Symbol, "must be %s", form))
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	combo, known, ok := CandleCombination(s.cfg.Region, m, in.Exchange, s.cfg.Served)
	if !ok {
		return nil, s.notAvailable(m, fmt.Sprintf("%s exchange %q", m, in.Exchange), known)
	}
	key := store.CandleKey{Market: m, Exchange: in.Exchange, Symbol: symbol, Timeframe: tf}
	series, err := readcache.Load(ctx, s.cache, readcache.CandleSeries(m, in.Exchange, symbol, tf), func(ctx context.Context) (candleSeries, error) {
		// The two reads run side by side: after every candle write the
		// series is read again, and each round trip to a busy server is a
		// wait of its own.
		var h store.FeedHealth
		var herr error
		health := make(chan struct{})
		go func() {
			defer close(health)
			feed := store.CandleFeed(m, in.Exchange, tf)
			h, herr = s.data.FeedHealthOf(ctx, feed.Combination, feed.Kind)
		}()
		cs, err := s.data.Candles(ctx, key, maxCandleLimit)
		<-health
		if err != nil {
			return candleSeries{}, err
		}
		if herr != nil {
			return candleSeries{}, herr
		}
		cs2 := candleSeries{candles: cs, failing: h.Failing()}
		if h.LastSuccessAt != nil {
			cs2.updated = h.LastSuccessAt.UTC()
		}
		return cs2, nil
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	if len(series.candles) == 0 {
		if series.failing {
			return nil, huma.Error502BadGateway(fmt.Sprintf("the upstream feed of %s is failing; retry later", combo))
		}
		return nil, s.problem(ctx, s.unknownSymbol(ctx, m, in.Exchange, symbol, tf))
	}
	newest := series.candles[len(series.candles)-1]
	st := s.marketState(ctx, m)
	if series.failing && st.Open && s.now(ctx).Sub(staleFrom(newest.Time, st)) > 2*tf.Duration()+tickerStaleAfter {
		return nil, huma.Error502BadGateway(fmt.Sprintf("the upstream feed of %s is failing and the stored candles are stale; retry later", combo))
	}
	// The encoded body is cached per limit beside the series, and dropped with it.
	body, err := readcache.Load(ctx, s.cache, readcache.CandleBody(m, in.Exchange, symbol, tf, in.Limit), func(context.Context) (readcache.Body, error) {
		cs := series.candles
		if len(cs) > in.Limit {
			cs = cs[len(cs)-in.Limit:]
		}
		updated := series.updated
		if updated.IsZero() {
			updated = newest.Time
		}
		out := make([]Candle, len(cs))
		for i, c := range cs {
			out[i] = Candle{Time: c.Time, Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume, UpdatedAt: updated}
		}
		b, err := json.Marshal(out)
		return readcache.NewBody(b, updated), err
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return s.withMarketHeaders(s.respond(ctx, &in.ConditionalParams, body, freshCandles), m, st), nil
}

func (s *Server) unknownSymbol(ctx context.Context, m domain.Market, exchange, symbol string, tf domain.Timeframe) error {
	syms, err := readcache.Load(ctx, s.cache, readcache.CandleSymbols(m, exchange, tf), func(ctx context.Context) ([]string, error) {
		return s.data.CandleSymbols(ctx, m, exchange, tf)
	})
	if err != nil {
		return err
	}
	if len(syms) == 0 {
		return domain.Errorf(domain.EUNAVAILABLE, "no %s candles ingested yet for %s/%s; retry shortly", tf, m, exchange)
	}
	shown := syms
	if len(shown) > 30 {
		shown = shown[:30]
	}
	more := ""
	if len(syms) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(syms)-len(shown))
	}
	return domain.Errorf(domain.ENOTFOUND, "no %s candles for %s on %s/%s; available: %s%s",
		tf, symbol, m, exchange, strings.Join(shown, ", "), more)
}

// problem turns a domain error into the client-facing problem (one table,
// errors.go); internal errors are logged with the request id.
func (s *Server) problem(ctx context.Context, err error) error {
	return toProblem(s.cfg.Logger, infoFrom(ctx).ID, err)
}
