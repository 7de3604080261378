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
	"sync"
	"time"
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

	// authorize adds credentials to a request; nil for public APIs.
	authorize func(h http.Header)
	// pauseUntil reads a response's rate-limit headers and returns the time
	// before which no further request should start (zero: no pause).
	pauseUntil func(h http.Header, now time.Time) time.Time

	mu        sync.Mutex
	notBefore time.Time // set by rate-limit headers, 429/418 and pacing
}

func newAPIClient(name, baseURL string, cfg Config) *apiClient {
	return &apiClient{
		name:           name,
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
// returns the body of the first 2xx response.
func (c *apiClient) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := c.baseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var lastErr error
	for attempt := 1; attempt <= c.maxAttempts; attempt++ {
		if err := c.waitTurn(ctx, path); err != nil {
			return nil, err
		}
		body, wait, err := c.attempt(ctx, path, u)
		if err == nil {
			return body, nil
		}
		lastErr = err
		var se *StatusError
		if errors.As(err, &se) && !se.Temporary() {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, ctx.Err())
		}
		if attempt == c.maxAttempts {
			break
		}
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		if wait > c.maxWait {
			c.pause(c.now().Add(wait))
			return nil, fmt.Errorf("feeds: %s: GET %s: upstream asks to wait %s: %w", c.name, path, wait, err)
		}
		c.log.Warn("feeds: retrying upstream request", "path", path, "attempt", attempt, "wait", wait, "err", err)
		if err := c.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, err)
		}
	}
	return nil, fmt.Errorf("feeds: %s: GET %s: giving up after %d attempts: %w", c.name, path, c.maxAttempts, lastErr)
}

// attempt performs one request. wait is the Retry-After the upstream asked for.
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
	if c.pauseUntil != nil {
		if until := c.pauseUntil(resp.Header, c.now()); !until.IsZero() {
			c.log.Warn("feeds: near upstream rate limit, pausing", "path", path, "until", until)
			c.pause(until)
		}
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
	wait = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	return nil, wait, &StatusError{Provider: c.name, Path: path, StatusCode: resp.StatusCode, Body: snippet(body), RetryAfter: wait}
}

// waitTurn blocks until the client may start a request: after any pause
// the upstream asked for and at least minInterval after the previous start.
// A pause longer than maxWait fails fast, so a banned client does not keep
// knocking (Binance escalates bans of clients that ignore them).
func (c *apiClient) waitTurn(ctx context.Context, path string) error {
	c.mu.Lock()
	now := c.now()
	start := now
	if c.notBefore.After(start) {
		start = c.notBefore
	}
	wait := start.Sub(now)
	if wait > c.maxWait {
		c.mu.Unlock()
		return fmt.Errorf("feeds: %s: GET %s: rate limited until %s", c.name, path, start.UTC().Format(time.RFC3339))
	}
	c.notBefore = start.Add(c.minInterval)
	c.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	if err := c.sleep(ctx, wait); err != nil {
		return fmt.Errorf("feeds: %s: GET %s: %w", c.name, path, err)
	}
	return nil
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
