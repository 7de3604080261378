package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/readcache"
)

// Conditional requests (RFC 9110 §13) on the data GETs: every 200 carries
// an ETag (computed once per cached body, readcache.Body; weak where the
// body's data_age_seconds move with the clock, weakTag) and a
// Last-Modified, and a request whose validators still match is answered
// 304 with no body. The gate has run before (a 304 is counted and
// rate-limited like a 200); only a would-be 200 becomes a 304, never an
// error.

// The longest validators accepted (the tags of ConditionalParams).
const (
	maxIfNoneMatchLen     = 2048
	maxIfModifiedSinceLen = 64
)

// ConditionalParams are the validators a client sends back from an earlier answer.
type ConditionalParams struct {
	IfNoneMatch     string `header:"If-None-Match" maxLength:"2048" doc:"ETag(s) of a copy you hold (comma-separated, or *). When one matches the current body the answer is 304 Not Modified, without a body, still counted against your limits. Takes precedence over If-Modified-Since" example:"\"l7mYk3t0n2Q4xUuB0V9cTw\""`
	IfModifiedSince string `header:"If-Modified-Since" maxLength:"64" doc:"Last-Modified of a copy you hold (HTTP-date). When the data has not changed since, the answer is 304 Not Modified, without a body, still counted. Ignored when If-None-Match is sent" example:"Sun, 22 Nov 2026 10:15:00 GMT"`
}

// dataOutput is a data GET's answer: an encoded body with its validators
// and how long a client may keep it.
type dataOutput struct {
	Status      int
	ContentType string `header:"Content-Type"`
	// ContentLength is sent on a 200: the body is written whole, so the
	// client knows its size up front (no chunked framing).
	ContentLength string `header:"Content-Length"`
	ETag          string `header:"ETag" doc:"Entity tag of the data; send it back in If-None-Match. Weak (W/\"…\") on answers carrying data_age_seconds, which moves with the clock while the data, and so the tag, stay the same; strong otherwise" example:"\"l7mYk3t0n2Q4xUuB0V9cTw\""`
	LastModified  string `header:"Last-Modified" doc:"When the data last changed (HTTP-date); send it back in If-Modified-Since" example:"Sun, 22 Nov 2026 10:15:00 GMT"`
	CacheControl  string `header:"Cache-Control" doc:"private, max-age=<seconds until the data's next scheduled refresh>" example:"private, max-age=42"`
	// Unknown lists the requested symbols that are not in the answer
	// (screener and analytics list with symbols=).
	Unknown string `header:"X-Unknown-Symbols" doc:"With symbols=: the requested symbols that are not in this market (screener: not instruments of the combination; list: not scored), comma-separated; absent when every one was found" example:"FOO_USDT,BAR_USDT"`
	// The market's hours (markethours.go), on the screener and the candles.
	MarketOpen   string `header:"X-Market-Open" doc:"Whether the market trades now: true or false (crypto: always true). While it is false the data is the last session's (stocks: the New York session; forex: Sunday to Friday 17:00 New York time), served without a 502 whatever its age" example:"false"`
	SessionClose string `header:"X-Market-Session-Close" doc:"Close of the market's current session or, while it is closed, of its last one (RFC 3339 UTC); absent for crypto and when the market's calendar is not known" example:"2026-11-27T18:00:00Z"`
	NextOpen     string `header:"X-Market-Next-Open" doc:"While the market is closed, when it opens next (RFC 3339 UTC); absent while it trades" example:"2026-11-30T14:30:00Z"`
	Body         []byte
}

// notModifiedResponse documents the 304 of a data GET.
const notModifiedDescription = "The validators sent (If-None-Match, else If-Modified-Since) match the current data: no body. ETag and Cache-Control are sent as on a 200."

// dataResponses documents a data GET whose 200 body is JSON of v's type, and its 304.
func (s *Server) dataResponses(v any, description string) map[string]*huma.Response {
	r := s.jsonResponse(v, description)
	str := &huma.Schema{Type: "string"}
	r["304"] = &huma.Response{Description: notModifiedDescription, Headers: map[string]*huma.Param{
		"ETag":          {Description: "The current entity tag (the one you sent, under weak comparison)", Schema: str},
		"Cache-Control": {Description: "As on a 200", Schema: str},
	}}
	return r
}

// freshness is how long a data GET's answer may be kept: until the next
// scheduled refresh of what it shows.
type freshness int

const (
	freshTickers freshness = iota
	freshCandles
	freshScores
	freshStats
)

