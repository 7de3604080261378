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
	okxPage = 300 // candles per /market/candles request
	// okxRecentRows is how far back /market/candles serves: its latest
	// 1,440 rows. Older candles are only on /market/history-candles, which
	// returns at most okxHistoryPage rows a request.
	okxRecentRows  = 1440
	okxHistoryPage = 100
)

// okxLimit is OKX's public market-data budget per IP, taken from its
// strictest endpoint we call so that one host budget covers them all
// (www.okx.com/docs-v5/en, "Rate Limit", rule IP: GET /api/v5/market/tickers
// 20 requests per 2 s, /market/candles 40, /market/history-candles 20,
// /public/instruments 20 per instrument type).
var okxLimit = hostbudget.Limit{Window: 2 * time.Second, Max: 20}

// okx serves crypto/okx/spot (SPOT) and perpetual (linear USDT SWAP) from
// the OKX v5 public REST API.
type okx struct {
	log  *slog.Logger
	now  func() time.Time
	api  *apiClient
	info *symbolCache // by instrument
}

func newOKX(cfg Config) *okx {
	log := cfg.Logger.With("feed", NameOKX)
	o := &okx{
		log:  log,
		now:  cfg.Now,
		api:  newAPIClient(NameOKX, NameOKX, cfg.BaseURL(HostOKX), okxLimit, cfg),
		info: newSymbolCache(log, cfg.Now, NameOKX, "instruments"),
	}
	o.api.minInterval = 100 * time.Millisecond // 20 requests per 2 s per endpoint
	return o
}

// Name implements Provider.
func (o *okx) Name() string { return NameOKX }

// Supports implements Provider.
func (o *okx) Supports(c domain.Combination) bool { return okxServes(c) }

func okxInstType(c domain.Combination) string {
	if c.Instrument == "perpetual" {
		return "SWAP"
	}
	return "SPOT"
}

