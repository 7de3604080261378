package admission

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// The batching-and-lease engine is shared by the rolling window (a Redis
// script per call) and the monthly quota (a Postgres statement per call).
//
// Batching. The requests of one key (a client's window, a client's month)
// queue up while a call for that key is out; as soon as it returns, one
// flusher goroutine sends everything queued as ONE call, decided in
// arrival order. At low load a batch is a single request and waits for
// nothing; under load a key costs one round trip per batch.
//
// Leases. A key that keeps this process busy (its measured rate times
// leaseSpan is at least the minimum lease) and whose backend allows it
// gets, in the same call, a lease: slots already counted by the backend
// (members in the window, increments in the ledger) that this process then
// hands out from memory, in order, until the lease's deadline. When half
// of a lease is used the next one is asked for in the background, so
// requests do not wait for it. What a lease did not use is given back by
// the next call of the key, by the janitor once the deadline has passed,
// or by Close; a give-back that fails is kept and retried. The backends
// state why their counts stay exact (slidingLogScript, QuotaLedger).
//
// Lifecycle. Every goroutine (flushers, refills, the janitor) is tracked;
// Close answers what is queued, stops them and gives back every unused
// slot. Time comes from the injected clock; the janitor's ticker only
// wakes it up.

// leasePolicy sizes and times leases.
type leasePolicy struct {
	// span is how much of the key's measured request rate one lease
	// covers, ttl how long it may be used.
	span, ttl time.Duration
	// minRateWindow is the shortest measurement a lease is sized from: a
	// short burst never gets one.
	minRateWindow time.Duration
	// min is the smallest lease worth asking for, max the largest.
	min, max int
	// expireTogether: a new lease extends the deadline of the key's
	// earlier ones, so they are used up in order and given back together
	// when the key goes quiet (the quota's used values stay 1, 2, 3, ...).
	// Without it each lease keeps its own deadline (the window's members
	// are stamped at it).
	expireTogether bool
	// callTimeout bounds one backend call; it does not run on any one
	// request's context, since a batch is shared.
	callTimeout time.Duration
}

// The defaults of both engines.
const (
	leaseSpan          = 100 * time.Millisecond
	leaseTTL           = 250 * time.Millisecond
	leaseMinRateWindow = 100 * time.Millisecond
	// leaseMin: a lease of leaseSpan's traffic must be at least this large,
	// i.e. the client sends ≈ 2 500 requests/s or more to this process:
	// below that the batched path costs little, and a burst that a loaded
	// machine stretches past leaseMinRateWindow still gets no lease.
	leaseMin = 256
	// leaseMax is the most slots one lease takes ahead.
	leaseMax = 20_000
	// leaseMinHeadroom: no lease unless the limit or quota stays at least
	// this far away, and then at most 1/64 of what is left.
	leaseMinHeadroom = 10_000
	// idleForget is how long a quiet key's state is kept.
	idleForget = time.Minute
)

func defaultPolicy() leasePolicy {
	return leasePolicy{span: leaseSpan, ttl: leaseTTL, minRateWindow: leaseMinRateWindow, min: leaseMin, max: leaseMax}
}

// run is a stretch of a batch's requests, in arrival order, that share
// one parameter (a batch mixes parameters only around a tier change).
type run[P comparable] struct {
	param P
	n     int
}

// leaseSlots are the slots of one granted lease, as the backend counted them.
type leaseSlots[R any, G returnable] interface {
	// result is the answer of the i-th slot (0-based) handed out at now.
	result(i int, now time.Time) R
	// unused names slots from..n-1, to be given back.
	unused(from, n int) G
}

// outcome is the answer of one backend call.
type outcome[R any, G returnable] struct {
	results []R // one per request of the runs, in order
	// lease is the lease granted with the call (nil: none) and leaseN its size.
	lease  leaseSlots[R, G]
	leaseN int
	// hint is what the backend wants to remember about the key (the
	// ledger's count after the call), passed back to leaseCap.
	hint int64
	// gaveBack: the give-backs sent with the call were applied.
	gaveBack bool
}

// backend is what the engine batches: one round trip per call.
type backend[K comparable, P comparable, R any, G returnable] interface {
	// call gives back gbs, decides the runs in order and grants a lease of
	// up to want slots for the last run's parameter (want 0: none). A run
	// with n = 0 asks for the lease alone.
	call(ctx context.Context, k K, runs []run[P], want int, gbs []G) (outcome[R, G], error)
	// giveBack returns unused lease slots.
	giveBack(ctx context.Context, k K, gbs []G) error
	// leaseCap is how much of size the backend allows for param, with
	// pending requests about to be decided; hint/known are from the last call.
	leaseCap(param P, hint int64, known bool, pending, size int) int
}

