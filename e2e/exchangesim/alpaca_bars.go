package exchangesim

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// timeframe is a bar aggregation: n units of T (minutes), H (hours),
// D (days), W (weeks) or M (months).
type timeframe struct {
	n    int
	unit byte
}

// timeframePattern is Alpaca's grammar: [1-59]Min or T, [1-23]Hour or
// H, 1Day or D, 1Week or W, [1,2,3,4,6,12]Month or M ([docs-ref]
// stockbarsingle-1; the bounds as [sdk-py] timeframe.py validates them).
var timeframePattern = regexp.MustCompile(`^([0-9]{1,2})(Min|T|Hour|H|Day|D|Week|W|Month|M)$`)

func parseTimeframe(s string) (timeframe, bool) {
	m := timeframePattern.FindStringSubmatch(s)
	if m == nil {
		return timeframe{}, false
	}
	n, _ := strconv.Atoi(m[1])
	tf := timeframe{n: n, unit: m[2][0]}
	if m[2] == "Min" {
		tf.unit = 'T'
	}
	switch tf.unit {
	case 'T':
		return tf, n >= 1 && n <= 59
	case 'H':
		return tf, n >= 1 && n <= 23
	case 'D', 'W':
		return tf, n == 1
	}
	return tf, n == 1 || n == 2 || n == 3 || n == 4 || n == 6 || n == 12
}

func (tf timeframe) intraday() bool { return tf.unit == 'T' || tf.unit == 'H' }

// minutes is an intraday bucket's length.
func (tf timeframe) minutes() int {
	if tf.unit == 'H' {
		return tf.n * 60
	}
	return tf.n
}

// bucketStart is the start of the intraday bucket holding t. Buckets
// count from New York's midnight in New York clock time, so 4Hour bars
// start at 00:00, 04:00, 08:00 … New York ("4H bars are simply 4 hour
// bars grouped together, always starting at 4 * n hour (00:00, 04:00,
// 08:00, etc.)", [forum] 14632; its example is in EDT, where New York
// and UTC multiples of four hours coincide; the simulator keeps New York's
// in winter too, like its day bars — chosen). A timeframe not dividing
// the day restarts at each midnight (chosen).
func (tf timeframe) bucketStart(t time.Time) time.Time {
	ny := t.In(newYork)
	b := (ny.Hour()*60 + ny.Minute()) / tf.minutes() * tf.minutes()
	return time.Date(ny.Year(), ny.Month(), ny.Day(), 0, b, 0, 0, newYork)
}

func (tf timeframe) bucketEnd(t time.Time) time.Time {
	s := tf.bucketStart(t).In(newYork)
	return time.Date(s.Year(), s.Month(), s.Day(), s.Hour(), s.Minute()+tf.minutes(), 0, 0, newYork)
}

// tokenUnit is the unit letter of a page token: Alpaca's tokens are
// base64 of "SYMBOL|unit|time of the last bar", "AAPL|M|…" for minutes
// and "TSLA|D|…" for days ([docs-md] historical.md examples).
func (tf timeframe) tokenUnit() string {
	return map[byte]string{'T': "M", 'H': "H", 'D': "D", 'W': "W", 'M': "N"}[tf.unit]
}

// bars visits e's bars of tf on feed f stamped in [start, end] as they
// stand at now, oldest first (newest first when !asc), until visit says
// stop. Intraday bars hold the minutes in [start, end]; the first bucket,
// cut by start, is stamped start ("When you'll query for 9:30-04:00, the
// first bar's timestamp will be 13:30Z", [forum] 14632). Day, week and
// month bars are included when their timestamp is in [start, end]
// (chosen: they are not cut).
func (mk *stockMarket) bars(e *equity, tf timeframe, f feedKind, start, end, now time.Time, asc bool, visit func(stockBar) bool) {
	if end.After(now) {
		end = now
	}
	if end.Before(start) {
		return
	}
	from, to := max(dayOf(start), dataStart, e.listed), dayOf(end)
	if e.delisted != 0 {
		to = min(to, e.delisted)
	}
	switch {
	case tf.intraday():
		eachDay(from, to, asc, func(d day) bool { return mk.intradayBars(e, d, tf, f, start, end, now, asc, visit) })
	case tf.unit == 'D':
		eachDay(from, to, asc, func(d day) bool {
			if t := d.midnight(); t.Before(start) || t.After(end) {
				return true
			}
			if m, ok := mk.model(e, d); ok {
				if b, ok := m.daily(f, now); ok {
					return visit(b)
				}
			}
			return true
		})
	default:
		mk.periodBars(e, tf, f, from, to, start, end, now, asc, visit)
	}
}

