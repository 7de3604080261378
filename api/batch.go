package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
)

// Batch reads: symbols=A,B,C narrows the screener and the analytics list
// to those instruments, and GET /analytics/reports returns many reports
// in one call. A batch is one HTTP request, so the gate counts it once
// against the rate limit and the quota.

// maxBatchSymbols bounds symbols= and the batch report read.
const maxBatchSymbols = 50

// SymbolsParam narrows an answer to some symbols.
type SymbolsParam struct {
	Symbols OptionalParam[string] `query:"symbols" maxLength:"2100" doc:"Only these symbols: up to 50, comma-separated, in any symbol form (BTC_USDT, btc_usdt, BTC/USDT, BTC%2FUSDT; a ticker for stocks). Symbols that are not found are named in X-Unknown-Symbols, not refused; an empty list, an empty entry, a malformed symbol or more than 50 entries is 400" example:"BTC_USDT,eth/usdt,SOL_USDT"`
}

// Resolve notices an empty symbols= (huma reports an empty value as
// absent), so that it is refused rather than ignored.
func (p *SymbolsParam) Resolve(ctx huma.Context) []error {
	if p.Symbols.IsSet {
		return nil
	}
	if raw := ctx.URL().RawQuery; strings.Contains(raw, "symbols") {
		if q, _ := url.ParseQuery(raw); q.Has("symbols") {
			p.Symbols.IsSet = true
		}
	}
	return nil
}

// symbolSet is the requested symbols, canonical, in request order without
// duplicates. A nil set means "every symbol".
type symbolSet struct {
	list []string
	in   map[string]bool
}

// parseSymbols reads symbols= for market m: nil when absent.
func parseSymbols(m domain.Market, p OptionalParam[string]) (*symbolSet, error) {
	if !p.IsSet {
		return nil, nil
	}
	return parseSymbolList(m, "query.symbols", p.Value)
}

func parseSymbolList(m domain.Market, loc, raw string) (*symbolSet, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, domain.Invalid(loc, raw, "must list 1 to %d symbols, comma-separated", maxBatchSymbols)
	}
	parts := strings.Split(raw, ",")
	if len(parts) > maxBatchSymbols {
		return nil, domain.Invalid(loc, raw, "lists %d symbols; at most %d per request", len(parts), maxBatchSymbols)
	}
	set := &symbolSet{list: make([]string, 0, len(parts)), in: make(map[string]bool, len(parts))}
	for i, part := range parts {
		sym, ok := domain.NormalizeSymbol(m, part)
		if !ok {
			form := "BASE_QUOTE such as BTC_USDT or EUR_USD (BTC/USDT also accepted)"
			if m == domain.Stocks {
				form = "a ticker such as AAPL"
			}
			if strings.TrimSpace(part) == "" {
				return nil, domain.Invalid(loc, raw, "entry %d is empty; list symbols separated by single commas", i+1)
			}
			return nil, domain.Invalid(loc, part, "entry %d is not a %s symbol: must be %s", i+1, m, form)
		}
		if !set.in[sym] {
			set.in[sym] = true
			set.list = append(set.list, sym)
		}
	}
	return set, nil
}

// has reports whether sym is requested (always, for a nil set).
func (s *symbolSet) has(sym string) bool { return s == nil || s.in[sym] }

// foundTracker records which requested symbols an answer had.
type foundTracker struct {
	set  *symbolSet
	seen map[string]bool
}

func (s *symbolSet) tracker() *foundTracker {
	if s == nil {
		return &foundTracker{}
	}
	return &foundTracker{set: s, seen: make(map[string]bool, len(s.list))}
}

func (f *foundTracker) see(sym string) {
	if f.seen != nil {
		f.seen[sym] = true
	}
}

// unknown is the requested symbols not seen, comma-separated in request
// order ("" when none).
func (f *foundTracker) unknown() string {
	if f.set == nil {
		return ""
	}
	var b strings.Builder
	for _, sym := range f.set.list {
		if !f.seen[sym] {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(sym)
		}
	}
	return b.String()
}