// RefreshIntervals are the worker's schedule (MARKET_*_INTERVAL): the
// Cache-Control max-age of a data GET is the time left until the next
// tick of the job that refreshes its data. Zero fields take the defaults.
type RefreshIntervals struct {
	Tickers, Candles, Scores, Stats time.Duration
}

func (ri RefreshIntervals) withDefaults() RefreshIntervals {
	if ri.Tickers <= 0 {
		ri.Tickers = 10 * time.Second
	}
	if ri.Candles <= 0 {
		ri.Candles = time.Minute
	}
	if ri.Scores <= 0 {
		ri.Scores = time.Minute
	}
	// Stats may stay 0: the job is disabled (MARKET_STATS_INTERVAL=0).
	return ri
}

func (ri RefreshIntervals) of(f freshness) time.Duration {
	switch f {
	case freshTickers:
		return ri.Tickers
	case freshCandles:
		return ri.Candles
	case freshScores:
		return ri.Scores
	}
	return ri.Stats
}

// cacheControl is the Cache-Control of data refreshed every interval
// (scheduler ticks fall on multiples of it): private, for the seconds left
// until the next tick, rounded up. Without a schedule a client must
// revalidate every time (cheap with the ETag).
// cacheControls remembers the last Cache-Control value of each freshness:
// within a second every response of a kind carries the same one, so it is
// formatted once a second, not once a request.
type cacheControls [freshStats + 1]atomic.Pointer[cacheControlValue]

type cacheControlValue struct {
	interval time.Duration
	secs     int64
	text     string
}

func (c *cacheControls) value(now time.Time, interval time.Duration, f freshness) string {
	if interval <= 0 || f < 0 || int(f) >= len(c) {
		return cacheControl(now, interval)
	}
	secs := maxAgeSeconds(now, interval)
	if v := c[f].Load(); v != nil && v.interval == interval && v.secs == secs {
		return v.text
	}
	text := cacheControl(now, interval)
	c[f].Store(&cacheControlValue{interval: interval, secs: secs, text: text})
	return text
}

func maxAgeSeconds(now time.Time, interval time.Duration) int64 {
	left := now.Truncate(interval).Add(interval).Sub(now)
	return int64((left + time.Second - 1) / time.Second)
}

func cacheControl(now time.Time, interval time.Duration) string {
	if interval <= 0 {
		return "private, no-cache"
	}
	return "private, max-age=" + strconv.FormatInt(maxAgeSeconds(now, interval), 10)
}

// respond is the answer of a data GET whose body is b: 304 when the
// client's validators match, else 200 with the body.
func (s *Server) respond(ctx context.Context, cond *ConditionalParams, b readcache.Body, f freshness) *dataOutput {
	out := &dataOutput{Status: http.StatusOK, ETag: b.ETag,
		CacheControl: s.cacheControls.value(s.now(ctx), s.cfg.Refresh.of(f), f)}
	if notModified(cond, b) {
		out.Status = http.StatusNotModified
		return out
	}
	out.ContentType = jsonContentType
	out.LastModified = b.LastModified
	out.Body = b.Bytes
	out.ContentLength = b.Length
	if out.ContentLength == "" {
		out.ContentLength = strconv.Itoa(len(b.Bytes))
	}
	return out
}

// notModified evaluates the request's preconditions against b (RFC 9110
// §13.2.2): If-None-Match when sent (weak comparison, as the RFC asks for
// this header), else If-Modified-Since.
func notModified(cond *ConditionalParams, b readcache.Body) bool {
	if cond.IfNoneMatch != "" {
		return etagListMatches(cond.IfNoneMatch, b.ETag)
	}
	if cond.IfModifiedSince == "" || b.Modified.IsZero() {
		return false
	}
	since, err := http.ParseTime(cond.IfModifiedSince)
	if err != nil {
		return false // an invalid date is ignored (RFC 9110 §13.1.3)
	}
	return !b.Modified.After(since)
}

// etagListMatches reports whether the If-None-Match value list names tag
// (or is *). W/ prefixes are ignored on both sides: weak comparison.
func etagListMatches(list, tag string) bool {
	if strings.TrimSpace(list) == "*" {
		return true
	}
	tag = strings.TrimPrefix(tag, "W/")
	for list != "" {
		var one string
		one, list, _ = strings.Cut(list, ",")
		one = strings.TrimSpace(one)
		one = strings.TrimPrefix(one, "W/")
		if one == tag {
			return true
		}
	}
	return false
}
