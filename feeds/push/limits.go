package push

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// windowLimiter admits at most max events in any rolling window (the
// exchanges count connection attempts that way: Binance 300 per 5 minutes
// per IP, OKX 3 per second per IP). It is shared by every connection to
// one host, so reconnect storms across shards stay inside the budget.
type windowLimiter struct {
	max    int
	window time.Duration

	mu     sync.Mutex
	events []time.Time // admitted, oldest first, all within the window
}

func newWindowLimiter(max int, window time.Duration) *windowLimiter {
	return &windowLimiter{max: max, window: window}
}

// wait blocks until one more event fits in the window, then records it.
func (l *windowLimiter) wait(ctx context.Context) error {
	for {
		d := l.reserve(time.Now())
		if d <= 0 {
			return nil
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

// reserve records an event at now and returns 0, or returns how long to
// wait before trying again.
func (l *windowLimiter) reserve(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	cut := 0
	for cut < len(l.events) && now.Sub(l.events[cut]) >= l.window {
		cut++
	}
	l.events = l.events[cut:]
	if len(l.events) < l.max {
		l.events = append(l.events, now)
		return 0
	}
	return l.events[0].Add(l.window).Sub(now)
}

// pacer spaces the control messages of one connection (subscribe requests)
// at least interval apart.
type pacer struct {
	interval time.Duration
	last     time.Time
}

func (p *pacer) wait(ctx context.Context) error {
	if !p.last.IsZero() {
		if err := sleep(ctx, time.Until(p.last.Add(p.interval))); err != nil {
			return err
		}
	}
	p.last = time.Now()
	return nil
}

// backoff is an exponential reconnect delay with full jitter; reset after a
// connection that lived long enough to count as healthy.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func (b *backoff) delay() time.Duration {
	if b.next < b.min {
		b.next = b.min
	}
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(b.next*2, b.max)
	return d
}

func (b *backoff) reset() { b.next = b.min }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
