package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/stream"
)

const (
	// streamCloseGrace is how long a stream its guard ends may still write
	// (the write under way, then the closing event): a client that reads
	// gets its closed event, one that does not is cut off then.
	streamCloseGrace = 250 * time.Millisecond
	// streamRecheckTimeout bounds one recheck, so a slow lookup delays
	// the next one by this much at most.
	streamRecheckTimeout = 2 * time.Second
)

// streamGuard ends a stream from beside it, whatever the stream is doing:
// replaying, idle, or blocked writing to a client that does not read. It
// rechecks the key every StreamRecheck (revoked, client suspended or past
// its contract, a requested market out of the tier) and watches the
// stream's slot. On a refusal it keeps the reason, cancels the stream's
// context (which stops a replay's query too) and lets the stream's writes
// run for streamCloseGrace more, a blocked one included: net/http closes
// the connection when that write fails.
type streamGuard struct {
	reason atomic.Pointer[StreamClosed]
	stop   context.CancelFunc
	done   chan struct{}
}

// guardStream starts the guard of the stream whose context end cancels.
func (s *Server) guardStream(ctx context.Context, end context.CancelFunc, w *sseWriter, req streamRequest, slot *stream.Slot) *streamGuard {
	ctx, stop := context.WithCancel(ctx)
	g := &streamGuard{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		why := s.watchStream(ctx, req, slot)
		if why == nil {
			return
		}
		g.reason.Store(why)
		// Cancelled first, so a write the cut refuses is seen as the end
		// it is, not as a failure.
		end()
		w.endBy(time.Now().Add(streamCloseGrace))
	}()
	return g
}

// finish stops the guard and, when the guard ended the stream, writes the
// closing event, if the connection takes it within the grace. The writer
// is the caller's alone again afterwards.
func (g *streamGuard) finish(w *sseWriter) {
	g.stop()
	<-g.done
	why := g.reason.Load()
	if why == nil {
		return
	}
	data, _ := json.Marshal(why)
	w.format(0, "closed", data)
	_ = w.send(w.buf) // the deadline is endBy's
}

// watchStream returns why the stream must end, or nil when ctx ends
// first.
func (s *Server) watchStream(ctx context.Context, req streamRequest, slot *stream.Slot) *StreamClosed {
	checker, _ := s.gate.(KeyRechecker)
	var tick <-chan time.Time
	if checker != nil {
		t := time.NewTicker(s.cfg.StreamRecheck)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-slot.Lost():
			return &StreamClosed{Status: http.StatusTooManyRequests, Detail: streamCapDetail(req.client.Tier) +
				": this stream lost its place to the client's other streams (the service rebuilt its count of open streams); reconnect when one of them closes"}
		case <-tick:
			why, client := recheckStream(ctx, checker, req)
			if why == nil && client != nil {
				why = fitStream(ctx, slot, client.Tier)
			}
			if why != nil {
				return why
			}
		}
	}
}

// recheckStream asks the gate whether the stream's key may still be
// served, and its tier still covers every market of the stream; it
// returns the client as the gate now sees it. An outage is no answer: the
// stream goes on and asks again.
func recheckStream(ctx context.Context, checker KeyRechecker, req streamRequest) (*StreamClosed, *domain.Client) {
	ctx, cancel := context.WithTimeout(ctx, streamRecheckTimeout)
	defer cancel()
	out, err := checker.Recheck(ctx, req.keyHash)
	if err != nil {
		return nil, nil
	}
	if !out.Admitted() {
		return &StreamClosed{Status: out.Status, Detail: out.Detail}, nil
	}
	for _, m := range req.filter.Markets {
		if !out.Client.AllowsMarket(m) {
			return &StreamClosed{Status: http.StatusForbidden, Detail: fmt.Sprintf("your tier no longer includes every market of this stream (allowed: %v)",
				domain.MarketNames(out.Client.Markets))}, nil
		}
	}
	return nil, out.Client
}

// fitStream holds the stream to its client's current tier's stream cap
// (the tier may have changed since it opened): a tier without streams
// ends it (403); one allowing fewer streams than are open ends the
// newest beyond the cap, over every replica (429, as a stream that lost
// its place).
func fitStream(ctx context.Context, slot *stream.Slot, tier domain.Tier) *StreamClosed {
	n := tier.MaxStreams()
	if n <= 0 {
		return &StreamClosed{Status: http.StatusForbidden, Detail: fmt.Sprintf("the %s tier no longer includes event streams", tier)}
	}
	if !slot.Fit(ctx, n) {
		return &StreamClosed{Status: http.StatusTooManyRequests, Detail: streamCapDetail(tier) +
			": your tier changed, and this stream is beyond its cap (the newest streams close first); reconnect when one of the others closes"}
	}
	return nil
}
