package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/jsonenc"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/screen"
)

// POST /screener/query: a client's condition (package screen's language)
// over every precomputed report of a market, answered from an in-memory
// snapshot of the market (screensnapshot.go), not a database scan.

// The bounds and defaults of the query's body (the struct tags below write
// them once more; enums_test.go holds the document to them).
const (
	defaultQueryLimit   = 50
	maxQueryLimit       = 500
	defaultQueryOrderBy = "overall_score desc"
	maxQueryCursorLen   = 512
	maxQueryOrderByLen  = 128
)

// ScreenerQuery is the body of POST /screener/query.
type ScreenerQuery struct {
	Market  domain.Market   `json:"market" doc:"Market to screen; must be in your tier" example:"crypto"`
	Where   string          `json:"where,omitempty" required:"false" doc:"The condition, in the expression language of the operation's description (at most 2048 bytes); omitted or empty: every scored asset" example:"verdict == \"growth\" && factors.rsi_14.value < 40"`
	OrderBy string          `json:"order_by,omitempty" required:"false" maxLength:"128" doc:"A variable and a direction, asc or desc (default asc); nulls last either way, ties by symbol. Default: overall_score desc" example:"overall_score desc"`
	Limit   int             `json:"limit,omitempty" required:"false" minimum:"0" maximum:"500" doc:"Items per page, 1..500; default 50" example:"50"`
	Cursor  string          `json:"cursor,omitempty" required:"false" maxLength:"512" doc:"The next_cursor of the previous page; send the other fields unchanged"`
	Style   analytics.Style `json:"style,omitempty" required:"false" doc:"Style of the unprefixed report fields and of the items' overall_score and verdict (crypto; the other markets are scored in swing): scalp, intraday, swing (default), position" example:"swing"`
}

// ScreenerQueryItem documents one item of the answer: the fixed fields,
// then one field per variable the expression and order_by read, named as
// written ("factors.rsi_14.value", "swing.verdict"), null when missing.
type ScreenerQueryItem struct {
	Market       domain.Market     `json:"market" example:"crypto"`
	Exchange     string            `json:"exchange" doc:"Exchange whose candles were scored" example:"binance"`
	Instrument   string            `json:"instrument" doc:"Instrument of the scored candles" example:"spot"`
	Symbol       string            `json:"symbol" example:"BTC_USDT"`
	OverallScore int               `json:"overall_score" minimum:"-100" maximum:"100" doc:"Overall score in the query's style" example:"42"`
	Verdict      analytics.Verdict `json:"verdict" doc:"Verdict in the query's style" example:"growth"`
}

// ScreenerQueryPage documents the answer.
type ScreenerQueryPage struct {
	Items      []ScreenerQueryItem `json:"items" nullable:"false" doc:"The matching assets of this page, in order_by order. Each item also carries a field per variable the expression and order_by read, named as written (\"factors.rsi_14.value\": 28.4), null when the asset has no such value"`
	NextCursor *string             `json:"next_cursor" doc:"Send it back as cursor for the next page; null on the last page"`
}

type screenerQueryInput struct {
	Body ScreenerQuery
	ConditionalParams
}

func (s *Server) registerScreenerQuery() {
	resp := s.dataResponses(ScreenerQueryPage{}, "The matching assets")
	// Items carry the variables read beside the documented fields.
	if sch := s.humaAPI.OpenAPI().Components.Schemas.Map()["ScreenerQueryItem"]; sch != nil {
		sch.AdditionalProperties = true
	}
	register(s, huma.Operation{
		OperationID: "query-screener",
		Summary:     "Screen a market with your own condition",
		Description: screenQueryDescription(),
		Tags:        []string{tagAnalytics},
		Errors:      errorResponses(),
		Responses:   resp,
	}, s.queryScreener)
}

