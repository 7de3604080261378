package feeds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/hostbudget"
)

// Retry and pacing defaults shared by every real adapter.
const (
	defaultMaxAttempts    = 4
	defaultBackoffBase    = 250 * time.Millisecond
	defaultBackoffMax     = 8 * time.Second
	defaultMaxWait        = 30 * time.Second // longest Retry-After or rate-limit pause waited in-process
	defaultAttemptTimeout = 15 * time.Second
	maxResponseBytes      = 64 << 20 // Binance's spot exchangeInfo alone is ~15 MB
)

// StatusError is an upstream response with a non-2xx status.
type StatusError struct {
	Provider   string
	Path       string
	StatusCode int
	Body       string        // first bytes of the body, for the log
	RetryAfter time.Duration // from the Retry-After header, 0 when absent
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("feeds: %s: GET %s: status %d: %s", e.Provider, e.Path, e.StatusCode, e.Body)
}

// Temporary reports whether asking again later may succeed: rate limits,
// bans with an end (418) and server errors. Other 4xx responses are
// permanent (bad symbol, bad key).
func (e *StatusError) Temporary() bool { return retryableStatus(e.StatusCode) }

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusTeapot || code >= 500
}

// apiClient is the one HTTP helper of the real adapters: per-attempt
// time-outs, bounded exponential back-off with jitter on 5xx, 429, 418 and
// network errors, Retry-After, request pacing, and a provider hook that
// reads rate-limit headers and asks for a pause.
type apiClient struct {
	name    string
	baseURL string
	http    *http.Client
	log     *slog.Logger
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error

	maxAttempts    int
	backoffBase    time.Duration
	backoffMax     time.Duration
	maxWait        time.Duration
	attemptTimeout time.Duration
	minInterval    time.Duration // pacing between request starts (provider's documented rate)

	// listCommas sends the commas of query values as they are (symbols=
	// AAPL,MSFT), not escaped (%2C): a provider whose lists are
	// comma-separated (Alpaca's symbols) then fits half as many more
	// symbols in a URL of the same length. RFC 3986 allows a comma in a
	// query as it is.
	listCommas bool
	// authorize adds credentials to a request; nil for public APIs.
	authorize func(h http.Header)
	// pauseUntil reads a response's rate-limit headers and returns the time
	// before which no further request of this client should start (zero:
	// no pause).
	pauseUntil func(h http.Header, now time.Time) time.Time
	// refusedFor reads how long a 429 holds every caller when the provider
	// says so in headers of its own rather than Retry-After (nil or 0:
	// Retry-After, else a second).
	refusedFor func(h http.Header, now time.Time) time.Duration
	// planLimit reads the account's own budget from a response, for
	// providers whose limit depends on the customer's plan (nil or false:
	// the documented one stays).
	planLimit func(h http.Header) (hostbudget.Limit, bool)

	// budget is the host's request budget shared by every client and
	// process of the deployment; limit is the host's (a zero Max: bans
	// only). weigh is a request's documented weight (nil: 1 each), and
	// usedWeight reads the provider's own count of the used weight from a
	// response (nil or -1: not told).
	budget     *hostbudget.Budget
	limit      hostbudget.Limit
	weigh      func(path string, q url.Values) int
	usedWeight func(h http.Header) int
	// extraLimit names a second budget a path also spends one request of
	// (Binance's /futures/data/*: weight 0, but 1,000 requests per 5
	// minutes of their own); nil or false: none.
	extraLimit func(path string) (hostbudget.Limit, bool)

	mu        sync.Mutex
	notBefore time.Time // set by rate-limit headers and pacing
}

// hostLimit is the host's budget: the documented one, or the plan's once
// a response has told it (planLimit).
func (c *apiClient) hostLimit() hostbudget.Limit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit
}

// newAPIClient returns the client of one provider host: host names its
// budget (a MARKET_FEED_URLS name: "binance", "binance-futures") and limit
// is the host's documented budget, replaced by cfg.Limits[host] if set.
func newAPIClient(name, host, baseURL string, limit hostbudget.Limit, cfg Config) *apiClient {
	budget := cfg.Budget
	if budget == nil {
		budget = hostbudget.New(hostbudget.Options{Logger: cfg.Logger})
	}
	return &apiClient{
		name:           name,
		budget:         budget,
		limit:          cfg.limit(host, limit),
		baseURL:        baseURL,
		http:           cfg.HTTPClient,
		log:            cfg.Logger.With("feed", name),
		now:            cfg.Now,
		sleep:          cfg.Sleep,
		maxAttempts:    defaultMaxAttempts,
		backoffBase:    defaultBackoffBase,
		backoffMax:     defaultBackoffMax,
		maxWait:        defaultMaxWait,
		attemptTimeout: defaultAttemptTimeout,
	}
}

