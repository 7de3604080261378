package api

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// The fast path serves the hottest GETs (usage, screener, OHLCV, the
// analytics report) without huma's per-request machinery (routing,
// reflection over the input and output structs, three middlewares), and
// writes exactly what huma would: the same operation functions compute
// the answer, and only their plain, valid inputs are taken here.
// Everything else (an unknown or repeated parameter, an escaped path, a
// value huma would refuse, a refusal by the gate, any error of the
// operation, a server not ready) goes to huma, which answers it in full;
// the gate is never asked twice (requestInfo.gated). fastpath_test.go
// compares both paths byte for byte over a matrix of requests.

// fastRoute is the operation a request matched and its inputs.
type fastRoute struct {
	op     fastOp
	params [4]string // path parameters after the operation's prefix
	limit  int
	lang   string
	style  string
}

type fastOp uint8

const (
	fastUsage fastOp = iota + 1
	fastScreener
	fastOHLCV
	fastReport
)

// fastOpIDs are the operation ids, for the metrics.
var fastOpIDs = [...]string{fastUsage: "get-usage", fastScreener: "get-screener", fastOHLCV: "get-ohlcv", fastReport: "get-analytics-report"}

// fastPath counts what the fast path did (the tests read it). A server
// without one sends every request to huma.
type fastPath struct{ served, fellBack atomic.Int64 }

// serveFast answers r when it can and reports whether it did. ctx carries ri.
func (s *Server) serveFast(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo) bool {
	if r.Method != http.MethodGet || r.URL.RawPath != "" {
		return false
	}
	rt, ok := matchFast(r.URL.Path, r.URL.RawQuery)
	if !ok || !s.cfg.Ready() {
		return false
	}
	var cond ConditionalParams
	if rt.op != fastUsage {
		if v := r.Header["If-None-Match"]; len(v) > 0 {
			cond.IfNoneMatch = v[0]
		}
		if v := r.Header["If-Modified-Since"]; len(v) > 0 {
			cond.IfModifiedSince = v[0]
		}
		// huma refuses longer values (maxLength counts runes, never more than bytes).
		if len(cond.IfNoneMatch) > maxIfNoneMatchLen || len(cond.IfModifiedSince) > maxIfModifiedSinceLen {
			return false
		}
	}

	// The request's budget (deadlineMiddleware's, from the same start): a
	// frozen Postgres answers 503 here as on the huma path.
	if budget := s.requestBudget(); budget > 0 {
		b := &ri.fastBudget
		b.Context, b.deadline = ctx, ri.Start.Add(budget)
		defer b.stop()
		ctx = b
	}
	out, err := s.admit(ctx, r)
	// A refusal, and a key of the other kind (sandbox on live, live on the
	// sandbox: a 403), are huma's to answer, with the gate's answer reused.
	if err != nil || !out.Admitted() || s.keyKindMismatch(out.Key) != "" {
		ri.gated, ri.gateOut, ri.gateErr = true, out, err
		s.fast.fellBack.Add(1)
		return false
	}
	if out.Client != nil {
		ri.ClientID = out.Client.ID
	}
	setGateHeaders(w.Header(), out, &ri.gateHeaders)
	ri.caller = principal{Client: out.Client, Key: out.Key, Used: out.Used}

	var (
		status   int
		answered bool
	)
	switch rt.op {
	case fastUsage:
		body, err := s.usageBody(ctx)
		if err == nil {
			s.fast.served.Add(1)
			h := w.Header()
			h["Content-Type"] = jsonContentTypeValue
			h["Cache-Control"] = noStoreValue
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body)
			status, answered = http.StatusOK, true
		}
	case fastScreener:
		res, err := s.getScreener(ctx, &screenerInput{MarketPath: MarketPath{MarketType: domain.Market(rt.params[0]), Exchange: rt.params[1]},
			Instrument: rt.params[2], ConditionalParams: cond})
		if err == nil {
			s.fast.served.Add(1) // before the body: a client may read it all before the write returns
			status, answered = writeData(w, res, &ri.dataHeaders), true
		}
	case fastOHLCV:
		res, err := s.getOHLCV(ctx, &ohlcvInput{MarketPath: MarketPath{MarketType: domain.Market(rt.params[0]), Exchange: rt.params[1]},
			Symbol: rt.params[2], Timeframe: domain.Timeframe(rt.params[3]), Limit: rt.limit, ConditionalParams: cond})
		if err == nil {
			s.fast.served.Add(1) // before the body: a client may read it all before the write returns
			status, answered = writeData(w, res, &ri.dataHeaders), true
		}
	case fastReport:
		res, err := s.getAnalyticsReport(ctx, &reportInput{AnalyticsMarketParam: AnalyticsMarketParam{Market: domain.Market(rt.params[0])},
			Symbol: rt.params[1], StyleParam: StyleParam{Style: analytics.Style(rt.style)}, Lang: analytics.Lang(rt.lang), ConditionalParams: cond})
		if err == nil {
			s.fast.served.Add(1) // before the body: a client may read it all before the write returns
			status, answered = writeData(w, res, &ri.dataHeaders), true
		}
	}
	if !answered {
		// huma answers the error (its operation runs again, from the cache
		// or the same failing source); the gate's answer is reused.
		ri.gated, ri.gateOut, ri.gateErr = true, out, nil
		s.fast.fellBack.Add(1)
		return false
	}
	s.metrics.observeFast(rt.op, status, time.Since(ri.Start))
	return true
}

