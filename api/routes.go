package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/webhook"
)

// route is one public operation as the mux routes it: its id, method and
// path under BasePath (a ServeMux pattern, which huma documents too), its
// time budget, and for the hottest GETs a hand-written decoder of their
// inputs. Every request to it goes through the same pipeline
// (pipeline.go); the decoder only spares huma's reflection over the
// inputs and outputs of requests it can take as they are.
type route struct {
	id, method, path string
	// budget is the request's time budget: 0 the configured one
	// (Config.RequestTimeout), negative none (a stream lasts as long as
	// its client keeps it), positive at least this much.
	budget time.Duration
	hot    hotRoute
}

// routes is every public operation. huma registers each under its method
// and path (register), and the mux routes each pattern to the pipeline
// (routeAdapter).
var routes = []route{
	{id: "get-usage", method: http.MethodGet, path: "/usage", hot: hotUsage},
	{id: "query-screener", method: http.MethodPost, path: "/screener/query"},
	{id: "get-screener", method: http.MethodGet, path: "/screener/{market_type}/{exchange}/{instrument}", hot: hotScreener},
	{id: "get-ohlcv", method: http.MethodGet, path: "/ohlcv/{market_type}/{exchange}/{symbol}/{timeframe}", hot: hotOHLCV},
	{id: "get-ohlcv-slash-symbol", method: http.MethodGet, path: "/ohlcv/{market_type}/{exchange}/{base}/{quote}/{timeframe}"},
	{id: "get-analytics-top-setups", method: http.MethodGet, path: "/analytics/top-setups"},
	{id: "get-analytics-reports", method: http.MethodGet, path: "/analytics/reports"},
	{id: "get-analytics-methodology", method: http.MethodGet, path: "/analytics/methodology"},
	{id: "get-analytics-list", method: http.MethodGet, path: "/analytics/{market}/list"},
	{id: "get-analytics-stats", method: http.MethodGet, path: "/analytics/{market}/stats"},
	{id: "get-analytics-factor-stats", method: http.MethodGet, path: "/analytics/{market}/factor-stats"},
	{id: "get-analytics-report", method: http.MethodGet, path: "/analytics/{market}/{symbol}", hot: hotReport},
	{id: "get-analytics-history", method: http.MethodGet, path: "/analytics/{market}/{symbol}/history"},
	{id: "create-webhook", method: http.MethodPost, path: "/webhooks"},
	{id: "list-webhooks", method: http.MethodGet, path: "/webhooks"},
	{id: "delete-webhook", method: http.MethodDelete, path: "/webhooks/{id}"},
	{id: "list-webhook-deliveries", method: http.MethodGet, path: "/webhooks/{id}/deliveries"},
	{id: "redeliver-webhook", method: http.MethodPost, path: "/webhooks/{id}/deliveries/{delivery_id}/redeliver"},
	// A test ping waits for the subscriber's answer.
	{id: "test-webhook", method: http.MethodPost, path: "/webhooks/{id}/test", budget: webhook.Timeout + DefaultRequestTimeout},
	{id: "enable-webhook", method: http.MethodPost, path: "/webhooks/{id}/enable"},
	{id: "rotate-webhook-secret", method: http.MethodPost, path: "/webhooks/{id}/rotate-secret"},
	{id: "create-alert", method: http.MethodPost, path: "/alerts"},
	{id: "list-alerts", method: http.MethodGet, path: "/alerts"},
	{id: "get-alert", method: http.MethodGet, path: "/alerts/{id}"},
	{id: "delete-alert", method: http.MethodDelete, path: "/alerts/{id}"},
	{id: "get-stream", method: http.MethodGet, path: "/stream", budget: -1},
	{id: "post-sandbox-verdict-change", method: http.MethodPost, path: "/sandbox/verdict-change"},
}

// register registers an operation with huma under the method and path of
// its route (op.OperationID).
func register[I, O any](s *Server, op huma.Operation, handler func(context.Context, *I) (*O, error)) {
	rt := routeByID(op.OperationID)
	op.Method, op.Path = rt.method, rt.path
	huma.Register(s.humaAPI, op, handler)
}

func routeByID(id string) *route {
	for i := range routes {
		if routes[i].id == id {
			return &routes[i]
		}
	}
	panic("api: no route " + id)
}

// routeAdapter is huma's adapter: it puts each operation huma registers
// on the mux behind the pipeline, with huma's handler as its last step.
type routeAdapter struct{ s *Server }

func (a routeAdapter) Handle(op *huma.Operation, handler func(huma.Context)) {
	b := &boundRoute{route: *routeByID(op.OperationID), s: a.s, op: op, huma: handler}
	a.s.mux.Handle(b.method+" "+BasePath+b.path, b)
}

func (a routeAdapter) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.s.mux.ServeHTTP(w, r) }

// hotRoute decodes a hot GET's inputs by hand, runs its operation and
// encodes its answer exactly as huma would. It reports served false,
// before writing anything, for inputs its decoder does not take as they
// are (an unknown or repeated parameter, a value to validate): huma
// decodes those, and answers what is wrong with them. The operation's
// error is the pipeline's to write, with huma's error writer. Each is a
// plain function calling its operation directly, so that the input stays
// on the stack. A route counts what it takes (hotDecoded) before it
// answers, so a client that has its answer sees the count.
type hotRoute func(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo) (served bool, err error)

func hotUsage(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, _ *requestInfo) (bool, error) {
	if r.URL.RawQuery != "" {
		return false, nil
	}
	s.hotDecoded.Add(1)
	body, err := s.usageBody(ctx)
	if err == nil {
		h := w.Header()
		h["Content-Type"] = jsonContentTypeValue
		h["Cache-Control"] = noStoreValue
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}
	return true, err
}