func (s *Server) queryScreener(ctx context.Context, in *screenerQueryInput) (*dataOutput, error) {
	q := &in.Body
	m := q.Market
	st := analyticsStyle(m, q.Style)
	limit := q.Limit
	if limit == 0 {
		limit = defaultQueryLimit
	}
	prg, err := s.screenProgram(m, st, q.Where)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	order, err := parseOrderBy(prg, q.OrderBy)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	tag := queryTag(m, st, q.Where, order.text)
	var after *orderKey
	if q.Cursor != "" {
		if after, err = decodeQueryCursor(q.Cursor, tag); err != nil {
			return nil, s.problem(ctx, err)
		}
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	snap, err := s.screens.get(ctx, s, m)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	pk := tag + "\x00" + q.Cursor + "\x00" + strconv.Itoa(limit)
	if body := s.pages.get(snap, pk); body != nil {
		return s.respond(ctx, &in.ConditionalParams, readcache.NewBody(body, snap.newest), freshScores), nil
	}
	page, err := runQuery(snap, prg, st, order, after, limit)
	if err != nil {
		if xe, ok := screen.IsExprError(err); ok {
			return nil, s.problem(ctx, domain.Invalid("body.where", q.Where, "%s", xe.Error()))
		}
		return nil, s.problem(ctx, err)
	}
	body, err := encodeQueryPage(snap, prg, st, order, page, tag, limit)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	s.pages.put(snap, pk, body)
	return s.respond(ctx, &in.ConditionalParams, readcache.NewBody(body, snap.newest), freshScores), nil
}

// screenPages keeps the answers of the queries run on a market's current
// snapshot: a page is a function of the snapshot and the request (market,
// style, expression, order, cursor, limit), whoever asks (the tier's
// markets are checked before), and clients poll the same screen until the
// next rescoring changes the snapshot. An answer is kept with the
// snapshot it was computed on and used only while that snapshot is the
// market's: a new snapshot makes every older page a miss.
type screenPages struct {
	mu sync.Mutex
	m  map[string]screenPage
}

type screenPage struct {
	snap *screenSnapshot
	body []byte
}

// maxCachedPages bounds the pages kept (all markets): past it the kept
// ones are dropped together.
const maxCachedPages = 512

func (c *screenPages) get(snap *screenSnapshot, key string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[key]; ok && p.snap == snap {
		return p.body
	}
	return nil
}

func (c *screenPages) put(snap *screenSnapshot, key string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedPages {
		c.m = make(map[string]screenPage)
	}
	c.m[key] = screenPage{snap: snap, body: body}
}

// screenPrograms caches compiled expressions: a client polls the same
// query, and compiling costs more than evaluating it over a market.
type screenPrograms struct {
	mu sync.RWMutex
	m  map[programKey]*screen.Program
}

type programKey struct {
	market domain.Market
	style  analytics.Style
	expr   string
}

const maxCachedPrograms = 1024

// screenProgram compiles where (every asset when blank) for m in style
// st, or names what is wrong with it (body.where).
func (s *Server) screenProgram(m domain.Market, st analytics.Style, where string) (*screen.Program, error) {
	if strings.TrimSpace(where) == "" {
		where = "true"
	}
	k := programKey{m, st, where}
	s.programs.mu.RLock()
	p := s.programs.m[k]
	s.programs.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	p, err := screen.CompileStyle(string(m), st, where)
	if err != nil {
		if xe, ok := screen.IsExprError(err); ok {
			return nil, domain.Invalid("body.where", where, "%s", describeExprError(xe))
		}
		return nil, domain.Invalid("body.market", m, "%s", err.Error())
	}
	s.programs.mu.Lock()
	if s.programs.m == nil || len(s.programs.m) >= maxCachedPrograms {
		s.programs.m = make(map[programKey]*screen.Program)
	}
	s.programs.m[k] = p
	s.programs.mu.Unlock()
	return p, nil
}

// describeExprError is the message of a refused expression, with where.
func describeExprError(xe *screen.ExprError) string {
	if xe.Line == 0 {
		return fmt.Sprintf("%s error: %s", xe.Kind, xe.Message)
	}
	return fmt.Sprintf("%s error at line %d, column %d (offset %d): %s", xe.Kind, xe.Line, xe.Column, xe.Offset, xe.Message)
}

// queryOrder is a parsed order_by: the variable and the direction.
type queryOrder struct {
	name string
	desc bool
	text string // canonical: "name asc" or "name desc"
}

func parseOrderBy(p *screen.Program, text string) (queryOrder, error) {
	raw := text
	if strings.TrimSpace(text) == "" {
		text = defaultQueryOrderBy
	}
	f := strings.Fields(text)
	bad := func(format string, args ...any) (queryOrder, error) {
		return queryOrder{}, domain.Invalid("body.order_by", raw, format, args...)
	}
	if len(f) > 2 {
		return bad("must be a variable and a direction (asc or desc), such as %q", defaultQueryOrderBy)
	}
	o := queryOrder{name: f[0]}
	if len(f) == 2 {
		switch strings.ToLower(f[1]) {
		case "asc":
		case "desc":
			o.desc = true
		default:
			return bad("the direction must be asc or desc, not %q", f[1])
		}
	}
	if _, ok := p.Field(o.name); !ok {
		return bad("%q is not a variable of %s (see the variables in the operation's description)", o.name, p.Market())
	}
	o.text = o.name + " asc"
	if o.desc {
		o.text = o.name + " desc"
	}
	return o, nil
}

// queryTag identifies a query (not its page): a cursor is only valid for
// the query it was made by.
func queryTag(m domain.Market, st analytics.Style, where, order string) string {
	h := sha256.Sum256([]byte(string(m) + "\x00" + string(st) + "\x00" + where + "\x00" + order))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

// orderKey is where an asset sorts: its order_by value, then its symbol.
type orderKey struct {
	null   bool
	isText bool
	num    float64
	text   string
	symbol string
}

// scalarKey is the key of an asset whose order_by value is v.
func scalarKey(v screen.Scalar, symbol string) orderKey {
	return orderKey{symbol: symbol, null: v.Null, isText: v.Text, num: v.Num, text: v.Str}
}

// compareKeys orders a before b: nulls last in either direction, ties by
// symbol ascending.
func compareKeys(a, b *orderKey, desc bool) int {
	if a.null != b.null {
		if a.null {
			return 1
		}
		return -1
	}
	if !a.null {
		var c int
		switch {
		case a.isText || b.isText:
			c = strings.Compare(a.text, b.text)
		case a.num < b.num:
			c = -1
		case a.num > b.num:
			c = 1
		}
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return strings.Compare(a.symbol, b.symbol)
}

// queryCursor is the wire form of a cursor: the query's tag and the key
// of the last item served.
type queryCursor struct {
	Tag    string   `json:"t"`
	Null   bool     `json:"n,omitempty"`
	Num    *float64 `json:"v,omitempty"`
	Text   *string  `json:"x,omitempty"`
	Symbol string   `json:"s"`
}

func encodeQueryCursor(k orderKey, tag string) string {
	c := queryCursor{Tag: tag, Null: k.null, Symbol: k.symbol}
	switch {
	case k.null:
	case k.isText:
		c.Text = &k.text
	default:
		c.Num = &k.num
	}
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeQueryCursor(text, tag string) (*orderKey, error) {
	bad := domain.Invalid("body.cursor", text, "not a cursor of this query: send the next_cursor of the previous page with the other fields unchanged")
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return nil, bad
	}
	var c queryCursor
	if err := json.Unmarshal(raw, &c); err != nil || c.Tag != tag || c.Symbol == "" {
		return nil, bad
	}
	k := &orderKey{null: c.Null, symbol: c.Symbol}
	switch {
	case c.Null:
	case c.Text != nil:
		k.isText, k.text = true, *c.Text
	case c.Num != nil:
		k.num = *c.Num
	default:
		return nil, bad
	}
	return k, nil
}

// queryHit is a matching asset and where it sorts.
type queryHit struct {
	asset *screen.Asset
	key   orderKey
}

// runQuery is the page of snap's assets scored in style st that match p,
// after the key after (from the start when nil), in order: at most limit
// of them, plus one more when there is a next page.
func runQuery(snap *screenSnapshot, p *screen.Program, st analytics.Style, o queryOrder, after *orderKey, limit int) ([]queryHit, error) {
	// The page is the limit+1 first hits in the order: kept in a heap
	// whose root is the last of them, so a pass costs O(n log limit) and
	// holds limit+1 hits, whatever the number of matches.
	k := limit + 1
	hits := make(queryHeap, 0, min(k, len(snap.assets)))
	less := func(x, y *orderKey) bool { return compareKeys(x, y, o.desc) < 0 }
	table := snap.table()
	value, ok := p.TableValues(table, o.name)
	if !ok {
		return nil, fmt.Errorf("api: order_by %q is not a variable of %s", o.name, p.Market())
	}
	err := p.MatchTable(table, table.Scored(st), func(i int) {
		a := snap.assets[i]
		key := scalarKey(value(i), a.Symbol)
		if after != nil && compareKeys(&key, after, o.desc) <= 0 {
			return
		}
		if len(hits) < k {
			hits = append(hits, queryHit{asset: a, key: key})
			hits.up(len(hits)-1, less)
		} else if less(&key, &hits[0].key) {
			hits[0] = queryHit{asset: a, key: key}
			hits.down(0, less)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(hits, func(x, y queryHit) int { return compareKeys(&x.key, &y.key, o.desc) })
	return hits, nil
}

// queryHeap is a max-heap of hits under less: the root is the last.
type queryHeap []queryHit

func (h queryHeap) up(i int, less func(x, y *orderKey) bool) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(&h[parent].key, &h[i].key) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (h queryHeap) down(i int, less func(x, y *orderKey) bool) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		big := l
		if r := l + 1; r < len(h) && less(&h[l].key, &h[r].key) {
			big = r
		}
		if !less(&h[i].key, &h[big].key) {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// encodeQueryPage writes the answer: each item's fixed fields, then the
// variables the expression and order_by read, sorted by name.
func encodeQueryPage(snap *screenSnapshot, p *screen.Program, st analytics.Style, o queryOrder, hits []queryHit, tag string, limit int) ([]byte, error) {
	var next *string
	if len(hits) > limit {
		hits = hits[:limit]
		c := encodeQueryCursor(hits[len(hits)-1].key, tag)
		next = &c
	}
	names := p.Variables()
	if !slices.Contains(names, o.name) {
		names = append(names, o.name)
		slices.Sort(names)
	}
	var extra []string
	for _, n := range names {
		switch n {
		case "market", "exchange", "symbol", "overall_score", "verdict":
		default:
			extra = append(extra, n)
		}
	}
	getters := make([]func(*screen.Asset) any, len(extra))
	keys := make([][]byte, len(extra))
	for i, n := range extra {
		getters[i], _ = p.Field(n)
		keys[i] = append(jsonenc.AppendString([]byte{','}, n), ':')
	}
	// Written as encoding/json writes ScreenerQueryItem and the values
	// (jsonenc; a value JSON cannot carry, such as a NaN price, is null).
	b := make([]byte, 0, 64+len(hits)*(160+32*len(extra)))
	b = append(b, `{"items":[`...)
	for i, h := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		a := h.asset
		r := a.Report(st)
		b = append(b, `{"market":`...)
		b = jsonenc.AppendString(b, string(a.Market))
		b = append(b, `,"exchange":`...)
		b = jsonenc.AppendString(b, a.Exchange)
		b = append(b, `,"instrument":`...)
		b = jsonenc.AppendString(b, a.Instrument)
		b = append(b, `,"symbol":`...)
		b = jsonenc.AppendString(b, a.Symbol)
		b = append(b, `,"overall_score":`...)
		b = strconv.AppendInt(b, int64(r.OverallScore), 10)
		b = append(b, `,"verdict":`...)
		b = jsonenc.AppendString(b, string(r.Verdict))
		for j := range extra {
			b = append(b, keys[j]...)
			b = jsonenc.AppendValue(b, getters[j](a))
		}
		b = append(b, '}')
	}
	b = append(b, `],"next_cursor":`...)
	if next == nil {
		b = append(b, "null"...)
	} else {
		b = jsonenc.AppendString(b, *next)
	}
	return append(b, '}'), nil
}

// screenQueryDescription documents the operation and the language: every
// variable with its type and an example.
func screenQueryDescription() string {
	var b strings.Builder
	b.WriteString("Every scored asset of `market` whose report satisfies `where`, in `order_by` order, a page at a time (`limit`, then `cursor` = the previous page's `next_cursor`). " +
		"Read-only over the precomputed reports (those of GET /analytics/{market}/list and /analytics/{market}/{symbol}, every style) and the screener rows (GET /screener/...): " +
		"the answer is what filtering those client-side gives, and follows new reports within seconds. One request counts as one call against your rate limit and quota. " +
		"Answers carry an ETag; If-None-Match with it is answered 304 while the answer has not changed (a read, like the data GETs).\n\n" +
		"**The language** is [CEL](https://cel.dev) (Common Expression Language): `&&`, `||`, `!`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `+ - * / %`, `in`, `? :`, parentheses, " +
		"string functions (`startsWith`, `endsWith`, `contains`, `matches` with RE2 syntax, `size`), and `[...]` lists with `.all(x, ...)` / `.exists(x, ...)`. " +
		"Numbers compare across int and double (`price > 100`). The expression must be a condition (true or false). It is type-checked: an unknown variable, a misspelt factor or comparing a number with a string is a 400 naming `body.where` with the line, column and offset and the compiler's message. " +
		"An expression longer than 2048 bytes, nested deeper than 32 levels, or whose estimated cost exceeds 1000 (about one unit per comparison) is a 400 too.\n\n" +
		"**Missing values.** Values that may be missing are null (`fundamental_score` without fundamental data, a factor the report lacks, `volume` without a screener row). `x != null` tests for one. " +
		"Equality with null is false; an ordering (`<`, `>`) or arithmetic on null does not match the asset (it is not an error of the request), and neither does a field of a crypto style the asset was not scored in. " +
		"`&&` and `||` decide when either side decides: `fundamental_score > 20 || overall_score > 50` matches an asset without fundamentals whose overall score is 60.\n\n" +
		"**Styles (crypto).** Every report field also exists under each style's name: `swing.verdict == \"growth\" && scalp.overall_score > 40`. An unprefixed report field is the request's `style` (default swing). " +
		"Only the assets scored in the request's style are screened. The other markets are scored in swing and have no prefixed names.\n\n" +
		"**Examples**\n\n" +
		"- `verdict == \"growth\" && factors.rsi_14.value < 40`: growth, not yet overbought\n" +
		"- `factors.rsi_14.value < 30 && swing.verdict == \"growth\"` (crypto): oversold on the request's style, growth on swing\n" +
		"- `swing.verdict == \"growth\" && scalp.overall_score > 40 && volume > 5e7`: aligned across horizons, liquid\n" +
		"- `fundamental_score != null && fundamental_score > 30 && technical_score > 0`\n" +
		"- `factors.macd_12_26_9.sentiment == \"bullish\" && factors.adx_14.value > 25`: trend confirmed\n" +
		"- `price > scenario.resistance`: breaking out\n" +
		"- `symbol.endsWith(\"_USDT\") && change_pct < -5 && verdict != \"decline\"`\n\n" +
		"**Variables**\n\n| Name | Type | Meaning | Example |\n|---|---|---|---|\n")
	for _, v := range screen.Documented() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` |\n", v.Name, v.Type, v.Doc, strings.ReplaceAll(v.Example, "|", "\\|"))
	}
	b.WriteString("\n`factors.<name>.*` exists for every factor name: " + "`" + strings.Join(analytics.FactorNames, "`, `") + "`" +
		" (the fields shown for rsi_14). In crypto each report field also exists as `scalp.…`, `intraday.…`, `swing.…`, `position.…`.\n\n" +
		"**Items** carry `market`, `exchange`, `instrument`, `symbol`, `overall_score` and `verdict` (in the request's style), then one field per variable the expression and `order_by` read, named as written, null when missing.")
	return b.String()
}
