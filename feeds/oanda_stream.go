package feeds

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

// Quote is a pair's price at a time, as a feed's price stream pushes it.
type Quote struct {
	Symbol string // canonical
	Price  float64
	Time   time.Time
}

// PricePusher is implemented by feeds whose prices are pushed over a
// streaming HTTP response rather than a websocket (OANDA's pricing
// stream); feeds/push reads the response, the feed completes the prices
// into screener rows. It is optional: check with a type assertion.
type PricePusher interface {
	// OpenPriceStream starts the price stream of symbols (canonical) and
	// returns its body: newline-delimited JSON messages. The caller reads it
	// until it ends and closes it.
	OpenPriceStream(ctx context.Context, symbols []string) (io.ReadCloser, error)
	// QuoteTickers completes quotes of c into screener rows (the 24 h
	// change and volume are the feed's own). It may ask the feed's REST
	// API, so it is not called on a stream's reading path. A quote it
	// cannot complete yet is left out; it fails only when none can be.
	QuoteTickers(ctx context.Context, c domain.Combination, quotes []Quote) ([]domain.Ticker, error)
}

var _ PricePusher = (*oanda)(nil)

// OpenPriceStream implements PricePusher: GET
// /v3/accounts/{accountID}/pricing/stream on the oanda-stream host
// (developer.oanda.com/rest-live-v20/pricing-ep/: chunked transfer
// encoding, one Price or PricingHeartbeat object a line, heartbeats every
// 5 seconds, at most 4 prices a second per instrument, a snapshot of every
// instrument first). The documented cap of 20 active streams per IP is
// kept in process; new connections go through the dial pacer like REST's.
func (o *oanda) OpenPriceStream(ctx context.Context, symbols []string) (io.ReadCloser, error) {
	if len(symbols) == 0 {
		return nil, fmt.Errorf("feeds: oanda: pricing stream: no instrument")
	}
	if n := o.open.Add(1); n > oandaMaxStreams {
		o.open.Add(-1)
		return nil, fmt.Errorf("feeds: oanda: pricing stream: %d streams open, OANDA allows %d per IP", n-1, oandaMaxStreams)
	}
	// The request lives as long as its body: a streaming client has no
	// time-out, so only the wait for the response headers is bounded here.
	rctx, cancel := context.WithCancel(ctx)
	done := func() { cancel(); o.open.Add(-1) }
	path := "/v3/accounts/" + url.PathEscape(o.account) + "/pricing/stream"
	u := o.streamURL + path + "?" + url.Values{"instruments": {strings.Join(symbols, ",")}}.Encode()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		done()
		return nil, fmt.Errorf("feeds: oanda: pricing stream: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "marketscreener-feeds/1")
	o.authorize(req.Header)
	headers := time.AfterFunc(defaultAttemptTimeout, cancel)
	resp, err := o.streamHTTP.Do(req)
	if !headers.Stop() { // fired: the request was cancelled
		if err == nil {
			resp.Body.Close()
		}
		done()
		return nil, fmt.Errorf("feeds: oanda: pricing stream: no response within %s", defaultAttemptTimeout)
	}
	if err != nil {
		done()
		return nil, fmt.Errorf("feeds: oanda: pricing stream: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		done()
		return nil, &StatusError{Provider: NameOanda, Path: path, StatusCode: resp.StatusCode, Body: snippet(b),
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), o.now())}
	}
	return &countedBody{ReadCloser: resp.Body, done: done}, nil
}

// countedBody runs done once when closed.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// QuoteTickers implements PricePusher with the daily references.
func (o *oanda) QuoteTickers(ctx context.Context, c domain.Combination, quotes []Quote) ([]domain.Ticker, error) {
	if !o.Supports(c) {
		return nil, unsupported(NameOanda, c)
	}
	syms := make([]string, len(quotes))
	for i, q := range quotes {
		syms[i] = q.Symbol
	}
	refs, err := o.refs.get(ctx, syms)
	if err != nil {
		return nil, err
	}
	now := o.now()
	out := make([]domain.Ticker, 0, len(quotes))
	for _, q := range quotes {
		ref, ok := refs[q.Symbol]
		if !ok {
			continue // logged by refs.get; the next quote tries again
		}
		t, err := ref.tickerOf(q, now)
		if err != nil {
			o.log.Warn("feeds: dropping bad ticker row", "symbol", q.Symbol, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// dialPacer books every new connection of a host family in a budget of
// its own: OANDA rejects more than 2 new connections a second per client
// (development guide, "Connection Limiting"). Kept-alive connections are
// reused without a booking.
type dialPacer struct {
	budget *hostbudget.Budget
	limit  hostbudget.Limit
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
}

// dialPatience is the longest a dial waits for its turn.
const dialPatience = 30 * time.Second

// clients returns a REST client like base and a streaming one (no
// time-out: a stream lasts as long as it delivers), sharing a transport
// cloned from base's whose dials wait their turn. A transport of another
// kind than *http.Transport cannot be paced and is used as it is.
func (p *dialPacer) clients(base *http.Client) (rest, stream *http.Client) {
	tr, ok := base.Transport.(*http.Transport)
	if base.Transport == nil {
		tr, ok = http.DefaultTransport.(*http.Transport), true
	}
	var rt http.RoundTripper = base.Transport
	if ok {
		tr = tr.Clone()
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if err := p.wait(ctx); err != nil {
				return nil, err
			}
			return dial(ctx, network, addr)
		}
		rt = tr
	}
	rest = &http.Client{Transport: rt, Timeout: base.Timeout, CheckRedirect: base.CheckRedirect, Jar: base.Jar}
	stream = &http.Client{Transport: rt, CheckRedirect: base.CheckRedirect, Jar: base.Jar}
	return rest, stream
}

// wait blocks until a new connection may be opened.
func (p *dialPacer) wait(ctx context.Context) error {
	now := p.now()
	start, ok := p.budget.Reserve(ctx, p.limit, 1, now, now.Add(dialPatience))
	if !ok {
		return fmt.Errorf("feeds: %s: no new connection allowed before %s", p.limit.Name, start.UTC().Format(time.RFC3339))
	}
	return p.sleep(ctx, start.Sub(now))
}
