package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// quotaLease is one (client, month)'s leases on this process (the one in
// use and the one asked for ahead) and the request-rate measurement that
// sizes them.
type quotaLease struct {
	blocks    []*quotaBlock
	refilling bool
	// expires is leaseTTL after the last grant: the leases are used up in
	// order and given back together when the client goes quiet, so the
	// used values a process hands out stay 1, 2, 3, ... with no gap.
	expires time.Time
	// lastUsed is the count after this process's last commit.
	lastUsed int64
	known    bool
	// hits counts the Admit calls since since; rate is the requests/s of
	// the last complete measurement (at least leaseMinRateWindow long).
	hits  int64
	since time.Time
	rate  float64
}

// quotaBlock is one lease: the used values next..end, already in the
// committed count, usable for requests with this quota until the lease
// expires.
type quotaBlock struct {
	quota            *int64
	first, next, end int64
}

func (b *quotaBlock) unused() int64 { return max(b.end-b.next+1, 0) }

func (b *quotaBlock) usable(quota *int64) bool {
	return b.next <= b.end && sameQuota(b.quota, quota)
}

// take admits one request from the first usable lease and returns its used
// value. l.mu is held.
func (q *quotaLease) take(quota *int64, now time.Time) (int64, bool) {
	if !now.Before(q.expires) {
		return 0, false
	}
	for i := 0; i < len(q.blocks); i++ {
		b := q.blocks[i]
		if b.next > b.end { // used up: nothing to give back
			q.blocks = append(q.blocks[:i], q.blocks[i+1:]...)
			i--
			continue
		}
		if b.usable(quota) {
			b.next++
			return b.next - 1, true
		}
	}
	return 0, false
}

// needsRefill reports whether to ask for the next lease now: half of the
// last one is used and none is on its way. l.mu is held.
func (q *quotaLease) needsRefill() bool {
	if q.refilling || len(q.blocks) != 1 {
		return false
	}
	b := q.blocks[0]
	if 2*b.unused() > b.end-b.first+1 {
		return false
	}
	q.refilling = true
	return true
}

// serve admits waiters from the leases in arrival order while they last
// and returns the others. l.mu is held.
func (q *quotaLease) serve(batch []*quotaWaiter, now time.Time) []*quotaWaiter {
	if len(q.blocks) == 0 {
		return batch
	}
	rest := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- quotaResult{err: err}
			continue
		}
		if used, ok := q.take(w.quota, now); ok {
			w.done <- quotaResult{used: used, admitted: true}
			continue
		}
		rest = append(rest, w)
	}
	return rest
}

// voidLeases drops every lease of key and queues their unused slots to be
// given back. l.mu is held.
func (l *QuotaLedger) voidLeases(key quotaKey, lease *quotaLease) {
	for _, b := range lease.blocks {
		if n := b.unused(); n > 0 {
			l.returns[key] += n
		}
	}
	clear(lease.blocks)
	lease.blocks = lease.blocks[:0]
}

// addLease makes used values first..end usable for quota. l.mu is held.
func (l *QuotaLedger) addLease(lease *quotaLease, quota *int64, first, end int64) {
	lease.blocks = append(lease.blocks, &quotaBlock{quota: quota, first: first, next: first, end: end})
	lease.expires = time.Now().Add(leaseTTL)
	l.granted += end - first + 1
}

// leaseSize is how many requests beyond a batch of n a commit counts ahead
// for the client's next requests on this process: zero unless the client
// sustained a rate worth it over at least leaseMinRateWindow and its quota
// is far enough. l.mu is held.
func (l *QuotaLedger) leaseSize(lease *quotaLease, n int, quota *int64) int64 {
	now := time.Now()
	if elapsed := now.Sub(lease.since); elapsed >= leaseMinRateWindow {
		lease.rate = float64(lease.hits) / elapsed.Seconds()
		lease.hits, lease.since = 0, now
	}
	size := int64(lease.rate * leaseSpan.Seconds())
	if size < l.minLease() {
		return 0
	}
	size = min(size, MaxQuotaLease)
	if quota != nil {
		if !lease.known {
			return 0
		}
		headroom := *quota - lease.lastUsed - int64(n)
		if headroom < leaseMinHeadroom {
			return 0
		}
		size = min(size, headroom/64)
	}
	return size
}

// refill commits the next lease ahead of need, in a transaction of its
// own, so the client's requests do not wait for it.
func (l *QuotaLedger) refill(key quotaKey, lease *quotaLease, quota *int64) {
	defer l.wg.Done()
	l.mu.Lock()
	ahead := l.leaseSize(lease, 0, quota)
	l.mu.Unlock()
	var before, after int64
	err := errors.New("no lease wanted")
	if ahead > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		month := time.Unix(key.month, 0).UTC()
		for range 3 {
			err = l.db.Pool.QueryRow(ctx, addUsageOne, key.clientID, month, quota, ahead).Scan(&before, &after)
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
		}
		cancel()
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			l.logger.Warn("store: quota lease failed", "client_id", key.clientID, "err", translate(err, "usage"))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lease.refilling = false
	if err != nil {
		return
	}
	lease.lastUsed, lease.known = after, true
	if after > before {
		l.addLease(lease, quota, before+1, after)
	}
}

// sweep gives back the unused part of expired leases and forgets clients
// that went quiet, until Close.
func (l *QuotaLedger) sweep() {
	defer l.janitor.Done()
	t := time.NewTicker(leaseTTL / 2)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		l.mu.Lock()
		for key, lease := range l.leases {
			if _, busy := l.queues[key]; busy || lease.refilling {
				continue // its flusher gives back an expired lease itself; a refill on its way extends it
			}
			if !now.Before(lease.expires) {
				l.voidLeases(key, lease)
			}
			if len(lease.blocks) == 0 && !lease.refilling && now.Sub(lease.since) > time.Minute {
				delete(l.leases, key)
			}
		}
		l.mu.Unlock()
		l.giveBack()
	}
}

// giveBack subtracts the queued unused lease slots from the count. A
// failure (Postgres unreachable) keeps them queued for the next sweep:
// until then the count is higher than what was served, never lower.
func (l *QuotaLedger) giveBack() {
	l.mu.Lock()
	if len(l.returns) == 0 {
		l.mu.Unlock()
		return
	}
	todo := l.returns
	l.returns = make(map[quotaKey]int64)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	for key, n := range todo {
		_, err := l.db.Pool.Exec(ctx, `UPDATE usage_months SET used = GREATEST(used - $3, 0), updated_at = now()
WHERE client_id = $1 AND month = $2::date`, key.clientID, time.Unix(key.month, 0).UTC(), n)
		l.mu.Lock()
		if err != nil {
			l.returns[key] += n
		} else {
			l.given += n
		}
		l.mu.Unlock()
		if err != nil {
			l.logger.Warn("store: giving back unused quota lease failed; retrying", "client_id", key.clientID, "slots", n, "err", err)
		}
	}
}

func (l *QuotaLedger) minLease() int64 {
	if l.LeaseMin > 0 {
		return l.LeaseMin
	}
	return leaseMin
}