// engine batches and leases the calls of one backend.
type engine[K comparable, P comparable, R any, G returnable] struct {
	name    string
	be      backend[K, P, R, G]
	policy  leasePolicy
	now     func() time.Time
	logger  *slog.Logger
	leaseMn func() int // the smallest lease (a test may lower it)

	mu      sync.Mutex
	keys    map[K]*keyState[P, R, G]
	returns map[K][]G // give-backs still to send
	closed  bool
	granted int64 // slots leased, for LeaseStats
	given   int64 // slots given back

	wg      sync.WaitGroup // flushers and refills
	stop    chan struct{}
	janitor sync.WaitGroup
	pool    sync.Pool // *waiter[P, R]
}

// keyState is one key's queue, leases and rate measurement. It lives in
// engine.keys while the key is active (idleForget after its last use).
type keyState[P comparable, R any, G returnable] struct {
	flushing bool
	pending  []*waiter[P, R]
	spare    []*waiter[P, R] // the previous batch's slice, reused

	blocks    []*leaseBlock[P, R, G]
	refilling bool
	// hits counts requests since since; rate is the requests/s of the last
	// complete measurement.
	hits  int
	since time.Time
	rate  float64
	// hint is the backend's memo of the last call.
	hint     int64
	known    bool
	lastSeen time.Time
}

type waiter[P comparable, R any] struct {
	ctx   context.Context
	param P
	done  chan answer[R] // buffered: the flusher never blocks on a waiter that left
}

type answer[R any] struct {
	r   R
	err error
}

// leaseBlock is one lease: slots next..n-1 usable for param until deadline.
type leaseBlock[P comparable, R any, G returnable] struct {
	param    P
	n, next  int
	deadline time.Time
	slots    leaseSlots[R, G]
}

func (b *leaseBlock[P, R, G]) usable(param P, now time.Time) bool {
	return b.next < b.n && b.param == param && now.Before(b.deadline)
}

var errClosed = errors.New("admission: closed")

// returnable names unused lease slots to give back (members of a window,
// a count in the ledger).
type returnable interface {
	// slots is how many slots it gives back.
	slots() int64
}

func newEngine[K comparable, P comparable, R any, G returnable](name string, be backend[K, P, R, G], policy leasePolicy,
	now func() time.Time, logger *slog.Logger, minLease func() int) *engine[K, P, R, G] {
	e := &engine[K, P, R, G]{name: name, be: be, policy: policy, now: now, logger: logger, leaseMn: minLease,
		keys: make(map[K]*keyState[P, R, G]), returns: make(map[K][]G), stop: make(chan struct{})}
	e.pool.New = func() any { return &waiter[P, R]{done: make(chan answer[R], 1)} }
	e.janitor.Add(1)
	go e.sweep()
	return e
}

// admit decides one request of k with param.
//
// If ctx ends before the request's batch returns, admit returns ctx's
// error; the batch may still have counted the request (as a single call
// cut off by its context may have): a backend over-counts a cancelled
// request, never under-counts a served one. Waiters whose ctx ended before
// their batch is sent are left out of it.
// now is the engine clock's reading, taken by the caller (one clock read
// serves a whole request).
func (e *engine[K, P, R, G]) admit(ctx context.Context, k K, param P, now time.Time) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return zero, errClosed
	}
	st := e.keys[k]
	if st == nil {
		st = &keyState[P, R, G]{since: now}
		e.keys[k] = st
	}
	st.hits++
	st.lastSeen = now
	if r, ok := st.take(param, now); ok {
		if st.needsRefill() {
			e.wg.Add(1)
			go e.refill(k, st, param)
		}
		e.mu.Unlock()
		return r, nil
	}
	w := e.pool.Get().(*waiter[P, R])
	w.ctx, w.param = ctx, param
	st.pending = append(st.pending, w)
	if !st.flushing {
		st.flushing = true
		e.wg.Add(1)
		go e.flush(k, st)
	}
	e.mu.Unlock()

	select {
	case a := <-w.done:
		w.ctx = nil
		e.pool.Put(w) // answered: the flusher holds it no more
		return a.r, a.err
	case <-ctx.Done():
		// The flusher may still answer into w.done: w is not reused.
		return zero, ctx.Err()
	}
}

// take hands out the next slot of the first usable lease. e.mu is held.
func (st *keyState[P, R, G]) take(param P, now time.Time) (R, bool) {
	for i := 0; i < len(st.blocks); i++ {
		b := st.blocks[i]
		if b.next >= b.n { // used up: nothing to give back
			st.blocks = append(st.blocks[:i], st.blocks[i+1:]...)
			i--
			continue
		}
		if b.usable(param, now) {
			b.next++
			return b.slots.result(b.next-1, now), true
		}
	}
	var zero R
	return zero, false
}

