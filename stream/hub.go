// Package stream is the event stream's engine on one api replica: a Hub
// reads the stream's log from Postgres (one reader per replica, however
// many connections) and fans each event out to the subscribed connections,
// and Slots caps how many streams a client holds open across replicas.
//
// Ordering and loss: the log is read in commit order (each row is numbered
// when its transaction commits, under a lock the commit releases:
// migration 00016), so "the events after position P" is a complete answer
// at any moment, and no transaction outside the log holds it back. The hub hands out
// events in that order and Subscribe returns the position the hub had
// reached when the subscription began: a connection replays
// (Last-Event-ID, Start] from Postgres and then takes the live events,
// which all come after Start. Nothing is missed, nothing repeated.
// A subscriber that falls behind by more than its buffer is dropped (its
// channel closed, Lagged true); its client reconnects with Last-Event-ID
// and replays what it missed, so slowness never costs an event.
package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
)

// Source is where the stream's log lives (store.DB).
type Source interface {
	LastStreamPos(ctx context.Context) (domain.StreamPos, error)
	StreamEvents(ctx context.Context, after domain.StreamPos, limit int) ([]domain.StreamEvent, error)
}

// Listener is a Source that can say when new events commit (store.DB:
// Postgres LISTEN), so the hub need not wait for its next poll.
type Listener interface {
	ListenStream(ctx context.Context, wake func()) error
}

// Event is one event with its wire form (the SSE data line), rendered once
// per replica.
type Event struct {
	domain.StreamEvent
	Data []byte
}

// Renderer renders an event's data. An error leaves the event (and the
// ones after it) for the next poll.
type Renderer func(ctx context.Context, e domain.StreamEvent) ([]byte, error)

// DefaultPoll is how often a hub with subscribers reads the log when no
// wake-up came: a safety net only. Commits wake the hub (Postgres
// NOTIFY, delivered once the commit is readable). A hub without
// subscribers reads nothing at all.
const DefaultPoll = 5 * time.Second

// pageSize bounds one read of the log.
const pageSize = 500

// HubConfig configures a Hub.
type HubConfig struct {
	Source Source
	Render Renderer
	// Poll is the safety poll's period while the hub has subscribers
	// (DefaultPoll when 0).
	Poll time.Duration
	// Buffer is how many events a subscriber may fall behind (1024 when 0:
	// more than a page of the log, so a burst alone drops no one).
	Buffer int
	Logger *slog.Logger
}

// Hub fans the log out to the subscriptions of one replica. It reads the
// log only while it has subscribers: the first subscription after an idle
// spell (or the first at all) finds where the log ends (catching up, as
// the hub did at start before), and the last one to leave stops the reads.
type Hub struct {
	cfg     HubConfig
	wake    chan struct{}
	running chan struct{}

	// reads counts the hub's queries of the log, turns its loop's rounds
	// (tests).
	reads, turns atomic.Int64

	mu      sync.Mutex
	last    domain.StreamPos
	live    bool // last is current: set by the first subscriber, cleared with the last
	stopped bool
	subs    map[*Subscription]struct{}
}

// NewHub returns a hub; Run it.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{cfg: cfg, wake: make(chan struct{}, 1), running: make(chan struct{}), subs: make(map[*Subscription]struct{})}
}

func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// ErrStopped: the hub is not running (shutting down).
var ErrStopped = errors.New("stream: hub stopped")

// Subscription is one connection's feed of live events.
type Subscription struct {
	// C carries the live events, in id order; it is closed when the hub
	// stops or the subscriber fell behind (Lagged).
	C <-chan Event
	// Start is the position the hub had reached when the subscription
	// began: every event of C comes after it, every event up to it is in
	// the log (replay them from there).
	Start domain.StreamPos

	ch     chan Event
	match  func(domain.StreamEvent) bool
	hub    *Hub
	lagged bool
	closed bool
}

// Lagged reports whether the subscription was dropped for falling behind.
func (s *Subscription) Lagged() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.lagged
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.dropLocked(s)
}

