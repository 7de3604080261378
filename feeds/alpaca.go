package feeds

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

// Alpaca's market-data feeds (MARKET_ALPACA_FEED): IEX, the free plan's
// single exchange, or SIP, every US exchange (a paid subscription).
const (
	AlpacaIEX = "iex"
	AlpacaSIP = "sip"
)

const (
	// alpacaMaxLimit is the most bars a page of /v2/stocks/bars holds,
	// counted across all the symbols of the request (market data v2,
	// "Historical bars": limit 1–10000, default 1000).
	alpacaMaxLimit = 10000
	// alpacaMaxURL bounds the length of a request's URL: the symbols of a
	// multi-symbol request are batched so that no URL is longer (servers
	// refuse request lines past a few kilobytes; 8 KB is the usual bound).
	alpacaMaxURL = 8000
	// alpacaMaxPages bounds the pages one bulk read follows (at 10,000
	// bars a page: the catch-up of a day-long outage of every 1m series).
	alpacaMaxPages = 500
	// alpacaAssetsEvery is how often the asset list is read again: Alpaca
	// updates it once a day, before the session.
	alpacaAssetsEvery = 24 * time.Hour
	// alpacaAssetsRetry is how soon a failed refresh is tried again while
	// the previous list is kept.
	alpacaAssetsRetry = 5 * time.Minute
	// alpacaFreeTickerEvery is how long a screener snapshot is reused on the
	// free plan: every stock's snapshot is ≈ a dozen requests of the 200 a
	// minute, and the IEX snapshot moves little in ten seconds.
	alpacaFreeTickerEvery = time.Minute
)

// alpacaBudgetWindow is the window the Alpaca budgets are booked in, a
// sixth of Alpaca's minute. Alpaca counts a key's requests in fixed
// minutes that start at its first request, at any phase against ours: one
// of its minutes spans up to seven of our windows. So each window holds a
// seventh of the minute's limit (alpacaLimit), and the planned share of
// seven windows stays within the planned share of Alpaca's minute.
const alpacaBudgetWindow = 10 * time.Second

// alpacaPerMinute is a plan's documented requests a minute: the trading
// API's 200 for every account, market data's 200 on the free plan (IEX)
// and 10,000 on Algo Trader Plus (SIP) (docs.alpaca.markets, "Rate limit";
// forum.alpaca.markets/t/executing-orders/12029).
func alpacaPerMinute(host, feed string) int {
	if host == HostAlpacaData && feed == AlpacaSIP {
		return 10000
	}
	return 200
}

// alpacaLimit is the budget of an Alpaca host at perMinute requests a
// minute, in alpacaBudgetWindow windows: a seventh of the minute each. The
// bars are polled every minute: the window that opens each minute is kept
// for the just-closed bars' reads (hostbudget.Live), so they are not
// booked behind a minute of history loads and screener refreshes.
func alpacaLimit(perMinute int) hostbudget.Limit {
	return hostbudget.Limit{Window: alpacaBudgetWindow, Max: max(perMinute/7, 1), Tick: time.Minute}
}

// alpacaExchangeOf maps the exchange field of Alpaca's assets onto the
// catalogue's stock exchanges. OTC securities are not exchange-listed, IEX
// does not trade them, and they are not served.
var alpacaExchangeOf = map[string]string{
	"NASDAQ": "nasdaq", "NYSE": "nyse", "ARCA": "arca", "NYSEARCA": "arca", "AMEX": "amex", "BATS": "bats",
}

// alpaca serves every stock exchange of the catalogue from Alpaca: the
// instruments are Alpaca's active US equities (the trading API's asset
// list, read daily), split by listing exchange; tickers are multi-symbol
// snapshots and candles multi-symbol bars of market data v2, both batched
// by URL length, within the plan's request budget.
type alpaca struct {
	log     *slog.Logger
	now     func() time.Time
	data    *apiClient // market data v2
	trading *apiClient // trading API: the asset list
	feed    string

	assetsMu sync.Mutex
	assets   map[string][]string // catalogue exchange → sorted symbols
	assetsAt time.Time           // when assets is due again

	tickersMu sync.Mutex
	tickers   map[string]alpacaTickers // exchange → the last snapshot
}

type alpacaTickers struct {
	rows []domain.Ticker
	at   time.Time
}

