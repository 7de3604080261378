package worker

import (
	"context"
	"slices"
	"sync"
)

// runClaims orders the scoring runs of one market and style in a process:
// a run claims the symbols it may score (all of them when it names none,
// as a tick does) and waits for every run that claimed one of them before
// it, running or waiting; runs whose symbols do not meet go side by side.
//
// Two runs over the same asset, a tick and a trigger arriving together,
// would otherwise both compute it from the same report, and one result
// would be thrown away (SaveAnalytics keeps the first): the second waits,
// then finds the asset fresh. Runs over different assets have nothing to
// wait for: at the bell the closing reads announce a stock market in
// batches, and each batch's run scores while the others do. A run waits
// only for claims made before its own, so no run waits for itself and a
// tick is not starved by the triggered runs after it.
type runClaims struct {
	mu   sync.Mutex
	live []*runClaim // arrival order
}

// runClaim is one run's symbols (all: nil set) and the channel closed when
// the run ends.
type runClaim struct {
	all  bool
	syms map[string]struct{}
	done chan struct{}
}

// meets reports whether two claims share a symbol.
func (c *runClaim) meets(o *runClaim) bool {
	if c.all || o.all {
		return true
	}
	small, big := c.syms, o.syms
	if len(small) > len(big) {
		small, big = big, small
	}
	for s := range small {
		if _, ok := big[s]; ok {
			return true
		}
	}
	return false
}

// claim registers a run over only (nil: every symbol) and waits for the
// earlier runs it meets. It returns the function that ends the claim, to
// be called once the run has stored what it scored; err is ctx's when it
// ended while waiting (the claim is then already ended).
func (r *runClaims) claim(ctx context.Context, only []string) (release func(), err error) {
	c := &runClaim{all: only == nil, done: make(chan struct{})}
	if !c.all {
		c.syms = make(map[string]struct{}, len(only))
		for _, s := range only {
			c.syms[s] = struct{}{}
		}
	}
	r.mu.Lock()
	var before []*runClaim
	for _, o := range r.live {
		if c.meets(o) {
			before = append(before, o)
		}
	}
	r.live = append(r.live, c)
	r.mu.Unlock()
	release = func() {
		r.mu.Lock()
		r.live = slices.DeleteFunc(r.live, func(o *runClaim) bool { return o == c })
		r.mu.Unlock()
		close(c.done)
	}
	for _, o := range before {
		select {
		case <-o.done:
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}