func hotScreener(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo) (bool, error) {
	var in screenerInput
	if !decodeScreener(r, &in) {
		return false, nil
	}
	s.hotDecoded.Add(1)
	out, err := s.getScreener(ctx, &in)
	if err == nil {
		encodeData(w, out, ri)
	}
	return true, err
}

func hotOHLCV(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo) (bool, error) {
	var in ohlcvInput
	if !decodeOHLCV(r, &in) {
		return false, nil
	}
	s.hotDecoded.Add(1)
	out, err := s.getOHLCV(ctx, &in)
	if err == nil {
		encodeData(w, out, ri)
	}
	return true, err
}

func hotReport(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo) (bool, error) {
	var in reportInput
	if !decodeReport(r, &in) {
		return false, nil
	}
	s.hotDecoded.Add(1)
	out, err := s.getAnalyticsReport(ctx, &in)
	if err == nil {
		encodeData(w, out, ri)
	}
	return true, err
}

func decodeScreener(r *http.Request, in *screenerInput) bool {
	in.Instrument = r.PathValue("instrument")
	return r.URL.RawQuery == "" && len(in.Instrument) <= maxInstrumentLen &&
		decodeMarketPath(r, &in.MarketPath) && decodeConditional(r, &in.ConditionalParams)
}

func decodeOHLCV(r *http.Request, in *ohlcvInput) bool {
	in.Symbol = r.PathValue("symbol")
	tf, ok := domain.ParseTimeframe(r.PathValue("timeframe"))
	if !ok || len(in.Symbol) > maxSymbolLen || !decodeMarketPath(r, &in.MarketPath) || !decodeConditional(r, &in.ConditionalParams) {
		return false
	}
	in.Timeframe, in.Limit = tf, defaultCandleLimit
	var seen bool
	return eachQuery(r.URL.RawQuery, func(k, v string) bool {
		if k != "limit" || seen {
			return false
		}
		n, ok := smallPositive(v)
		seen, in.Limit = true, n
		return ok && n <= MaxCandleLimit
	})
}

func decodeReport(r *http.Request, in *reportInput) bool {
	m, ok := domain.ParseMarket(r.PathValue("market"))
	in.Market, in.Symbol, in.Lang = m, r.PathValue("symbol"), analytics.DefaultLang
	if !ok || len(in.Symbol) > maxSymbolLen || !decodeConditional(r, &in.ConditionalParams) {
		return false
	}
	var seenLang, seenStyle bool
	return eachQuery(r.URL.RawQuery, func(k, v string) bool {
		var ok bool
		switch {
		case k == "lang" && !seenLang:
			seenLang = true
			in.Lang, ok = analytics.ParseLang(v)
		case k == "style" && !seenStyle:
			seenStyle = true
			in.Style, ok = analytics.ParseStyle(v)
		}
		return ok
	})
}

func decodeMarketPath(r *http.Request, p *MarketPath) bool {
	m, ok := domain.ParseMarket(r.PathValue("market_type"))
	p.MarketType, p.Exchange = m, r.PathValue("exchange")
	return ok && len(p.Exchange) <= maxExchangeLen
}

// decodeConditional takes the validators as huma reads them (the first
// value of each), within huma's bounds (which count runes, never more
// than bytes).
func decodeConditional(r *http.Request, c *ConditionalParams) bool {
	if v := r.Header["If-None-Match"]; len(v) > 0 {
		c.IfNoneMatch = v[0]
	}
	if v := r.Header["If-Modified-Since"]; len(v) > 0 {
		c.IfModifiedSince = v[0]
	}
	return len(c.IfNoneMatch) <= maxIfNoneMatchLen && len(c.IfModifiedSince) <= maxIfModifiedSinceLen
}

// eachQuery gives take each parameter of the raw query, as long as take
// accepts it; a parameter without a value or written escaped is refused.
func eachQuery(q string, take func(k, v string) bool) bool {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || strings.ContainsAny(kv, "%+;") || !take(k, v) {
			return false
		}
	}
	return true
}

// smallPositive parses 1..9999 written without sign or leading zero.
func smallPositive(s string) (int, bool) {
	if len(s) == 0 || len(s) > 4 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// The header values the encoders write, shared (never modified).
var (
	jsonContentTypeValue = []string{jsonContentType}
	noStoreValue         = []string{noStore}
)

// encodeData writes a dataOutput as huma does (a header per non-empty
// field, under its canonical name, the status, the body), the header
// values backed by the request's array (one allocation for all).
func encodeData(w http.ResponseWriter, d *dataOutput, ri *requestInfo) {
	h := w.Header()
	vals := &ri.dataHeaders
	*vals = [8]string{d.ETag, d.LastModified, d.CacheControl, d.Unknown, d.ContentLength, d.MarketOpen, d.SessionClose, d.NextOpen}
	v := vals[:]
	if d.ContentType != "" {
		h["Content-Type"] = jsonContentTypeValue
	}
	if d.ETag != "" {
		h["Etag"] = v[0:1:1]
	}
	if d.LastModified != "" {
		h["Last-Modified"] = v[1:2:2]
	}
	if d.CacheControl != "" {
		h["Cache-Control"] = v[2:3:3]
	}
	if d.Unknown != "" {
		h["X-Unknown-Symbols"] = v[3:4:4]
	}
	if d.ContentLength != "" {
		h["Content-Length"] = v[4:5:5]
	}
	if d.MarketOpen != "" {
		h[headerMarketOpen] = v[5:6:6]
	}
	if d.SessionClose != "" {
		h[headerSessionClose] = v[6:7:7]
	}
	if d.NextOpen != "" {
		h[headerNextOpen] = v[7:8:8]
	}
	w.WriteHeader(d.Status)
	_, _ = w.Write(d.Body)
}