// getJSON fetches path with query q and decodes the body into dst.
func (c *apiClient) getJSON(ctx context.Context, path string, q url.Values, dst any) error {
	body, err := c.get(ctx, path, q)
	if err != nil {
		return err
	}
	if err := decodeJSON(body, dst); err != nil {
		return fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, err)
	}
	return nil
}

// get fetches path with query q, retrying what is worth retrying, and
// returns the body of the first 2xx response. A 429 or 418 pauses every
// caller of the host (the budget's ban), not only this one.
func (c *apiClient) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := c.baseURL + path
	if len(q) > 0 {
		enc := q.Encode()
		if c.listCommas {
			enc = strings.ReplaceAll(enc, "%2C", ",")
		}
		u += "?" + enc
	}
	weight := 1
	if c.weigh != nil {
		weight = c.weigh(path, q)
	}
	var lastErr error
	for attempt := 1; attempt <= c.maxAttempts; attempt++ {
		if err := c.waitTurn(ctx, path, weight); err != nil {
			return nil, err
		}
		body, wait, err := c.attempt(ctx, path, u)
		if err == nil {
			return body, nil
		}
		lastErr = err
		var se *StatusError
		isStatus := errors.As(err, &se)
		if isStatus && !se.Temporary() {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, ctx.Err())
		}
		if attempt == c.maxAttempts {
			break
		}
		if wait > c.maxWait {
			return nil, fmt.Errorf("feeds: %s: GET %s: upstream asks to wait %s: %w", c.name, path, wait, err)
		}
		if wait > 0 && isStatus && rateRefusal(se.StatusCode) {
			// The budget's ban holds this and every other caller: the next
			// waitTurn waits it out.
			c.log.Warn("feeds: upstream rate limit, every caller of the host waits", "path", path, "attempt", attempt, "wait", wait, "err", err)
			continue
		}
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		c.log.Warn("feeds: retrying upstream request", "path", path, "attempt", attempt, "wait", wait, "err", err)
		if err := c.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, err)
		}
	}
	return nil, fmt.Errorf("feeds: %s: GET %s: giving up after %d attempts: %w", c.name, path, c.maxAttempts, lastErr)
}

// rateRefusal: the status refuses the request for the deployment's rate
// (429) or bans its IP (418).
func rateRefusal(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusTeapot
}

// attempt performs one request. wait is the Retry-After the upstream
// asked for; on a 429 or 418 it becomes the host's ban.
func (c *apiClient) attempt(ctx context.Context, path, u string) (body []byte, wait time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, &StatusError{Provider: c.name, Path: path, StatusCode: 0, Body: err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "marketscreener-feeds/1")
	if c.authorize != nil {
		c.authorize(req.Header)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, err)
	}
	defer resp.Body.Close()
	c.readLimits(ctx, path, resp.Header)
	if rateRefusal(resp.StatusCode) {
		// Before anything else: every other caller must stop now.
		now := c.now()
		wait = parseRetryAfter(resp.Header.Get("Retry-After"), now)
		if wait <= 0 && c.refusedFor != nil {
			wait = c.refusedFor(resp.Header, now)
		}
		c.refused(ctx, path, resp.StatusCode, now, wait)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("feeds: %s: GET %s: reading body: %w", c.name, path, err)
	}
	if len(body) > maxResponseBytes {
		return nil, 0, &StatusError{Provider: c.name, Path: path, StatusCode: resp.StatusCode, Body: "response body too large"}
	}
	if resp.StatusCode/100 == 2 {
		return body, 0, nil
	}
	if !rateRefusal(resp.StatusCode) {
		wait = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	}
	return nil, wait, &StatusError{Provider: c.name, Path: path, StatusCode: resp.StatusCode, Body: snippet(body), RetryAfter: wait}
}