// needsRefill reports whether to ask for the next lease now: half of the
// only lease is used and none is on its way. e.mu is held.
func (st *keyState[P, R, G]) needsRefill() bool {
	if st.refilling || len(st.blocks) != 1 {
		return false
	}
	if b := st.blocks[0]; 2*(b.n-b.next) > b.n {
		return false
	}
	st.refilling = true
	return true
}

// flush sends the key's batches one after the other until its queue is empty.
func (e *engine[K, P, R, G]) flush(k K, st *keyState[P, R, G]) {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		batch := st.pending
		st.pending, st.spare = st.spare[:0], nil
		if len(batch) == 0 {
			st.flushing = false
			e.mu.Unlock()
			return
		}
		full := batch
		now := e.now()
		// Requests that queued while the previous call was out are served
		// from the lease it brought, as far as it goes; the rest need a
		// call, which gives back the leases they cannot use and may bring a
		// new one.
		batch = e.serve(st, batch, now)
		var (
			gbs  []G
			want int
		)
		if len(batch) > 0 {
			param := batch[len(batch)-1].param
			gbs = append(e.takeReturns(k), st.dropUnusable(param, now)...)
			want = e.leaseSize(st, param, len(batch), now)
		}
		e.mu.Unlock()
		if len(batch) > 0 {
			e.decide(k, st, batch, gbs, want)
		}
		clear(full)
		e.mu.Lock()
		st.spare = full[:0]
		e.mu.Unlock()
	}
}

// serve answers waiters from the leases in arrival order while they last
// and returns the others. e.mu is held.
func (e *engine[K, P, R, G]) serve(st *keyState[P, R, G], batch []*waiter[P, R], now time.Time) []*waiter[P, R] {
	if len(st.blocks) == 0 {
		return batch
	}
	rest := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- answer[R]{err: err}
			continue
		}
		if r, ok := st.take(w.param, now); ok {
			w.done <- answer[R]{r: r}
			continue
		}
		rest = append(rest, w)
	}
	return rest
}

// dropUnusable removes the leases a request with param cannot use
// (expired, or granted for another parameter) and names their unused
// slots. e.mu is held.
func (st *keyState[P, R, G]) dropUnusable(param P, now time.Time) []G {
	var out []G
	kept := st.blocks[:0]
	for _, b := range st.blocks {
		switch {
		case b.usable(param, now):
			kept = append(kept, b)
		case b.next < b.n:
			out = append(out, b.slots.unused(b.next, b.n))
		}
	}
	clear(st.blocks[len(kept):])
	st.blocks = kept
	return out
}

// takeReturns hands over the key's give-backs still to send. e.mu is held.
func (e *engine[K, P, R, G]) takeReturns(k K) []G {
	gbs := e.returns[k]
	delete(e.returns, k)
	return gbs
}

// leaseSize is the lease to ask for: leaseSpan of the key's request rate,
// as measured over the last complete window of at least minRateWindow,
// within what the backend allows. e.mu is held.
func (e *engine[K, P, R, G]) leaseSize(st *keyState[P, R, G], param P, pending int, now time.Time) int {
	if elapsed := now.Sub(st.since); elapsed >= e.policy.minRateWindow {
		st.rate = float64(st.hits) / elapsed.Seconds()
		st.hits, st.since = 0, now
	}
	size := int(st.rate * e.policy.span.Seconds())
	if size < e.leaseMn() {
		return 0
	}
	return e.be.leaseCap(param, st.hint, st.known, pending, min(size, e.policy.max))
}

// decide makes one call for batch and answers its waiters.
func (e *engine[K, P, R, G]) decide(k K, st *keyState[P, R, G], batch []*waiter[P, R], gbs []G, want int) {
	live := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- answer[R]{err: err}
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		e.sendReturns(k, gbs)
		return
	}
	var runs []run[P]
	for i, w := range live {
		if i == 0 || live[i-1].param != w.param {
			runs = append(runs, run[P]{param: w.param})
		}
		runs[len(runs)-1].n++
	}
	out, err := e.call(k, st, runs, want, gbs)
	if err != nil {
		for _, w := range live {
			w.done <- answer[R]{err: err}
		}
		return
	}
	for i, w := range live {
		w.done <- answer[R]{r: out.results[i]}
	}
}