func newAlpaca(cfg Config) *alpaca {
	feed := cfg.AlpacaFeed
	if feed == "" {
		feed = AlpacaIEX
	}
	a := &alpaca{
		log:     cfg.Logger.With("feed", NameAlpaca),
		now:     cfg.Now,
		feed:    feed,
		data:    newAPIClient(NameAlpaca, HostAlpacaData, cfg.BaseURL(HostAlpacaData), alpacaLimit(alpacaPerMinute(HostAlpacaData, feed)), cfg),
		trading: newAPIClient(NameAlpaca, HostAlpaca, cfg.BaseURL(HostAlpaca), alpacaLimit(alpacaPerMinute(HostAlpaca, feed)), cfg),
		tickers: map[string]alpacaTickers{},
	}
	// Market data's symbols are "a comma-separated list" (market data v2,
	// "Historical bars"): sent as they are, a batch holds ≈ 1,500 symbols
	// instead of ≈ 1,100, and the bell's closing read of a whole market
	// (the 4h bars and the 1m bars of every exchange) fits one window of
	// the free plan's budget.
	a.data.listCommas = true
	keyID, secret := cfg.AlpacaKeyID, cfg.AlpacaSecret
	for _, c := range []*apiClient{a.data, a.trading} {
		c.authorize = func(h http.Header) {
			h.Set("APCA-API-KEY-ID", keyID)
			h.Set("APCA-API-SECRET-KEY", secret)
		}
		c.pauseUntil = alpacaRatePause
		c.refusedFor = alpacaRefusedFor
		c.planLimit = alpacaPlanLimit
	}
	return a
}

// alpacaRatePause pauses until X-RateLimit-Reset when the minute's budget
// is spent (X-RateLimit-Remaining ≤ 1).
func alpacaRatePause(h http.Header, now time.Time) time.Time {
	remaining, err := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	if err != nil || remaining > 1 {
		return time.Time{}
	}
	if reset, ok := alpacaReset(h); ok {
		return reset
	}
	return now.Add(time.Second)
}

// alpacaRefusedFor is how long a 429 holds every caller: until
// X-RateLimit-Reset, "the next time the rate counter will reset" (Alpaca
// sends no Retry-After).
func alpacaRefusedFor(h http.Header, now time.Time) time.Duration {
	if reset, ok := alpacaReset(h); ok {
		return reset.Sub(now)
	}
	return 0
}

func alpacaReset(h http.Header) (time.Time, bool) {
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || reset <= 0 {
		return time.Time{}, false
	}
	return time.Unix(reset, 0), true
}

// alpacaPlanLimit reads the account's requests a minute from
// X-RateLimit-Limit: the budget follows the plan the keys are on.
func alpacaPlanLimit(h http.Header) (hostbudget.Limit, bool) {
	n, err := strconv.Atoi(h.Get("X-RateLimit-Limit"))
	if err != nil || n <= 0 {
		return hostbudget.Limit{}, false
	}
	return alpacaLimit(n), true
}

// Name implements Provider.
func (a *alpaca) Name() string { return NameAlpaca }

// Supports implements Provider.
func (a *alpaca) Supports(c domain.Combination) bool { return alpacaServes(c) }