// BatchReports is the answer of GET /analytics/reports.
type BatchReports struct {
	Market         domain.Market     `json:"market" example:"crypto"`
	Style          analytics.Style   `json:"style" doc:"The style the reports were computed for (always swing outside crypto)" example:"swing"`
	Lang           analytics.Lang    `json:"lang" example:"en"`
	Reports        []AnalyticsReport `json:"reports" doc:"One full report per scored symbol, in the order requested (duplicates once), each exactly as GET /analytics/{market}/{symbol} returns it"`
	UnknownSymbols []string          `json:"unknown_symbols" doc:"Requested symbols without analytics on this market, in the order requested; empty when all were found" example:"[\"FOO_USDT\"]"`
}

type batchReportsInput struct {
	Market  domain.Market `query:"market" required:"true" doc:"Market of the symbols" example:"crypto"`
	Symbols string        `query:"symbols" required:"true" maxLength:"2100" doc:"Up to 50 symbols, comma-separated, in any symbol form (BTC_USDT, btc_usdt, BTC/USDT, BTC%2FUSDT; a ticker for stocks). Symbols without analytics are listed in unknown_symbols, not refused; an empty list, an empty entry, a malformed symbol or more than 50 entries is 400" example:"BTC_USDT,ETH_USDT,sol/usdt"`
	StyleParam
	Lang analytics.Lang `query:"lang" default:"ru" doc:"Language of the summaries, factor explanations and scenario texts"`
	ConditionalParams
}

func (s *Server) registerBatch() {
	register(s, huma.Operation{
		OperationID: "get-analytics-reports",
		Summary:     "Analytics reports of up to 50 assets in one call",
		Description: "The full report of each requested symbol (as GET /analytics/{market}/{symbol} with the same `style` and `lang`), in the order requested. " +
			"Counts as one request against the rate limit and the quota, however many symbols it names. " +
			"Symbols without analytics are listed in `unknown_symbols` instead of failing the call. " +
			"The market is a query parameter because this path must never be read as a symbol: under /analytics/{market}/ any segment other than list, stats and factor-stats is a symbol (a stock ticker may be any word), while the segment after /analytics/ is a market, top-setups or methodology.",
		Tags: []string{tagAnalytics}, Errors: errorResponses(),
		Responses: s.dataResponses(BatchReports{}, "The reports found and the symbols not found"),
	}, s.getBatchReports)
	s.documentUnknownSymbols()
	s.humaAPI.OpenAPI().Info.Description += readsDescription
}

// readsDescription is the docs page's section on batch and conditional reads.
const readsDescription = `
## Batch reads

` + "`symbols=BTC_USDT,ETH/USDT,…`" + ` (up to 50, any symbol form) narrows the screener and ` + "`GET /analytics/{market}/list`" + ` to those
instruments; the ones not found are named in the ` + "`X-Unknown-Symbols`" + ` response header. ` + "`GET /analytics/reports?market=…&symbols=…`" + `
returns the full reports of up to 50 assets (` + "`style`" + ` and ` + "`lang`" + ` as for one report) and lists the symbols without analytics in
` + "`unknown_symbols`" + `. A batch is **one** request against the rate limit and the quota. More than 50 entries, an empty list or
entry, or a malformed symbol is 400 naming ` + "`symbols`" + `.

## Conditional requests

Every data GET (screener, OHLCV, analytics list, report, batch reports, history, stats, factor stats, top setups) answers with an
` + "`ETag`" + ` (weak, ` + "`W/\"…\"`" + `, when the body carries ` + "`data_age_seconds`" + `, which moves with the clock while the data and the tag stay the same), a ` + "`Last-Modified`" + ` and ` + "`Cache-Control: private, max-age=<seconds until the data's next scheduled refresh>`" + `.
Send the tag back in ` + "`If-None-Match`" + ` (or the date in ` + "`If-Modified-Since`" + `): while the data has not changed the answer is
**304 Not Modified** without a body. A 304 is admitted like any request: it counts against the rate limit and the quota.
` + "`/usage`" + ` and ` + "`/webhooks`" + ` answer ` + "`Cache-Control: no-store`" + `.
`

