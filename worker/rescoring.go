package worker

import (
	"cmp"
	"context"
	"sync"
	"time"
)

// Rescoring tells a process's history loads when a close is being
// rescored in it, so that they step aside: at a close every asset of a
// market is read, scored and saved at once on a host whose cores the
// ingest shares, and the reports are what clients wait for, while the
// display-only history a cold start is still loading (a whole stock
// market's 1m bars take the better part of an hour on the free plan) can
// wait seconds. A close is under way from its closing read (the stock
// bell's bars) to the end of its scoring runs (Begin, by the Ingester and
// the Scorer); a history load waits (Wait) before each of its requests
// until none has been under way for Quiet, or for MaxWait at most, so a
// host that never stops closing still loads its history.
//
// It is one process's: the workers of other processes keep their own.
// The zero value is ready to use; a nil *Rescoring never waits.
type Rescoring struct {
	// Quiet is how long after the last close's end a load waits
	// (defaultRescoringQuiet when zero): the runs of a close come one
	// after the other, each deciding for a few hundred milliseconds.
	Quiet time.Duration
	// MaxWait bounds one wait (defaultRescoringMaxWait when zero).
	MaxWait time.Duration

	mu      sync.Mutex
	active  int
	waiting int
	idleAt  time.Time     // when active last went to 0
	changed chan struct{} // closed, and replaced, when active or waiting changes
}

const (
	defaultRescoringQuiet   = time.Second
	defaultRescoringMaxWait = 20 * time.Second
)

// Begin marks a close's read or run as under way until end is called
// (once; later calls do nothing).
func (r *Rescoring) Begin() (end func()) {
	if r == nil {
		return func() {}
	}
	r.mu.Lock()
	r.active++
	r.bump()
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.active--; r.active == 0 {
				r.idleAt = time.Now()
			}
			r.bump()
			r.mu.Unlock()
		})
	}
}

// Wait returns when no close has been under way for Quiet, after MaxWait
// at most, or when ctx ends, and how long it waited.
func (r *Rescoring) Wait(ctx context.Context) time.Duration {
	if r == nil {
		return 0
	}
	start := time.Now()
	deadline := start.Add(cmp.Or(r.MaxWait, defaultRescoringMaxWait))
	quiet := cmp.Or(r.Quiet, defaultRescoringQuiet)
	counted := false
	defer func() {
		if counted {
			r.mu.Lock()
			r.waiting--
			r.bump()
			r.mu.Unlock()
		}
	}()
	for {
		now := time.Now()
		r.mu.Lock()
		active, until := r.active, r.idleAt.Add(quiet)
		if active == 0 && !until.After(now) || !now.Before(deadline) {
			r.mu.Unlock()
			return now.Sub(start)
		}
		if !counted {
			counted = true
			r.waiting++
			r.bump()
		}
		changed := r.changedLocked()
		r.mu.Unlock()
		next := deadline
		if active == 0 && until.Before(next) {
			next = until
		}
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Since(start)
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Active is how many closes are under way; Waiting how many loads wait
// for them (tests poll it).
func (r *Rescoring) Active() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active
}

// Waiting is how many loads wait in Wait.
func (r *Rescoring) Waiting() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting
}

func (r *Rescoring) changedLocked() chan struct{} {
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// bump wakes the waiters (r.mu held).
func (r *Rescoring) bump() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}