func eachDay(from, to day, asc bool, fn func(day) bool) {
	if asc {
		for d := from; d <= to && fn(d); d++ {
		}
		return
	}
	for d := to; d >= from && fn(d); d-- {
	}
}

func (mk *stockMarket) intradayBars(e *equity, d day, tf timeframe, f feedKind, start, end, now time.Time, asc bool, visit func(stockBar) bool) bool {
	m, ok := mk.model(e, d)
	if !ok {
		return true
	}
	lo, hi := m.shape.window(f)
	kFrom := max(lo, int(math.Ceil(start.Sub(m.start).Minutes())))
	kTo := min(hi, int(math.Floor(end.Sub(m.start).Minutes()))+1, m.closed(now))
	if kFrom >= kTo {
		return true
	}
	size, first := tf.minutes(), 4*60 // the window's minute 0 is minute 240 of the day
	b0, b1 := (first+kFrom)/size, (first+kTo-1)/size
	one := func(b int) bool {
		bar, ok := m.aggregate(max(kFrom, b*size-first), min(kTo, (b+1)*size-first), f, now)
		if !ok {
			return true
		}
		bar.t = tf.bucketStart(m.minuteTime(max(kFrom, b*size-first)))
		if bar.t.Before(start) {
			bar.t = start
		}
		return visit(bar)
	}
	if asc {
		for b := b0; b <= b1; b++ {
			if !one(b) {
				return false
			}
		}
		return true
	}
	for b := b1; b >= b0; b-- {
		if !one(b) {
			return false
		}
	}
	return true
}

// periodBars are week and month bars, merged from day bars. A week bar
// is stamped at its Monday's New York midnight and a month bar at its
// first day's; N-month bars count from January (chosen: Alpaca documents
// neither).
func (mk *stockMarket) periodBars(e *equity, tf timeframe, f feedKind, from, to day, start, end, now time.Time, asc bool, visit func(stockBar) bool) {
	type period struct{ first, next day }
	var periods []period
	if tf.unit == 'W' {
		for w := from - day((int(from.weekday())+6)%7); w <= to; w += 7 {
			periods = append(periods, period{w, w + 7})
		}
	} else {
		t := from.date()
		idx := (t.Year()*12 + int(t.Month()) - 1) / tf.n * tf.n
		for ; ; idx += tf.n {
			first := civilDay(idx/12, time.Month(idx%12+1), 1)
			if first > to {
				break
			}
			periods = append(periods, period{first, civilDay((idx+tf.n)/12, time.Month((idx+tf.n)%12+1), 1)})
		}
	}
	if !asc {
		slices.Reverse(periods)
	}
	for _, p := range periods {
		if t := p.first.midnight(); t.Before(start) || t.After(end) {
			continue
		}
		var agg barAgg
		for d := p.first; d < p.next; d++ {
			if m, ok := mk.model(e, d); ok {
				if b, ok := m.daily(f, now); ok {
					agg.add(b)
				}
			}
		}
		if b, ok := agg.bar(); ok {
			b.t = p.first.midnight()
			if !visit(b) {
				return
			}
		}
	}
}

// barJSON is the documented bar object ([docs-ref] stockbarsingle-1).
type barJSON struct {
	T  string  `json:"t"`
	O  float64 `json:"o"`
	H  float64 `json:"h"`
	L  float64 `json:"l"`
	C  float64 `json:"c"`
	V  int64   `json:"v"`
	N  int64   `json:"n"`
	VW float64 `json:"vw"`
}

func (b stockBar) json() barJSON {
	return barJSON{T: b.t.UTC().Format(time.RFC3339Nano), O: b.o, H: b.h, L: b.l, C: b.c, V: b.v, N: b.n, VW: b.vw}
}

// barsRequest is a parsed bars query.
type barsRequest struct {
	symbols    []string // sorted, unique
	tf         timeframe
	feed       feedKind
	noTrades   bool // otc, boats: documented feeds the simulator has no trades on
	start, end time.Time
	asOf       time.Time // the data's "now": 15 minutes ago for the free plan's SIP
	limit      int
	asc        bool
	token      *pageToken
}