// documentUnknownSymbols keeps the X-Unknown-Symbols header (a field of
// every dataOutput) only in the documentation of the operations that can
// send it: those taking symbols= as a filter (the batch report read lists
// its unknown symbols in the body).
func (s *Server) documentUnknownSymbols() {
	for path, item := range s.humaAPI.OpenAPI().Paths {
		op := item.Get
		if op == nil || op.Responses["200"] == nil {
			continue
		}
		filters := path != "/analytics/reports"
		if filters {
			filters = false
			for _, p := range op.Parameters {
				filters = filters || (p.In == "query" && p.Name == "symbols")
			}
		}
		if !filters {
			delete(op.Responses["200"].Headers, "X-Unknown-Symbols")
		}
	}
}

func (s *Server) getBatchReports(ctx context.Context, in *batchReportsInput) (*dataOutput, error) {
	m := domain.Market(in.Market)
	wanted, err := parseSymbolList(m, "query.symbols", in.Symbols)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	st := analyticsStyle(m, in.Style)
	lang, _ := analytics.ParseLang(string(in.Lang))

	var unknown []string
	reports := make([]agedBody, 0, len(wanted.list))
	var modified time.Time
	for _, sym := range wanted.list {
		b, err := s.reportBody(ctx, m, st, sym, lang)
		if domain.ErrorCode(err) == domain.ENOTFOUND {
			unknown = append(unknown, sym)
			continue
		}
		if err != nil {
			return nil, s.problem(ctx, err)
		}
		reports = append(reports, b)
		if b.Modified.After(modified) {
			modified = b.Modified
		}
	}
	body, err := encodeBatch(m, st, lang, reports, unknown, s.now(ctx))
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	// The tag is derived from the reports' own tags (each computed once,
	// when its report was cached) and the envelope, which together
	// determine the body: no hash over up to 50 reports per request.
	tagged := make([][]byte, 0, len(reports)+2)
	tagged = append(tagged, []byte(string(m)+"|"+string(st)+"|"+string(lang)+"|"+strings.Join(unknown, ",")))
	aged := false
	for _, r := range reports {
		tagged = append(tagged, []byte(r.ETag))
		aged = aged || len(r.ages) > 0
	}
	b := readcache.NewBodyTagged(body, modified, tagged...)
	if aged {
		b.ETag = weakTag(b.ETag)
	}
	return s.respond(ctx, &in.ConditionalParams, b, freshScores), nil
}

// encodeBatch writes the BatchReports envelope around the cached report
// bodies with their ages as of now, so a batch costs no report encoding.
func encodeBatch(m domain.Market, st analytics.Style, lang analytics.Lang, reports []agedBody, unknown []string, now time.Time) ([]byte, error) {
	if unknown == nil {
		unknown = []string{}
	}
	unknownJSON, err := json.Marshal(unknown)
	if err != nil {
		return nil, err
	}
	n := 128 + len(unknownJSON)
	for _, r := range reports {
		n += len(r.Bytes) + 1 + 8*len(r.ages)
	}
	out := make([]byte, 0, n)
	out = append(out, `{"market":"`...)
	out = append(out, m...)
	out = append(out, `","style":"`...)
	out = append(out, st...)
	out = append(out, `","lang":"`...)
	out = append(out, lang...)
	out = append(out, `","reports":[`...)
	for i, r := range reports {
		if i > 0 {
			out = append(out, ',')
		}
		out = r.appendAt(out, now)
	}
	out = append(out, `],"unknown_symbols":`...)
	out = append(out, unknownJSON...)
	return append(out, '}'), nil
}