// Subscribe starts a feed of the live events match accepts. It waits for
// the hub to run. The first subscription of an idle hub finds where the
// log ends (one query; an error when Postgres does not answer).
func (h *Hub) Subscribe(ctx context.Context, match func(domain.StreamEvent) bool) (*Subscription, error) {
	select {
	case <-h.running:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h.mu.Lock()
	live, stopped := h.live, h.stopped
	h.mu.Unlock()
	if stopped {
		return nil, ErrStopped
	}
	var end domain.StreamPos
	if !live {
		h.reads.Add(1)
		p, err := h.cfg.Source.LastStreamPos(ctx)
		if err != nil {
			return nil, err
		}
		end = p
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, ErrStopped
	}
	if !h.live {
		// Idle until now: nothing read since the last subscriber left. The
		// events up to the log's end are replay material; the reads go on
		// from there.
		if end.After(h.last) {
			h.last = end
		}
		h.live = true
		h.poke()
	}
	ch := make(chan Event, h.cfg.Buffer)
	s := &Subscription{C: ch, Start: h.last, ch: ch, match: match, hub: h}
	h.subs[s] = struct{}{}
	return s, nil
}

// Subscribers is how many subscriptions are open, for metrics.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *Hub) dropLocked(s *Subscription) {
	if s.closed {
		return
	}
	s.closed = true
	delete(h.subs, s)
	close(s.ch)
	if len(h.subs) == 0 {
		h.live = false // no one to read for: the hub stops reading
	}
}

// Run reads the log until ctx ends, then closes every subscription. It
// reads only while there are subscribers: on a wake-up (a commit's
// notification), and every Poll as a safety net.
func (h *Hub) Run(ctx context.Context) error {
	defer func() {
		h.mu.Lock()
		h.stopped = true
		for s := range h.subs {
			h.dropLocked(s)
		}
		h.mu.Unlock()
	}()
	if l, ok := h.cfg.Source.(Listener); ok {
		go h.listenSource(ctx, l)
	}
	close(h.running)
	timer := time.NewTimer(h.cfg.Poll)
	defer timer.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-h.wake:
		}
		h.mu.Lock()
		live := h.live
		h.mu.Unlock()
		if !live {
			// No subscribers: no reads, no timer. A subscription pokes.
			h.turns.Add(1)
			continue
		}
		err := h.poll(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				h.cfg.Logger.Warn("stream: reading the event log failed; streams wait", "err", err)
				failing = true
			}
		case err == nil && failing:
			h.cfg.Logger.Info("stream: reading the event log again")
			failing = false
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(h.cfg.Poll)
		h.turns.Add(1)
	}
}

// listenSource turns the log's commit notifications into polls, listening
// again after a failure (the polls cover the gap).
func (h *Hub) listenSource(ctx context.Context, l Listener) {
	// It reconnects by itself and returns when ctx ends; the polls cover
	// any gap.
	_ = l.ListenStream(ctx, h.poke)
}

// poll reads and fans out every event after the hub's position.
func (h *Hub) poll(ctx context.Context) error {
	for {
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		h.reads.Add(1)
		events, err := h.cfg.Source.StreamEvents(ctx, after, pageSize)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		out := make([]Event, 0, len(events))
		for _, e := range events {
			var data []byte
			if h.wanted(e) { // no one to send it to: no rendering (a screener read)
				if data, err = h.cfg.Render(ctx, e); err != nil {
					h.publish(out)
					return err
				}
			}
			out = append(out, Event{StreamEvent: e, Data: data})
		}
		if !h.publish(out) {
			continue // a new subscriber wants an event left unrendered
		}
		if len(events) < pageSize {
			return nil
		}
	}
}

// wanted reports whether a subscription takes e now. (One that subscribes
// after this check and wants e stops publish before e, which is then read
// and rendered again.)
func (h *Hub) wanted(e domain.StreamEvent) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.match(e) {
			return true
		}
	}
	return false
}

// publish hands events to the subscribers and moves the position past
// them, under one lock: a Subscribe sees either none or all of them. It
// stops before an event left unrendered that a subscription now wants,
// and then returns false.
func (h *Hub) publish(events []Event) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		if !e.Pos.After(h.last) {
			continue // read before a first subscriber moved the position past it
		}
		if e.Data == nil {
			for s := range h.subs {
				if s.match(e.StreamEvent) {
					return false
				}
			}
		}
		for s := range h.subs {
			if !s.match(e.StreamEvent) {
				continue
			}
			select {
			case s.ch <- e:
			default:
				s.lagged = true
				h.dropLocked(s)
			}
		}
		h.last = e.Pos
	}
	return true
}