// readLimits passes a response's rate-limit headers on: the provider's
// count of the used weight to the budget, a pause to this client. The
// count is the provider's window at the time it answered, which is closer
// to now than to when the request was booked: should the two windows
// differ, the correction then lands in the later one, where it can only
// make the budget more careful.
func (c *apiClient) readLimits(ctx context.Context, path string, h http.Header) {
	if c.planLimit != nil {
		if l, ok := c.planLimit(h); ok {
			c.mu.Lock()
			if l.Max != c.limit.Max || l.Window != c.limit.Window {
				l.Name = c.limit.Name
				c.log.Info("feeds: the account's request budget, as the provider tells it", "host", l.Name, "max", l.Max, "window", l.Window)
				c.limit = l
			}
			c.mu.Unlock()
		}
	}
	if c.usedWeight != nil {
		if used := c.usedWeight(h); used >= 0 {
			c.budget.Observe(ctx, c.hostLimit(), c.now(), used)
		}
	}
	if c.pauseUntil != nil {
		if until := c.pauseUntil(h, c.now()); !until.IsZero() {
			c.log.Warn("feeds: near upstream rate limit, pausing", "path", path, "until", until)
			c.pause(until)
		}
	}
}

// refused records a 429 or 418: the host is banned for every caller until
// the Retry-After has passed (at least a second when none is given, so
// the callers do not knock again at once). A 418 means the deployment
// ignored a 429 and its IP is banned: an operator must hear of it.
func (c *apiClient) refused(ctx context.Context, path string, status int, now time.Time, wait time.Duration) {
	until := now.Add(max(wait, time.Second))
	limit := c.hostLimit()
	c.budget.Ban(ctx, limit, now, until, status)
	if status == http.StatusTeapot {
		c.log.Error("feeds: upstream BANNED this deployment's IP (418): every request to the host stops until the ban ends; something sent requests inside a 429's Retry-After",
			"host", limit.Name, "path", path, "until", until.UTC().Format(time.RFC3339))
	}
}

// waitTurn blocks until the client may start a request of weight: at
// least minInterval after its previous start and any pause its provider
// asked of it, then in a window of the host's budget with room for the
// weight and after any ban of the host. A wait longer than maxWait fails
// fast, so a banned deployment does not keep knocking (Binance escalates
// bans of clients that ignore them), and a full budget fails the caller
// instead of queueing it for minutes.
func (c *apiClient) waitTurn(ctx context.Context, path string, weight int) error {
	c.mu.Lock()
	now := c.now()
	at := now
	if c.notBefore.After(at) {
		at = c.notBefore
	}
	c.notBefore = at.Add(c.minInterval)
	c.mu.Unlock()
	horizon := now.Add(c.maxWait)
	if c.extraLimit != nil {
		// The scarcer budget first: the main one is then booked from the
		// time it allows.
		if l, ok := c.extraLimit(path); ok {
			start, ok := c.budget.Reserve(ctx, l, 1, at, horizon)
			if !ok || start.After(horizon) {
				return fmt.Errorf("feeds: %s: GET %s: rate limited until %s", c.name, path, start.UTC().Format(time.RFC3339))
			}
			at = start
		}
	}
	reached := now // the time this goroutine has waited until
	limit := c.hostLimit()
	for {
		start, ok := c.budget.Reserve(ctx, limit, weight, at, horizon)
		if !ok || start.After(horizon) {
			return fmt.Errorf("feeds: %s: GET %s: rate limited until %s", c.name, path, start.UTC().Format(time.RFC3339))
		}
		if !start.After(reached) {
			return nil
		}
		if err := c.sleep(ctx, start.Sub(reached)); err != nil {
			return fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, err)
		}
		reached = start
		// A ban that began while this caller slept holds it too: its
		// booking is given up (an over-count, never an under-count).
		ban := c.budget.BannedUntil(ctx, limit)
		if !ban.After(start) {
			return nil
		}
		at = ban
	}
}

func (c *apiClient) pause(until time.Time) {
	c.mu.Lock()
	if until.After(c.notBefore) {
		c.notBefore = until
	}
	c.mu.Unlock()
}

// backoff is base·2^(attempt-1), capped, with ±25 % jitter so replicas
// retrying the same outage do not stay in step.
func (c *apiClient) backoff(attempt int) time.Duration {
	d := c.backoffBase << (attempt - 1)
	if d > c.backoffMax || d <= 0 {
		d = c.backoffMax
	}
	jitter := time.Duration(rand.Int64N(int64(d)/2+1)) - d/4
	return d + jitter
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

func snippet(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