// call runs one backend call and records what it brought: the lease, the
// backend's memo, and the give-backs it could not apply.
func (e *engine[K, P, R, G]) call(k K, st *keyState[P, R, G], runs []run[P], want int, gbs []G) (outcome[R, G], error) {
	sent := e.now()
	ctx, cancel := context.WithTimeout(context.Background(), e.policy.callTimeout)
	out, err := e.be.call(ctx, k, runs, want, gbs)
	cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !out.gaveBack && len(gbs) > 0 {
		e.returns[k] = append(e.returns[k], gbs...)
	} else if len(gbs) > 0 {
		e.countGiven(gbs)
	}
	if err != nil {
		return out, err
	}
	st.hint, st.known = out.hint, true
	if out.lease != nil && out.leaseN > 0 {
		// A lease may be used until its deadline, counted from when the
		// call was SENT: the backend stamped it from its own "now", which
		// is later.
		b := &leaseBlock[P, R, G]{param: runs[len(runs)-1].param, n: out.leaseN, deadline: sent.Add(e.policy.ttl), slots: out.lease}
		if e.policy.expireTogether {
			for _, old := range st.blocks {
				old.deadline = b.deadline
			}
		}
		st.blocks = append(st.blocks, b)
		e.granted += int64(out.leaseN)
	}
	return out, nil
}

// refill asks for the next lease ahead of need, in a call of its own.
func (e *engine[K, P, R, G]) refill(k K, st *keyState[P, R, G], param P) {
	defer e.wg.Done()
	e.mu.Lock()
	want := e.leaseSize(st, param, 0, e.now())
	e.mu.Unlock()
	if want > 0 {
		if _, err := e.call(k, st, []run[P]{{param: param}}, want, nil); err != nil {
			e.logger.Warn("admission: lease refill failed", "engine", e.name, "err", err)
		}
	}
	e.mu.Lock()
	st.refilling = false
	e.mu.Unlock()
}

// sendReturns gives back gbs in a call of their own; a failure keeps them
// for the next attempt.
func (e *engine[K, P, R, G]) sendReturns(k K, gbs []G) {
	if len(gbs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.policy.callTimeout)
	err := e.be.giveBack(ctx, k, gbs)
	cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.returns[k] = append(e.returns[k], gbs...)
		e.logger.Warn("admission: giving back unused lease slots failed; retrying", "engine", e.name, "err", err)
		return
	}
	e.countGiven(gbs)
}

// countGiven adds given-back slots to the stats. e.mu is held.
func (e *engine[K, P, R, G]) countGiven(gbs []G) {
	for _, g := range gbs {
		e.given += g.slots()
	}
}

// sweep gives back the unused part of expired leases and forgets keys that
// went quiet, until Close.
func (e *engine[K, P, R, G]) sweep() {
	defer e.janitor.Done()
	t := time.NewTicker(e.policy.ttl / 4)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		e.sweepOnce()
	}
}

func (e *engine[K, P, R, G]) sweepOnce() {
	now := e.now()
	e.mu.Lock()
	for k, st := range e.keys {
		if st.flushing || st.refilling {
			continue // its flusher gives back expired leases itself; a refill on its way may extend them
		}
		kept := st.blocks[:0]
		for _, b := range st.blocks {
			switch {
			case now.Before(b.deadline) && b.next < b.n:
				kept = append(kept, b)
			case b.next < b.n:
				e.returns[k] = append(e.returns[k], b.slots.unused(b.next, b.n))
			}
		}
		clear(st.blocks[len(kept):])
		st.blocks = kept
		if len(st.blocks) == 0 && now.Sub(st.lastSeen) > idleForget {
			delete(e.keys, k)
		}
	}
	todo := e.returns
	e.returns = make(map[K][]G)
	e.mu.Unlock()
	for k, gbs := range todo {
		e.sendReturns(k, gbs)
	}
}

// close answers what is queued, stops every goroutine and gives back what
// the leases did not use. admit fails afterwards.
func (e *engine[K, P, R, G]) close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	e.wg.Wait()
	close(e.stop)
	e.janitor.Wait()
	e.mu.Lock()
	for k, st := range e.keys {
		for _, b := range st.blocks {
			if b.next < b.n {
				e.returns[k] = append(e.returns[k], b.slots.unused(b.next, b.n))
			}
		}
		st.blocks = nil
	}
	todo := e.returns
	e.returns = make(map[K][]G)
	e.mu.Unlock()
	for k, gbs := range todo {
		e.sendReturns(k, gbs)
	}
}

// leaseStats reports the slots leased and given back since the start.
func (e *engine[K, P, R, G]) leaseStats() (granted, given int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.granted, e.given
}

// hintOf is the backend's memo of k's last call (the ledger's count after
// it), when k is still known.
func (e *engine[K, P, R, G]) hintOf(k K) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.keys[k]; st != nil && st.known {
		return st.hint, true
	}
	return 0, false
}