// okxEnvelope is the v5 response wrapper; code "0" means success.
type okxEnvelope struct {
	Code string          `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// get fetches a v5 endpoint and unwraps its data, turning a non-zero code
// into an error.
func (o *okx) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	body, err := o.api.get(ctx, path, q)
	if err != nil {
		return nil, err
	}
	var env okxEnvelope
	if err := decodeJSON(body, &env); err != nil {
		return nil, fmt.Errorf("feeds: okx: %s: %w", path, err)
	}
	if env.Code != "0" {
		return nil, fmt.Errorf("feeds: okx: %s: code %s: %s", path, env.Code, env.Msg)
	}
	return env.Data, nil
}

// Symbols implements Provider.
func (o *okx) Symbols(ctx context.Context, c domain.Combination) ([]string, error) {
	return symbolList(o.symbols(ctx, c))
}

func (o *okx) symbols(ctx context.Context, c domain.Combination) (*symbolMap, error) {
	if !o.Supports(c) {
		return nil, unsupported(NameOKX, c)
	}
	return o.info.get(c.Instrument,
		func() ([]byte, error) {
			return o.get(ctx, "/api/v5/public/instruments", url.Values{"instType": {okxInstType(c)}})
		},
		func(data []byte, now time.Time) (*symbolMap, error) { return parseOKXInstruments(data, c, now) })
}

// parseOKXInstruments keeps the live instruments of the combination;
// perpetuals are the linear USDT swaps.
func parseOKXInstruments(data []byte, c domain.Combination, now time.Time) (*symbolMap, error) {
	var insts []struct {
		InstID    string `json:"instId"`
		BaseCcy   string `json:"baseCcy"`   // SPOT
		QuoteCcy  string `json:"quoteCcy"`  // SPOT
		CtValCcy  string `json:"ctValCcy"`  // SWAP: base currency of the contract
		SettleCcy string `json:"settleCcy"` // SWAP
		CtType    string `json:"ctType"`    // SWAP: linear or inverse
		State     string `json:"state"`
	}
	if err := decodeJSON(data, &insts); err != nil {
		return nil, fmt.Errorf("feeds: okx: instruments: %w", err)
	}
	m := newSymbolMap(now)
	for _, in := range insts {
		base, quote := in.BaseCcy, in.QuoteCcy
		if c.Instrument == "perpetual" {
			if in.CtType != "linear" || in.SettleCcy != "USDT" {
				continue
			}
			base, quote = in.CtValCcy, in.SettleCcy
		}
		if in.State != "live" {
			continue
		}
		if canonical, ok := canonicalPair(domain.Crypto, base, quote); ok {
			m.add(in.InstID, canonical, in.InstID)
		}
	}
	if len(m.symbols) == 0 {
		return nil, fmt.Errorf("feeds: okx: no live %s instruments", okxInstType(c))
	}
	slices.Sort(m.symbols)
	return m, nil
}

// Tickers implements Provider. SPOT volCcy24h is already in quote
// currency; SWAP volCcy24h is in base currency and is converted at the last price.
func (o *okx) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	m, err := o.symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	data, err := o.get(ctx, "/api/v5/market/tickers", url.Values{"instType": {okxInstType(c)}})
	if err != nil {
		return nil, err
	}
	var rows []struct {
		InstID    string  `json:"instId"`
		Last      *string `json:"last"`
		Open24h   *string `json:"open24h"`
		VolCcy24h *string `json:"volCcy24h"`
		TS        string  `json:"ts"`
	}
	if err := decodeJSON(data, &rows); err != nil {
		return nil, fmt.Errorf("feeds: okx: tickers: %w", err)
	}
	out := make([]domain.Ticker, 0, len(rows))
	for _, r := range rows {
		canonical, ok := m.toCanon[r.InstID]
		if !ok {
			continue
		}
		var last, open, vol float64
		err := parseDecimalFields(decimalField{"last", r.Last, &last}, decimalField{"open24h", r.Open24h, &open}, decimalField{"volCcy24h", r.VolCcy24h, &vol})
		var ts int64
		if err == nil {
			if ts, err = strconv.ParseInt(r.TS, 10, 64); err != nil || ts <= 0 || open <= 0 {
				err = fmt.Errorf("ts or open24h: %w", errBadField)
			}
		}
		t := domain.Ticker{Symbol: canonical, Price: last}
		if err == nil {
			t.ChangePct = (last/open - 1) * 100
			t.Volume = vol
			if c.Instrument == "perpetual" {
				t.Volume = vol * last
			}
			t.UpdatedAt = time.UnixMilli(ts).UTC()
			err = t.Validate()
		}
		if err != nil {
			o.log.Warn("feeds: dropping bad ticker row", "symbol", r.InstID, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// okxBar maps a timeframe to OKX's bar, UTC-aligned for days and weeks.
func okxBar(tf domain.Timeframe) (string, bool) {
	b, ok := map[domain.Timeframe]string{
		domain.TF1m: "1m", domain.TF5m: "5m", domain.TF15m: "15m", domain.TF30m: "30m",
		domain.TF1h: "1H", domain.TF4h: "4H", domain.TF1d: "1Dutc", domain.TF1w: "1Wutc",
	}[tf]
	return b, ok
}

// Candles implements Provider. OKX pages backwards (after = older than a
// time), newest first; pages are walked back from the end of the wanted
// window and reversed. Pages within the latest okxRecentRows come from
// /market/candles, older ones from /market/history-candles; an empty
// recent page is asked again of the history, so a series is never taken
// as finished because the recent endpoint no longer holds it.
func (o *okx) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	m, err := o.symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	instID, ok := m.fromCanon[symbol]
	if !ok {
		return nil, unknownSymbol(NameOKX, c, symbol)
	}
	bar, ok := okxBar(tf)
	if !ok {
		return nil, unknownTimeframe(NameOKX, tf)
	}
	if limit <= 0 {
		limit = okxPage
	}
	var before time.Time // exclusive upper bound; zero = up to now
	if !since.IsZero() {
		if end := since.Add(time.Duration(limit) * tf.Duration()); end.Before(o.now()) {
			before = end
		}
	}
	recentFrom := o.now().Add(-okxRecentRows * tf.Duration())
	var out []domain.Candle // newest first while collecting
	for len(out) < limit {
		n := min(okxPage, limit-len(out))
		history := !before.IsZero() && before.Add(-time.Duration(n)*tf.Duration()).Before(recentFrom)
		page, err := o.candlePage(ctx, c, symbol, tf, instID, bar, before, n, history)
		if err == nil && len(page) == 0 && !history {
			page, err = o.candlePage(ctx, c, symbol, tf, instID, bar, before, n, true)
		}
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		if len(out) > 0 && !page[len(page)-1].Time.Before(out[len(out)-1].Time) {
			return nil, fmt.Errorf("feeds: okx: candles %s %s: %w", symbol, tf, domain.Errorf(domain.EINVALID, "candles out of order across pages"))
		}
		for i := len(page) - 1; i >= 0; i-- {
			out = append(out, page[i])
		}
		before = page[0].Time
		if !since.IsZero() && !before.After(since) {
			break
		}
	}
	reverseCandles(out)
	return clipCandles(out, since, limit), nil
}

// candlePage fetches one page of candles older than before (zero: the
// newest), from the history endpoint when history is set.
func (o *okx) candlePage(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, instID, bar string, before time.Time, n int, history bool) ([]domain.Candle, error) {
	path := "/api/v5/market/candles"
	if history {
		path, n = "/api/v5/market/history-candles", min(n, okxHistoryPage)
	}
	q := url.Values{"instId": {instID}, "bar": {bar}, "limit": {strconv.Itoa(n)}}
	if !before.IsZero() {
		q.Set("after", strconv.FormatInt(before.UnixMilli(), 10))
	}
	data, err := o.get(ctx, path, q)
	if err != nil {
		return nil, err
	}
	page, err := parseOKXCandles(data, c.Instrument == "perpetual")
	if err != nil {
		return nil, rejectCandles(o.log, NameOKX, "candles", symbol, string(tf), err)
	}
	return page, nil
}

// parseOKXCandles parses rows of [ts, o, h, l, c, vol, volCcy,
// volCcyQuote, confirm], newest first, into oldest-first candles. Swap
// volume is taken from volCcy (base currency), not contracts.
func parseOKXCandles(data []byte, swap bool) ([]domain.Candle, error) {
	return parseCandleRows(data, true, func(i int, r []json.RawMessage) (domain.Candle, error) {
		if len(r) < 7 {
			return domain.Candle{}, fmt.Errorf("candle %d: %d fields, want at least 7: %w", i, len(r), errBadField)
		}
		vol := r[5]
		if swap {
			vol = r[6]
		}
		k, err := klineRow(r[0], r[1], r[2], r[3], r[4], vol)
		if err != nil {
			return k, fmt.Errorf("candle %d: %w", i, err)
		}
		return k, nil
	})
}
