package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/stream"
)

// memLog is an in-memory log for the hub's own logic (the Postgres log is
// tested in store and through the api).
type memLog struct {
	mu     sync.Mutex
	events []domain.StreamEvent
}

func (l *memLog) add(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		id := int64(len(l.events) + 1)
		l.events = append(l.events, domain.StreamEvent{ID: id, Pos: domain.StreamPos{Seq: id}, Kind: domain.EventScreener, Market: domain.Crypto})
	}
}

func (l *memLog) LastStreamPos(context.Context) (domain.StreamPos, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int64(len(l.events))
	return domain.StreamPos{Seq: n}, nil
}

func (l *memLog) StreamEvents(_ context.Context, after domain.StreamPos, limit int) ([]domain.StreamEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events[min(int(after.Seq), len(l.events)):]
	return append([]domain.StreamEvent(nil), out[:min(limit, len(out))]...), nil
}

func TestHubHandsOutEventsInOrderAndDropsASubscriberThatFallsBehind(t *testing.T) {
	t.Parallel()
	log := &memLog{}
	log.add(3) // before the hub starts: replay material, not live
	hub := stream.NewHub(stream.HubConfig{Source: log, Poll: 10 * time.Millisecond, Buffer: 4,
		Render: func(_ context.Context, e domain.StreamEvent) ([]byte, error) { return []byte("x"), nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	all := func(domain.StreamEvent) bool { return true }
	reader, err := hub.Subscribe(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := hub.Subscribe(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if reader.Start.Seq != 3 || slow.Start.Seq != 3 {
		t.Fatalf("start %d %d, want 3", reader.Start, slow.Start)
	}
	log.add(3)
	for want := int64(4); want <= 6; want++ {
		select {
		case e := <-reader.C:
			if e.ID != want {
				t.Fatalf("event %d, want %d", e.ID, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
	}
	// One event at a time, which the reader takes and slow does not: past
	// its buffer of 4 (it holds 3 already) slow is dropped.
	for want := int64(7); want <= 16; want++ {
		log.add(1)
		select {
		case e := <-reader.C:
			if e.ID != want {
				t.Fatalf("reader got %d, want %d", e.ID, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the reader stopped getting events")
		}
	}
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-slow.C:
		case <-deadline:
			t.Fatal("a subscriber 10 events behind with a buffer of 4 was not dropped")
		}
	}
	if !slow.Lagged() || reader.Lagged() {
		t.Fatalf("lagged: slow %v, reader %v", slow.Lagged(), reader.Lagged())
	}
	cancel()
	<-done
	if _, err := hub.Subscribe(context.Background(), all); err != stream.ErrStopped {
		t.Fatalf("subscribe after stop: %v", err)
	}
}

func TestHubRendersOnlyWhatSomeoneWants(t *testing.T) {
	t.Parallel()
	log := &memLog{}
	var mu sync.Mutex
	rendered := 0
	hub := stream.NewHub(stream.HubConfig{Source: log, Poll: 5 * time.Millisecond,
		Render: func(_ context.Context, e domain.StreamEvent) ([]byte, error) {
			mu.Lock()
			rendered++
			mu.Unlock()
			return []byte("x"), nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = hub.Run(ctx) }()
	forex := func(e domain.StreamEvent) bool { return e.Market == domain.Forex }
	sub, err := hub.Subscribe(ctx, forex)
	if err != nil {
		t.Fatal(err)
	}
	log.add(5) // crypto events: nobody's
	crypto, err := hub.Subscribe(ctx, func(e domain.StreamEvent) bool { return e.Market == domain.Crypto })
	if err != nil {
		t.Fatal(err)
	}
	// Whatever the hub had read before this subscription is replay
	// material; everything after reaches it, rendered.
	log.add(1)
	for {
		select {
		case e := <-crypto.C:
			if e.ID == 6 {
				if string(e.Data) != "x" {
					t.Fatalf("event 6 delivered unrendered: %q", e.Data)
				}
				mu.Lock()
				defer mu.Unlock()
				if rendered > 6-int(crypto.Start.Seq) {
					t.Fatalf("%d renders for %d wanted events", rendered, 6-crypto.Start.Seq)
				}
				_ = sub
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("event 6 not delivered")
		}
	}
}

func runHub(t *testing.T, cfg stream.HubConfig) *stream.Hub {
	t.Helper()
	if cfg.Render == nil {
		cfg.Render = func(context.Context, domain.StreamEvent) ([]byte, error) { return []byte("x"), nil }
	}
	hub := stream.NewHub(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return hub
}

// waitTurns wakes the hub and waits until its loop has gone round for it.
func waitTurns(t *testing.T, hub *stream.Hub, n int) {
	t.Helper()
	for range n {
		before := hub.Turns()
		hub.Wake()
		deadline := time.Now().Add(10 * time.Second)
		for hub.Turns() == before {
			if time.Now().After(deadline) {
				t.Fatal("the hub's loop did not turn on a wake-up")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func next(t *testing.T, sub *stream.Subscription) stream.Event {
	t.Helper()
	select {
	case e, ok := <-sub.C:
		if !ok {
			t.Fatal("subscription closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// A hub without subscribers reads nothing, whatever wakes it; the first
// subscriber finds where the log ends (what came meanwhile is replay
// material, not live), and the hub reads again until the last one leaves.
func TestHubReadsOnlyWhileItHasSubscribers(t *testing.T) {
	t.Parallel()
	log := &memLog{}
	hub := runHub(t, stream.HubConfig{Source: log, Poll: time.Millisecond})
	log.add(2)
	waitTurns(t, hub, 5)
	if n := hub.Reads(); n != 0 {
		t.Fatalf("an idle hub read the log %d times", n)
	}
	all := func(domain.StreamEvent) bool { return true }
	sub, err := hub.Subscribe(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Start.Seq != 2 {
		t.Fatalf("first subscriber starts at %d, want the log's end 2", sub.Start.Seq)
	}
	log.add(1)
	if e := next(t, sub); e.ID != 3 {
		t.Fatalf("live event %d, want 3", e.ID)
	}
	sub.Close()
	waitTurns(t, hub, 1) // a round that may have begun before the close
	idle := hub.Reads()
	log.add(2) // ids 4 and 5, while idle
	waitTurns(t, hub, 5)
	if n := hub.Reads(); n != idle {
		t.Fatalf("the hub read the log %d times after its last subscriber left", n-idle)
	}
	again, err := hub.Subscribe(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	if again.Start.Seq != 5 {
		t.Fatalf("subscriber after an idle spell starts at %d, want 5", again.Start.Seq)
	}
	log.add(1)
	if e := next(t, again); e.ID != 6 {
		t.Fatalf("live event %d after an idle spell, want 6 (4 and 5 are replay material)", e.ID)
	}
}