// Symbols implements Provider: the exchange's active assets.
func (a *alpaca) Symbols(ctx context.Context, c domain.Combination) ([]string, error) {
	if !a.Supports(c) {
		return nil, unsupported(NameAlpaca, c)
	}
	assets, err := a.assetList(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Clone(assets[c.Exchange]), nil
}

// alpacaAsset is the part of an asset of the trading API's list read here
// (docs.alpaca.markets, "Assets": GET /v2/assets).
type alpacaAsset struct {
	Symbol   string `json:"symbol"`
	Exchange string `json:"exchange"`
	Class    string `json:"class"`
	Status   string `json:"status"`
}

// assetList returns the active US equities by catalogue exchange, read
// again once a day. A failed refresh keeps the previous list (logged) and
// is retried a few minutes later; only a first read's failure is an error.
func (a *alpaca) assetList(ctx context.Context) (map[string][]string, error) {
	a.assetsMu.Lock()
	defer a.assetsMu.Unlock()
	now := a.now()
	if a.assets != nil && now.Before(a.assetsAt) {
		return a.assets, nil
	}
	q := url.Values{"status": {"active"}, "asset_class": {"us_equity"}}
	body, err := a.trading.get(ctx, "/v2/assets", q)
	var assets map[string][]string
	if err == nil {
		assets, err = a.parseAssets(body)
	}
	if err != nil {
		if a.assets == nil {
			return nil, fmt.Errorf("feeds: alpaca: the asset list: %w", err)
		}
		a.log.Warn("feeds: refreshing the asset list failed; keeping the previous one", "err", err)
		a.assetsAt = now.Add(alpacaAssetsRetry)
		return a.assets, nil
	}
	a.assets, a.assetsAt = assets, now.Add(alpacaAssetsEvery)
	return assets, nil
}

// parseAssets keeps the active US equities of the served exchanges, under
// their canonical symbols; an asset whose symbol cannot be one is dropped.
func (a *alpaca) parseAssets(body []byte) (map[string][]string, error) {
	var list []alpacaAsset
	if err := decodeJSON(body, &list); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	dropped := 0
	for _, as := range list {
		exchange, served := alpacaExchangeOf[as.Exchange]
		if !served || as.Status != "active" || as.Class != "us_equity" {
			continue
		}
		sym, ok := domain.NormalizeSymbol(domain.Stocks, as.Symbol)
		if !ok || sym != as.Symbol {
			dropped++
			continue
		}
		out[exchange] = append(out[exchange], sym)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no active US equity on a served exchange among %d assets: %w", len(list), errBadField)
	}
	for ex := range out {
		slices.Sort(out[ex])
		out[ex] = slices.Compact(out[ex])
	}
	if dropped > 0 {
		a.log.Debug("feeds: assets whose symbol cannot be a ticker dropped", "dropped", dropped)
	}
	return out, nil
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
// volume (volume × VWAP) on the configured feed. A snapshot without a
// previous daily bar (Alpaca sends prevDailyBar: null for a first
// session, or when the feed has no previous bar) changes against today's
// open instead: the move of the only session there is, as exchanges quote
// a listing's first day. On the free plan a snapshot is reused for a
// minute (alpacaFreeTickerEvery).
func (a *alpaca) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	syms, err := a.Symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	if a.feed == AlpacaIEX {
		a.tickersMu.Lock()
		last := a.tickers[c.Exchange]
		a.tickersMu.Unlock()
		if last.rows != nil && a.now().Sub(last.at) < alpacaFreeTickerEvery {
			return slices.Clone(last.rows), nil
		}
	}
	out := make([]domain.Ticker, 0, len(syms))
	base := url.Values{"feed": {a.feed}}
	for _, batch := range alpacaBatches(a.data.baseURL+"/v2/stocks/snapshots", base, syms) {
		q := url.Values{"symbols": {strings.Join(batch, ",")}, "feed": {a.feed}}
		body, err := a.data.get(ctx, "/v2/stocks/snapshots", q)
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
				a.log.Debug("feeds: no snapshot for symbol", "symbol", sym)
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
	a.tickersMu.Lock()
	a.tickers[c.Exchange] = alpacaTickers{rows: slices.Clone(out), at: a.now()}
	a.tickersMu.Unlock()
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

// alpacaBatches splits symbols into batches whose request URL (base, then
// the query base with the batch's symbols) stays within alpacaMaxURL.
func alpacaBatches(base string, q url.Values, symbols []string) [][]string {
	room := alpacaMaxURL - len(base) - len("?symbols=&") - len(q.Encode()) - len("&page_token=") - 64 // a page token
	var out [][]string
	var cur []string
	used := 0
	for _, s := range symbols {
		n := len(url.QueryEscape(s)) + len(",") // the data client sends its commas as they are (listCommas)
		if len(cur) > 0 && used+n > room {
			out = append(out, cur)
			cur, used = nil, 0
		}
		cur, used = append(cur, s), used+n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// alpacaTimeframe maps a timeframe to Alpaca's notation.
func alpacaTimeframe(tf domain.Timeframe) (string, bool) {
	s, ok := map[domain.Timeframe]string{
		domain.TF1m: "1Min", domain.TF5m: "5Min", domain.TF15m: "15Min", domain.TF30m: "30Min",
		domain.TF1h: "1Hour", domain.TF4h: "4Hour", domain.TF1d: "1Day", domain.TF1w: "1Week",
	}[tf]
	return s, ok
}

// Candles implements Provider: BulkCandles of one symbol.
func (a *alpaca) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	if err := listedSymbol(ctx, a, c, symbol); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	got, failed, err := a.BulkCandles(ctx, c, tf, map[string]time.Time{symbol: since}, limit)
	if err != nil {
		return nil, err
	}
	if err := failed[symbol]; err != nil {
		return nil, err
	}
	return clipCandles(got[symbol], since, limit), nil
}

// BulkCandles implements BulkCandleProvider with multi-symbol bars
// (GET /v2/stocks/bars?symbols=…): the symbols are grouped by where they
// start (a request starts at its group's earliest), each group batched by
// URL length, and each batch's pages followed (next_page_token, 10,000
// bars a page across its symbols). A series with no start gets its
// newest limit candles, read from far enough back to hold them across
// nights and weekends.
//
// Times: daily and weekly bars are stamped by Alpaca at midnight New York
// time and are the session's (and the week's) bar: they are stored at the
// UTC midnight of their date (and Monday). Intraday bars keep the times
// Alpaca aligns them on.
func (a *alpaca) BulkCandles(ctx context.Context, c domain.Combination, tf domain.Timeframe, from map[string]time.Time, limit int) (map[string][]domain.Candle, map[string]error, error) {
	if !a.Supports(c) {
		return nil, nil, unsupported(NameAlpaca, c)
	}
	atf, ok := alpacaTimeframe(tf)
	if !ok {
		return nil, nil, unknownTimeframe(NameAlpaca, tf)
	}
	if limit <= 0 {
		limit = 1000
	}
	now := a.now()
	got := make(map[string][]domain.Candle, len(from))
	failed := map[string]error{}
	for _, g := range alpacaGroups(from, tf, now, limit) {
		base := a.barsQuery(atf, g.start)
		for _, batch := range alpacaBatches(a.data.baseURL+"/v2/stocks/bars", base, g.symbols) {
			bars, bad, err := a.bars(ctx, base, batch, tf)
			if err != nil {
				return got, failed, err
			}
			for sym, err := range bad {
				failed[sym] = rejectCandles(a.log, NameAlpaca, "bars", sym, atf, err)
			}
			for _, sym := range batch {
				if _, isBad := bad[sym]; isBad {
					continue
				}
				cs := bars[sym]
				if since := from[sym]; since.IsZero() {
					cs = cs[max(len(cs)-limit, 0):]
				} else {
					cs = clipCandles(cs, since, 0)
				}
				if len(cs) > 0 {
					got[sym] = cs
				}
			}
		}
	}
	return got, failed, nil
}

// barsQuery is the query of a multi-symbol bars request but its symbols
// and page token.
func (a *alpaca) barsQuery(timeframe string, start time.Time) url.Values {
	return url.Values{"timeframe": {timeframe}, "feed": {a.feed}, "adjustment": {"raw"}, "limit": {strconv.Itoa(alpacaMaxLimit)},
		"sort": {"asc"}, "start": {start.UTC().Format(time.RFC3339)}}
}

// BulkBatches implements BulkCandleProvider: alpacaBatches of a bars
// request of the longest timeframe's name, whose start (RFC 3339 in UTC)
// is as long as any.
func (a *alpaca) BulkBatches(symbols []string) [][]string {
	return alpacaBatches(a.data.baseURL+"/v2/stocks/bars", a.barsQuery("15Min", time.Unix(0, 0)), symbols)
}

// alpacaGroup is symbols read from one start.
type alpacaGroup struct {
	start   time.Time
	symbols []string
}

// alpacaGroups groups symbols by where they start: the series with none
// together from an initial start, the others sorted by start, a group
// taking the symbols within a few candles of its first (reading a few
// candles more of some series costs nothing; a request more costs budget).
func alpacaGroups(from map[string]time.Time, tf domain.Timeframe, now time.Time, limit int) []alpacaGroup {
	var fresh []string
	type sinceOf struct {
		sym   string
		since time.Time
	}
	var rest []sinceOf
	for sym, t := range from {
		if t.IsZero() {
			fresh = append(fresh, sym)
		} else {
			rest = append(rest, sinceOf{sym, t})
		}
	}
	var out []alpacaGroup
	if len(fresh) > 0 {
		slices.Sort(fresh)
		out = append(out, alpacaGroup{start: alpacaInitialStart(now, tf, limit), symbols: fresh})
	}
	slices.SortFunc(rest, func(a, b sinceOf) int { return cmp.Or(a.since.Compare(b.since), strings.Compare(a.sym, b.sym)) })
	spread := max(3*tf.Duration(), 15*time.Minute)
	first := len(out) // the groups of series with a start follow
	for _, r := range rest {
		if n := len(out); n > first && r.since.Sub(out[n-1].start) <= spread {
			out[n-1].symbols = append(out[n-1].symbols, r.sym)
			continue
		}
		out = append(out, alpacaGroup{start: r.since, symbols: []string{r.sym}})
	}
	return out
}

// alpacaInitialStart is where a series with nothing stored starts: far
// enough back for limit candles of tf across nights, weekends and
// holidays. Intraday bars assume sixteen traded hours a day (IEX and SIP
// carry the extended sessions); a stock that trades less gets fewer
// candles, as it has.
func alpacaInitialStart(now time.Time, tf domain.Timeframe, limit int) time.Time {
	switch tf {
	case domain.TF1w:
		return now.AddDate(0, 0, -7*(limit+2))
	case domain.TF1d:
		return now.AddDate(0, 0, -(limit*7/5 + 10))
	}
	span := time.Duration(limit) * tf.Duration() * 3 / 2 * 7 / 5
	return now.Add(-span).AddDate(0, 0, -4)
}

// bars reads every page of one multi-symbol bars request and returns the
// candles by symbol, oldest first, and the symbols whose bars failed
// validation (their candles are left out).
func (a *alpaca) bars(ctx context.Context, base url.Values, symbols []string, tf domain.Timeframe) (map[string][]domain.Candle, map[string]error, error) {
	q := url.Values{}
	for k, v := range base {
		q[k] = v
	}
	q.Set("symbols", strings.Join(symbols, ","))
	out := map[string][]domain.Candle{}
	bad := map[string]error{}
	for page := 0; ; page++ {
		if page == alpacaMaxPages {
			return out, bad, fmt.Errorf("feeds: alpaca: bars %s: more than %d pages", tf, alpacaMaxPages)
		}
		body, err := a.data.get(ctx, "/v2/stocks/bars", q)
		if err != nil {
			return out, bad, err
		}
		next, err := parseAlpacaBarsPage(body, tf, out, bad)
		if err != nil {
			return out, bad, fmt.Errorf("feeds: alpaca: bars %s: %w", tf, err)
		}
		if next == "" {
			break
		}
		q.Set("page_token", next)
	}
	for sym, cs := range out {
		if err := domain.ValidateCandles(cs); err != nil {
			bad[sym] = err
		}
	}
	for sym := range bad {
		delete(out, sym)
	}
	return out, bad, nil
}

// parseAlpacaBarsPage adds one page of /v2/stocks/bars to out (a symbol's
// bars continue on the next page where a page ends) and returns the next
// page token. A bad bar marks its symbol bad; a page that cannot be
// decoded is an error.
func parseAlpacaBarsPage(body []byte, tf domain.Timeframe, out map[string][]domain.Candle, bad map[string]error) (string, error) {
	var r struct {
		Bars          map[string][]alpacaBar `json:"bars"`
		NextPageToken *string                `json:"next_page_token"`
	}
	if err := decodeJSON(body, &r); err != nil {
		return "", err
	}
	for sym, bars := range r.Bars {
		for i, b := range bars {
			c, err := alpacaCandle(b, tf)
			if err != nil {
				bad[sym] = errors.Join(bad[sym], fmt.Errorf("bar %d: %w", i, err))
				break
			}
			out[sym] = append(out[sym], c)
		}
	}
	if r.NextPageToken == nil {
		return "", nil
	}
	return *r.NextPageToken, nil
}

// alpacaCandle turns a bar into a candle: daily and weekly bars at the
// UTC midnight of their date (Monday's for a week), intraday bars at
// Alpaca's time.
func alpacaCandle(b alpacaBar, tf domain.Timeframe) (domain.Candle, error) {
	ts, err := time.Parse(time.RFC3339Nano, b.T)
	if err != nil {
		return domain.Candle{}, fmt.Errorf("time %q: %w", b.T, errBadField)
	}
	if b.O == nil || b.H == nil || b.L == nil || b.C == nil || b.V == nil {
		return domain.Candle{}, fmt.Errorf("missing field: %w", errBadField)
	}
	at := ts.UTC()
	if tf.Duration() >= domain.TF1d.Duration() {
		at = tf.Truncate(at)
	}
	c := domain.Candle{Time: at, Open: *b.O, High: *b.H, Low: *b.L, Close: *b.C, Volume: *b.V}
	return c, c.Validate()
}
