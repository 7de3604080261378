package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A lease is how a busy client far below its limit avoids a Redis round
// trip per request: one script call puts g members in the client's window
// ahead of time (stamped at the lease's deadline), and the replica then
// admits up to g requests from memory until that deadline. When half of
// the lease is used, the next one is asked for in the background, so
// requests do not wait for it. What a lease did not use is removed from
// the window by the next call of the client's flusher or, for an idle
// client, when the lease expires. See slidingLogScript for why the window
// stays exact.

// leaseBlock is one lease: slots next..g of the members prefix+"L"+n,
// usable for limit until deadline.
type leaseBlock struct {
	limit    int
	prefix   string
	next, g  int
	deadline time.Time
	// count is the window's count right after the lease was added and
	// oldest when its oldest entry leaves: the RateLimit headers of leased
	// requests.
	count  int
	oldest time.Time
}

func (b *leaseBlock) usable(limit int, now time.Time) bool {
	return b.next <= b.g && b.limit == limit && now.Before(b.deadline)
}

// rateLease is a client's leases on this replica (the one in use and the
// one asked for ahead) and the request-rate measurement that sizes them.
type rateLease struct {
	blocks    []*leaseBlock
	refilling bool
	// hits counts requests since since; rate is the requests/s of the
	// last complete measurement.
	hits  int
	since time.Time
	rate  float64
}

// take admits one request from the first usable lease, decided as if the
// lease's requests had been counted one after another.
func (r *rateLease) take(limit int, now time.Time) (Decision, bool) {
	for i := 0; i < len(r.blocks); i++ {
		b := r.blocks[i]
		if b.next > b.g { // used up: nothing to give back
			r.blocks = append(r.blocks[:i], r.blocks[i+1:]...)
			i--
			continue
		}
		if b.usable(limit, now) {
			count := b.count - b.g + b.next
			b.next++
			return decide(true, limit, count, b.oldest.Sub(now), b.oldest.Sub(now)), true
		}
	}
	return Decision{}, false
}

// needsRefill reports whether to ask for the next lease now: half of the
// last one is used and none is on its way.
func (r *rateLease) needsRefill() bool {
	if r.refilling || len(r.blocks) != 1 {
		return false
	}
	b := r.blocks[0]
	if b.g-b.next+1 > b.g/2 {
		return false
	}
	r.refilling = true
	return true
}

// serve answers waiters from the leases in arrival order while they last
// and returns the others.
func (r *rateLease) serve(batch []*allowWaiter, now time.Time) []*allowWaiter {
	if len(r.blocks) == 0 {
		return batch
	}
	rest := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- allowResult{err: err}
			continue
		}
		if d, ok := r.take(w.limit, now); ok {
			w.done <- allowResult{d: d}
			continue
		}
		rest = append(rest, w)
	}
	return rest
}

// leaseReturn names the unused members of a lease.
type leaseReturn struct {
	prefix   string
	from, to int
}

// giveBackUnusable drops the leases a request with limit cannot use
// (expired, or taken with another limit) and names their unused members.
func (r *rateLease) giveBackUnusable(limit int, now time.Time) []leaseReturn {
	var out []leaseReturn
	kept := r.blocks[:0]
	for _, b := range r.blocks {
		switch {
		case b.usable(limit, now):
			kept = append(kept, b)
		case b.next <= b.g:
			out = append(out, leaseReturn{prefix: b.prefix + "L", from: b.next, to: b.g})
		}
	}
	clear(r.blocks[len(kept):])
	r.blocks = kept
	return out
}

// size is the lease to ask for: leaseSpan of the client's request rate,
// as measured over the last complete window of at least
// leaseMinRateWindow, or 0.
func (r *rateLease) size(limit, minSize int) int {
	now := time.Now()
	if elapsed := now.Sub(r.since); elapsed >= leaseMinRateWindow {
		r.rate = float64(r.hits) / elapsed.Seconds()
		r.hits, r.since = 0, now
	}
	n := int(r.rate * leaseSpan.Seconds())
	if n < minSize || limit < leaseMinHeadroom {
		return 0
	}
	return min(n, leaseMax)
}

// scriptCall is one call of slidingLogScript: runs of (limit, k), the
// lease wanted and the leases given back.
type scriptCall struct {
	runs []scriptRun
	want int
	gbs  []leaseReturn
}

type scriptRun struct{ limit, k int }

type runResult struct {
	before, admitted int
	oldest, blocker  int64
}