type pageToken struct {
	symbol string
	t      time.Time
}

var symbolPattern = regexp.MustCompile(`^[A-Z][A-Z0-9.]{0,15}$`)

// parseSymbols reads a comma list. Symbols are upper case; any other
// shape is refused 400 (chosen). Unknown symbols are no error: they have
// no data, and Alpaca leaves symbols without data out of the response.
func parseSymbols(v string) ([]string, *alpacaError) {
	if strings.TrimSpace(v) == "" {
		return nil, errUnprocessable("missing symbols")
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if !symbolPattern.MatchString(s) {
			return nil, errBadRequest("invalid symbol: " + s)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// feed resolves the feed parameter: iex, sip, otc or boats; the default
// is iex on the free plan and sip on the paid one ([docs-md]
// historical.md: "Default is iex for free plans and sip for paid").
func (a *alpacaSim) feed(v string) (f feedKind, noTrades bool, aerr *alpacaError) {
	switch v {
	case "":
		if a.cfg.Plan == AlpacaPaid {
			return feedSIP, false, nil
		}
		return feedIEX, false, nil
	case "iex":
		return feedIEX, false, nil
	case "sip":
		return feedSIP, false, nil
	case "otc", "boats":
		if a.cfg.Plan != AlpacaPaid { // "sip and otc are only available to those with a subscription"
			return 0, false, &alpacaError{status: http.StatusForbidden, Code: 40310000, Message: "subscription does not permit querying " + v + " data"}
		}
		return feedSIP, true, nil
	}
	return 0, false, errBadRequest("invalid feed: " + v)
}

// barsRequest parses the documented parameters ([docs-ref]
// stockbarsingle-1): timeframe (required), start (default: New York's
// midnight today), end (default: now), limit (1 to 10,000, default
// 1,000), sort (asc, desc), feed, adjustment (accepted; no corporate
// actions are simulated), asof and currency (accepted, ignored),
// page_token. A missing required parameter is 422 and a bad value 400
// ([docs-md] historical.md: "400 Invalid value for query parameter",
// "422 Invalid query parameter"). On the free plan SIP data ends 15
// minutes ago: that is the default end, and a later end is refused 403
// ([docs-ref]: "Default: … otherwise 15 minutes before the current time";
// [docs-faq]).
func (a *alpacaSim) barsRequest(q url.Values, symbols []string) (barsRequest, *alpacaError) {
	req := barsRequest{symbols: symbols, limit: 1000, asc: true}
	var ok bool
	if q.Get("timeframe") == "" {
		return req, errUnprocessable("missing timeframe")
	}
	if req.tf, ok = parseTimeframe(q.Get("timeframe")); !ok {
		return req, errBadRequest("invalid timeframe: " + q.Get("timeframe"))
	}
	var aerr *alpacaError
	if req.feed, req.noTrades, aerr = a.feed(q.Get("feed")); aerr != nil {
		return req, aerr
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return req, errBadRequest("invalid limit: " + v + " (1 to 10000)")
		}
		req.limit = n
	}
	switch q.Get("sort") {
	case "", "asc":
	case "desc":
		req.asc = false
	default:
		return req, errBadRequest("invalid sort: " + q.Get("sort"))
	}
	if v := q.Get("adjustment"); v != "" {
		for _, p := range strings.Split(v, ",") {
			if !slices.Contains([]string{"raw", "split", "dividend", "spin-off", "all"}, p) {
				return req, errBadRequest("invalid adjustment: " + v)
			}
		}
	}
	now := a.now()
	delayed := req.feed == feedSIP && a.cfg.Plan != AlpacaPaid
	latest := now
	if delayed {
		latest = now.Add(-15 * time.Minute)
	}
	req.start, req.end, req.asOf = earliest(dayOf(now).midnight(), latest), latest, latest
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"start", &req.start}, {"end", &req.end}} {
		if v := q.Get(p.name); v != "" {
			t, ok := parseAlpacaTime(v)
			if !ok {
				return req, errBadRequest("invalid " + p.name + ": " + v)
			}
			*p.dst = t
		}
	}
	if delayed && req.end.After(latest) {
		return req, errRecentSIP
	}
	if req.end.Before(req.start) {
		return req, errBadRequest("end is before start")
	}
	if v := q.Get("page_token"); v != "" {
		tok, ok := decodePageToken(v)
		if !ok || !slices.Contains(symbols, tok.symbol) {
			return req, errBadRequest("invalid page_token")
		}
		req.token = &tok
	}
	return req, nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latestOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func encodePageToken(symbol string, tf timeframe, t time.Time) string {
	return base64.StdEncoding.EncodeToString([]byte(symbol + "|" + tf.tokenUnit() + "|" + t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")))
}

func decodePageToken(s string) (pageToken, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return pageToken{}, false
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return pageToken{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, parts[2])
	if err != nil {
		return pageToken{}, false
	}
	return pageToken{symbol: parts[0], t: t}, true
}

// barPage is one page: bars by symbol and the token of the next page.
type barPage struct {
	bars map[string][]barJSON
	next *string
}

// page collects up to limit bars counted across every symbol, sorted by
// symbol first, then by timestamp ("Returned results are sorted by symbol
// first then by Bar timestamp", [docs-md] oas/data/openapi.yaml; "The
// limit applies to the total number of data points, not per symbol!",
// [docs-ref] stockbarsingle-1). A page token resumes after the last bar
// it names.
func (a *alpacaSim) page(req barsRequest) barPage {
	p := barPage{bars: map[string][]barJSON{}}
	if req.noTrades {
		return p
	}
	now := req.asOf // a day bar of the free plan's SIP must not hold the last 15 minutes either
	i0 := 0
	if req.token != nil {
		i0 = slices.Index(req.symbols, req.token.symbol)
	}
	count, more := 0, false
	var lastSym string
	var lastT time.Time
	for i := i0; i < len(req.symbols) && !more; i++ {
		e, ok := a.universe.bySymbol[req.symbols[i]]
		if !ok {
			continue
		}
		start, end := req.start, req.end
		if i == i0 && req.token != nil {
			switch t := req.token.t; {
			case req.asc && req.tf.intraday():
				start = latestOf(start, req.tf.bucketEnd(t))
			case req.asc:
				start = latestOf(start, t.Add(time.Nanosecond))
			case req.tf.intraday():
				end = earliest(end, req.tf.bucketStart(t).Add(-time.Nanosecond))
			default:
				end = earliest(end, t.Add(-time.Nanosecond))
			}
		}
		sym := req.symbols[i]
		a.market.bars(e, req.tf, req.feed, start, end, now, req.asc, func(b stockBar) bool {
			if count == req.limit {
				more = true
				return false
			}
			p.bars[sym] = append(p.bars[sym], b.json())
			count++
			lastSym, lastT = sym, b.t
			return true
		})
	}
	if more {
		tok := encodePageToken(lastSym, req.tf, lastT)
		p.next = &tok
	}
	return p
}

// multiBars serves GET /v2/stocks/bars.
func (a *alpacaSim) multiBars(r *http.Request) (any, *alpacaError) {
	q := r.URL.Query()
	symbols, aerr := parseSymbols(q.Get("symbols"))
	if aerr != nil {
		return nil, aerr
	}
	req, aerr := a.barsRequest(q, symbols)
	if aerr != nil {
		return nil, aerr
	}
	p := a.page(req)
	return map[string]any{"bars": p.bars, "next_page_token": p.next}, nil
}

// singleBars serves GET /v2/stocks/{symbol}/bars: the same bars as a
// list, with the symbol ("bars": null when there are none, chosen).
func (a *alpacaSim) singleBars(r *http.Request) (any, *alpacaError) {
	symbols, aerr := parseSymbols(r.PathValue("symbol"))
	if aerr != nil {
		return nil, aerr
	}
	req, aerr := a.barsRequest(r.URL.Query(), symbols)
	if aerr != nil {
		return nil, aerr
	}
	p := a.page(req)
	return map[string]any{"bars": p.bars[symbols[0]], "symbol": symbols[0], "next_page_token": p.next}, nil
}

// latestFeed resolves the feed of the latest-data endpoints: SIP's
// latest data is "recent" by definition, so the free plan is refused it.
func (a *alpacaSim) latestFeed(q url.Values) (feedKind, bool, *alpacaError) {
	f, noTrades, aerr := a.feed(q.Get("feed"))
	if aerr == nil && f == feedSIP && a.cfg.Plan != AlpacaPaid {
		return 0, false, errRecentSIP
	}
	return f, noTrades, aerr
}

// latestBars serves GET /v2/stocks/bars/latest: each symbol's last
// closed minute bar.
func (a *alpacaSim) latestBars(r *http.Request) (any, *alpacaError) {
	q := r.URL.Query()
	symbols, aerr := parseSymbols(q.Get("symbols"))
	if aerr != nil {
		return nil, aerr
	}
	f, noTrades, aerr := a.latestFeed(q)
	if aerr != nil {
		return nil, aerr
	}
	out := map[string]barJSON{}
	now := a.now()
	for _, s := range symbols {
		if e, ok := a.universe.bySymbol[s]; ok && !noTrades {
			if b, _, ok := a.market.latest(e, f, now); ok {
				out[s] = b.json()
			}
		}
	}
	return map[string]any{"bars": out}, nil
}

// latest is e's last closed minute bar on f at now, searching back over
// the last trading days, and that day's model.
func (mk *stockMarket) latest(e *equity, f feedKind, now time.Time) (stockBar, *dayModel, bool) {
	for d, n := dayOf(now), 0; n < 20 && d >= dataStart; d, n = d-1, n+1 {
		if m, ok := mk.model(e, d); ok {
			if b, ok := m.latestMinute(f, now); ok {
				return b, m, true
			}
		}
	}
	return stockBar{}, nil, false
}

// tradeJSON and quoteJSON are the documented trade and quote objects
// ([docs-md] historical.md, "Trade", "Quote").
type tradeJSON struct {
	T string   `json:"t"`
	X string   `json:"x"`
	P float64  `json:"p"`
	S int64    `json:"s"`
	C []string `json:"c"`
	I int64    `json:"i"`
	Z string   `json:"z"`
}

type quoteJSON struct {
	T  string   `json:"t"`
	AX string   `json:"ax"`
	AP float64  `json:"ap"`
	AS int64    `json:"as"`
	BX string   `json:"bx"`
	BP float64  `json:"bp"`
	BS int64    `json:"bs"`
	C  []string `json:"c"`
	Z  string   `json:"z"`
}

// snapshotJSON is the documented snapshot ([docs-md] historical.md,
// "Snapshot"): the latest trade and quote, the latest minute bar, the
// day's bar and the previous day's.
type snapshotJSON struct {
	Symbol       string     `json:"symbol,omitempty"`
	LatestTrade  *tradeJSON `json:"latestTrade"`
	LatestQuote  *quoteJSON `json:"latestQuote"`
	MinuteBar    *barJSON   `json:"minuteBar"`
	DailyBar     *barJSON   `json:"dailyBar"`
	PrevDailyBar *barJSON   `json:"prevDailyBar"`
}

// venue is a trade's exchange code and tape ([docs-md] market-data
// _index.md "Exchanges": Q Nasdaq, N NYSE, P NYSE Arca, Z Cboe BZX,
// A NYSE American, V IEX, D FINRA ADF; tape A NYSE, B other exchanges'
// listings, C Nasdaq). Every SIP trade is printed on the listing
// exchange (chosen); IEX's are V.
func venue(e *equity, f feedKind) (x, z string) {
	switch e.asset.Exchange {
	case "NASDAQ":
		x, z = "Q", "C"
	case "NYSE":
		x, z = "N", "A"
	case "BATS":
		x, z = "Z", "B"
	case "AMEX":
		x, z = "A", "B"
	case "OTC":
		x, z = "D", "O"
	default:
		x, z = "P", "B"
	}
	if f == feedIEX {
		x = "V"
	}
	return x, z
}

// lastTrade is minute bar b's last trade: at its close, inside the minute.
func lastTrade(e *equity, f feedKind, b stockBar) (tradeJSON, time.Time) {
	h := mix(e.seed, uint64(b.t.Unix()))
	t := b.t.Add(time.Duration(h % uint64(59*time.Second)))
	x, z := venue(e, f)
	return tradeJSON{T: t.UTC().Format(time.RFC3339Nano), X: x, P: b.c, S: int64(1 + h>>40%300), C: []string{"@"},
		I: int64(h >> 20 % 1e12), Z: z}, t
}

// quoteAt is the quote standing after trade price p at t: a spread of
// 5 basis points, at least a cent.
func quoteAt(e *equity, f feedKind, p float64, t time.Time) quoteJSON {
	half := max(p*0.00025, 0.005)
	x, z := venue(e, f)
	h := mix(e.seed, uint64(t.UnixNano()))
	bid, ask := roundPrice(p-half), roundPrice(p+half)
	if ask <= bid {
		ask = bid + 0.01
	}
	return quoteJSON{T: t.Add(time.Millisecond).UTC().Format(time.RFC3339Nano), AX: x, AP: ask, AS: int64(1 + h%9),
		BX: x, BP: bid, BS: int64(1 + h>>8%9), C: []string{"R"}, Z: z}
}

// snapshotOf is e's snapshot at now, or false when it has no recent data.
func (a *alpacaSim) snapshotOf(e *equity, f feedKind, now time.Time) (snapshotJSON, bool) {
	minute, m, ok := a.market.latest(e, f, now)
	if !ok {
		return snapshotJSON{}, false
	}
	trade, at := lastTrade(e, f, minute)
	quote := quoteAt(e, f, minute.c, at)
	mb := minute.json()
	s := snapshotJSON{LatestTrade: &trade, LatestQuote: &quote, MinuteBar: &mb}
	// The day bar: today's once its session has begun, else the last one.
	d := m.d
	if today, ok := a.market.model(e, dayOf(now)); ok {
		if _, ok := today.daily(f, now); ok {
			d = today.d
		}
	}
	var days []barJSON
	for n := 0; len(days) < 2 && n < 20 && d >= dataStart; n, d = n+1, d-1 {
		if dm, ok := a.market.model(e, d); ok {
			if b, ok := dm.daily(f, now); ok {
				days = append(days, b.json())
			}
		}
	}
	if len(days) > 0 {
		s.DailyBar = &days[0]
	}
	if len(days) > 1 {
		s.PrevDailyBar = &days[1]
	}
	return s, true
}

// snapshots serves GET /v2/stocks/snapshots: a map of symbol to snapshot;
// symbols without data are left out (chosen).
func (a *alpacaSim) snapshots(r *http.Request) (any, *alpacaError) {
	q := r.URL.Query()
	symbols, aerr := parseSymbols(q.Get("symbols"))
	if aerr != nil {
		return nil, aerr
	}
	f, noTrades, aerr := a.latestFeed(q)
	if aerr != nil {
		return nil, aerr
	}
	out := map[string]snapshotJSON{}
	now := a.now()
	for _, sym := range symbols {
		if e, ok := a.universe.bySymbol[sym]; ok && !noTrades {
			if s, ok := a.snapshotOf(e, f, now); ok {
				out[sym] = s
			}
		}
	}
	return out, nil
}

// snapshot serves GET /v2/stocks/{symbol}/snapshot; 404 without data.
func (a *alpacaSim) snapshot(r *http.Request) (any, *alpacaError) {
	symbols, aerr := parseSymbols(r.PathValue("symbol"))
	if aerr != nil {
		return nil, aerr
	}
	f, noTrades, aerr := a.latestFeed(r.URL.Query())
	if aerr != nil {
		return nil, aerr
	}
	if e, ok := a.universe.bySymbol[symbols[0]]; ok && !noTrades {
		if s, ok := a.snapshotOf(e, f, a.now()); ok {
			s.Symbol = symbols[0]
			return s, nil
		}
	}
	return nil, errNotFound("not found")
}

// StockBarCounts counts each symbol's bars on a feed ("iex" or "sip") at
// a timeframe (Alpaca's grammar: "4Hour", "1Min") from start to end (zero:
// the feed's latest), as GET /v2/stocks/bars serves them page after page,
// outside every key's budget and counters: what a test or a benchmark
// checks a deployment against.
func (s *Sim) StockBarCounts(feed, timeframe string, symbols []string, start, end time.Time) (map[string]int, error) {
	symbols = slices.Compact(slices.Sorted(slices.Values(symbols)))
	q := url.Values{"feed": {feed}, "timeframe": {timeframe}, "limit": {"10000"}, "start": {start.UTC().Format(time.RFC3339Nano)}}
	if !end.IsZero() {
		q.Set("end", end.UTC().Format(time.RFC3339Nano))
	}
	req, aerr := s.alpaca.barsRequest(q, symbols)
	if aerr != nil {
		return nil, fmt.Errorf("stock bars: %d %s", aerr.status, aerr.Message)
	}
	out := map[string]int{}
	for {
		p := s.alpaca.page(req)
		for sym, bs := range p.bars {
			out[sym] += len(bs)
		}
		if p.next == nil {
			return out, nil
		}
		tok, _ := decodePageToken(*p.next)
		req.token = &tok
	}
}