// The header values the fast path writes, shared (never modified).
var (
	jsonContentTypeValue = []string{jsonContentType}
	noStoreValue         = []string{noStore}
)

// writeData writes a dataOutput as huma does (a header per non-empty
// field, under its canonical name, the status, the body) and returns the
// status. vals backs the header values (one allocation for all).
func writeData(w http.ResponseWriter, d *dataOutput, vals *[5]string) int {
	h := w.Header()
	*vals = [5]string{d.ETag, d.LastModified, d.CacheControl, d.Unknown, d.ContentLength}
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
	w.WriteHeader(d.Status)
	_, _ = w.Write(d.Body)
	return d.Status
}

// matchFast matches the path and query of a hot GET, accepting only what
// huma would route to the same operation and accept as it is.
func matchFast(path, rawQuery string) (fastRoute, bool) {
	rest, ok := strings.CutPrefix(path, BasePath+"/")
	if !ok {
		return fastRoute{}, false
	}
	var rt fastRoute
	var segs [6]string
	n := 0
	for rest != "" {
		if n == len(segs) {
			return fastRoute{}, false
		}
		seg, tail, _ := strings.Cut(rest, "/")
		if !plainSegment(seg) {
			return fastRoute{}, false
		}
		segs[n] = seg
		n++
		rest = tail
		if rest == "" && strings.HasSuffix(path, "/") {
			return fastRoute{}, false
		}
	}
	switch {
	case n == 1 && segs[0] == "usage":
		rt.op = fastUsage
	case n == 4 && segs[0] == "screener" && isMarket(segs[1]) && len(segs[2]) <= maxExchangeLen && len(segs[3]) <= maxInstrumentLen:
		rt.op = fastScreener
	case n == 5 && segs[0] == "ohlcv" && isMarket(segs[1]) && len(segs[2]) <= maxExchangeLen && len(segs[3]) <= maxSymbolLen && isTimeframe(segs[4]):
		rt.op, rt.limit = fastOHLCV, defaultCandleLimit
	case n == 3 && segs[0] == "analytics" && isMarket(segs[1]) && len(segs[2]) <= maxSymbolLen &&
		segs[2] != "list" && segs[2] != "stats" && segs[2] != "factor-stats":
		rt.op, rt.lang = fastReport, string(analytics.DefaultLang)
	default:
		return fastRoute{}, false
	}
	copy(rt.params[:], segs[1:n])
	return rt, rt.parseQuery(rawQuery)
}

// parseQuery takes the operation's own parameters, each at most once,
// unescaped and valid; anything else is huma's.
func (rt *fastRoute) parseQuery(q string) bool {
	var seenLimit, seenLang, seenStyle bool
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || strings.ContainsAny(kv, "%+;") {
			return false
		}
		switch {
		case rt.op == fastOHLCV && k == "limit" && !seenLimit:
			seenLimit = true
			n, ok := smallPositive(v)
			if !ok || n > maxCandleLimit {
				return false
			}
			rt.limit = n
		case rt.op == fastReport && k == "lang" && !seenLang && isLang(v):
			seenLang, rt.lang = true, v
		case rt.op == fastReport && k == "style" && !seenStyle && isStyle(v):
			seenStyle, rt.style = true, v
		default:
			return false
		}
	}
	return true
}

// plainSegment is a path segment the mux takes as it is: not empty, not
// a dot segment, printable ASCII (an escaped segment has RawPath set).
func plainSegment(s string) bool {
	return s != "" && s != "." && s != ".." && printableASCII(s)
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

func isMarket(s string) bool { _, ok := domain.ParseMarket(s); return ok }

func isTimeframe(s string) bool { _, ok := domain.ParseTimeframe(s); return ok }

func isLang(s string) bool { _, ok := analytics.ParseLang(s); return ok && s != "" }

func isStyle(s string) bool { _, ok := analytics.ParseStyle(s); return ok && s != "" }