// call runs the script once. It returns Redis' time, the lease granted
// (nil when none) and each run's result.
func (l *RollingWindowLimiter) call(clientID string, c scriptCall) (now int64, lease *leaseBlock, out []runResult, err error) {
	sent := time.Now()
	prefix := l.instance + strconv.FormatUint(l.seq.Add(1), 36) + "."
	args := make([]any, 0, 5+3*len(c.gbs)+2*len(c.runs))
	args = append(args, Window.Microseconds(), prefix, c.want, leaseTTL.Microseconds(), len(c.gbs))
	for _, gb := range c.gbs {
		args = append(args, gb.prefix, gb.from, gb.to)
	}
	for _, r := range c.runs {
		args = append(args, r.limit, r.k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	res, err := l.script.Run(ctx, l.rdb, []string{l.key(clientID)}, args...).Int64Slice()
	cancel()
	if err == nil && len(res) != 2+4*len(c.runs) {
		err = errors.New("malformed script reply")
	}
	if err != nil {
		return 0, nil, nil, fmt.Errorf("limits: rate limit %s: %w", clientID, err)
	}
	now = res[0]
	out = make([]runResult, len(c.runs))
	for r := range out {
		out[r] = runResult{before: int(res[2+4*r]), admitted: int(res[3+4*r]), oldest: res[4+4*r], blocker: res[5+4*r]}
	}
	if g := int(res[1]); g > 0 && len(out) > 0 {
		// The lease's members were added after the last run: the window
		// holds that run's count plus g, and its oldest entry is the run's.
		last := out[len(out)-1]
		lease = &leaseBlock{limit: c.runs[len(c.runs)-1].limit, prefix: prefix, next: 1, g: g,
			deadline: sent.Add(leaseTTL), count: last.before + last.admitted + g,
			oldest: time.Now().Add(time.Duration(last.oldest+Window.Microseconds()-now) * time.Microsecond)}
	}
	return now, lease, out, nil
}

// addLease makes b usable and schedules the give-back of what it will not
// have used by its deadline.
func (l *RollingWindowLimiter) addLease(clientID string, lease *rateLease, b *leaseBlock) {
	l.mu.Lock()
	l.leased += int64(b.g)
	lease.blocks = append(lease.blocks, b)
	l.mu.Unlock()
	time.AfterFunc(time.Until(b.deadline), func() { l.expire(clientID, lease, b) })
}

// refill asks for the next lease ahead of need, in a call of its own.
func (l *RollingWindowLimiter) refill(clientID string, lease *rateLease, limit int) {
	l.mu.Lock()
	want := lease.size(limit, l.minLease())
	l.mu.Unlock()
	if want > 0 {
		if _, b, _, err := l.call(clientID, scriptCall{runs: []scriptRun{{limit: limit}}, want: want}); err == nil && b != nil {
			l.addLease(clientID, lease, b)
		}
	}
	l.mu.Lock()
	lease.refilling = false
	l.mu.Unlock()
}

// expire gives back what b did not use, unless a call already did.
func (l *RollingWindowLimiter) expire(clientID string, lease *rateLease, b *leaseBlock) {
	l.mu.Lock()
	i := -1
	for j, x := range lease.blocks {
		if x == b {
			i = j
		}
	}
	if i < 0 {
		l.mu.Unlock()
		return
	}
	lease.blocks = append(lease.blocks[:i], lease.blocks[i+1:]...)
	gb := leaseReturn{prefix: b.prefix + "L", from: b.next, to: b.g}
	l.mu.Unlock()
	if gb.from <= gb.to {
		// On failure the slots stay in the window until they age out: the
		// count is then high, never low.
		_, _, _, _ = l.call(clientID, scriptCall{gbs: []leaseReturn{gb}})
	}
}

// decideBatch runs one script call for batch and answers its waiters. The
// call also gives back gbs and asks for a lease of want slots.
func (l *RollingWindowLimiter) decideBatch(clientID string, batch []*allowWaiter, lease *rateLease, gbs []leaseReturn, want int) {
	live := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- allowResult{err: err}
			continue
		}
		live = append(live, w)
	}
	var c scriptCall
	c.gbs, c.want = gbs, want
	for i, w := range live {
		if i == 0 || live[i-1].limit != w.limit {
			c.runs = append(c.runs, scriptRun{limit: w.limit})
		}
		c.runs[len(c.runs)-1].k++
	}
	if len(live) == 0 {
		if len(gbs) > 0 {
			_, _, _, _ = l.call(clientID, c)
		}
		return
	}
	now, b, res, err := l.call(clientID, c)
	if err != nil {
		for _, w := range live {
			w.done <- allowResult{err: err}
		}
		return
	}
	if b != nil {
		l.addLease(clientID, lease, b)
	}
	window := Window.Microseconds()
	i := 0
	for r, run := range c.runs {
		rr := res[r]
		untilOldest := time.Duration(rr.oldest+window-now) * time.Microsecond
		untilFree := time.Duration(rr.blocker+window-now) * time.Microsecond
		for j := range run.k {
			var d Decision
			if j < rr.admitted {
				d = decide(true, run.limit, rr.before+j+1, untilOldest, untilFree)
			} else {
				d = decide(false, run.limit, rr.before+rr.admitted, untilOldest, untilFree)
			}
			live[i].done <- allowResult{d: d}
			i++
		}
	}
}
