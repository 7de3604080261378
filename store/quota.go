package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// flushTimeout bounds one batch in Postgres. A batch is shared by many
// requests, so it runs on the ledger's context, not on any one of theirs.
const flushTimeout = 10 * time.Second

// QuotaLedger admits requests against the monthly quota. Postgres is the
// ledger: a request is admitted only once its increment is committed, so
// the count survives a Redis flush or a killed api process, and every api
// process can share one row without over-admitting.
//
// One UPDATE per request on a client's row would serialise every request
// of that client on the row lock. The ledger group-commits instead: the
// Admit calls of one (client, month) queue up while a batch is in
// Postgres, and the next batch takes all of them in one round trip as soon
// as the previous one returns. At low load a batch is a single request and
// waits for nothing; under load, batches grow and the row sees one
// transaction per round trip per api process.
//
// A client that sustains a high request rate on one process, far from its
// quota, gets a lease: the batch's commit also counts the next
// leaseSpan's worth of its requests (as measured on this process), and
// those requests are then admitted from memory, with no round trip,
// because they are already in the committed count. What a lease has not
// used when it expires (leaseTTL), when the quota changes or when the
// ledger closes is given back in one UPDATE. So:
//
//   - nothing is over-admitted: every admitted request, leased or not, was
//     inside the quota in a committed row before it was served;
//   - nothing admitted is lost: a killed process leaves its unused lease
//     in the count (an over-count of at most one lease, about leaseSpan of
//     that client's traffic on that process), never an under-count;
//   - near the quota nothing changes: leases are only granted while the
//     quota is at least leaseMinHeadroom away, and at most 1/64 of what is
//     left, so the last requests of a month are counted one batch at a
//     time as before; a request may be refused up to leaseTTL before
//     another process gives back what its lease did not use.
type QuotaLedger struct {
	db     *DB
	logger *slog.Logger

	mu      sync.Mutex
	queues  map[quotaKey]*quotaQueue
	leases  map[quotaKey]*quotaLease
	returns map[quotaKey]int64 // unused lease slots still to give back (a failed give-back is retried)
	closed  bool
	wg      sync.WaitGroup
	stop    chan struct{}
	janitor sync.WaitGroup

	granted, given int64 // lease slots granted and given back, for LeaseStats

	// LeaseMin overrides the smallest lease (default 256, i.e. a client
	// sending ≈ 2 500 requests/s to this process); tests lower it so that
	// a loaded machine still exercises leases. Set before first use.
	LeaseMin int64
}

const (
	// leaseSpan is how much of a client's measured request rate one lease
	// covers, leaseTTL how long a lease may be used.
	leaseSpan = 100 * time.Millisecond
	leaseTTL  = 250 * time.Millisecond
	// leaseMinRateWindow is the shortest measurement a lease is sized
	// from: a short burst never gets one.
	leaseMinRateWindow = 100 * time.Millisecond
	// leaseMin is the smallest lease worth granting.
	// A lease of leaseSpan's traffic must be at least this large, i.e. the
	// client sends ≈ 2 500 requests/s or more to this process: below that
	// the batched path costs little, and a burst that a loaded machine
	// stretches past leaseMinRateWindow still gets no lease.
	leaseMin = 256
	// MaxQuotaLease is the most requests one lease counts ahead, and so
	// the most a killed api process can leave counted but not served.
	MaxQuotaLease = 20_000
	// leaseMinHeadroom: no lease while the quota is closer than this.
	leaseMinHeadroom = 10_000
)

type quotaKey struct {
	clientID string
	month    int64 // unix seconds of the month's first instant
}

// quotaQueue exists in QuotaLedger.queues exactly while its flusher runs.
type quotaQueue struct {
	month   time.Time
	pending []*quotaWaiter
}

type quotaWaiter struct {
	ctx   context.Context
	quota *int64
	done  chan quotaResult // buffered: the flusher never blocks on a waiter that left
}

type quotaResult struct {
	used     int64
	admitted bool
	err      error
}

// NewQuotaLedger returns a ledger on db. Close it to flush what is pending.
func NewQuotaLedger(db *DB, logger *slog.Logger) *QuotaLedger {
	l := &QuotaLedger{db: db, logger: logger, queues: make(map[quotaKey]*quotaQueue),
		leases: make(map[quotaKey]*quotaLease), returns: make(map[quotaKey]int64), stop: make(chan struct{})}
	l.janitor.Add(1)
	go l.sweep()
	return l
}

// LeaseStats reports how many request slots leases have counted ahead and
// how many of them were given back unused, since the ledger started.
func (l *QuotaLedger) LeaseStats() (granted, givenBack int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.granted, l.given
}

// Admit records one request of clientID in now's calendar month (UTC) if
// quota allows it; a nil quota is unlimited but still counted, for GET
// /usage. The quota is passed per call, so a tier change applies to the
// very next request. used is the count including this request when
// admitted, the current count when refused.
//
// If ctx ends before the request's batch returns, Admit returns ctx's
// error and the caller must not serve the request; the batch may still
// commit it. The count is then one higher than what was served: the ledger
// may over-count a cancelled request, never under-count a served one.
// Waiters whose ctx has ended before their batch is sent are left out.
func (l *QuotaLedger) Admit(ctx context.Context, clientID string, quota *int64, now time.Time) (used int64, admitted bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	w := &quotaWaiter{ctx: ctx, quota: quota, done: make(chan quotaResult, 1)}
	month := domain.Month(now)
	key := quotaKey{clientID: clientID, month: month.Unix()}

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, false, errors.New("store: quota ledger closed")
	}
	lease := l.leases[key]
	if lease == nil {
		lease = &quotaLease{since: time.Now()}
		l.leases[key] = lease
	}
	lease.hits++
	if used, ok := lease.take(quota, time.Now()); ok {
		if lease.needsRefill() {
			l.wg.Add(1)
			go l.refill(key, lease, quota)
		}
		l.mu.Unlock()
		return used, true, nil
	}
	q := l.queues[key]
	if q == nil {
		q = &quotaQueue{month: month}
		l.queues[key] = q
		l.wg.Add(1)
		go l.flush(key, q)
	}
	q.pending = append(q.pending, w)
	l.mu.Unlock()

	select {
	case r := <-w.done:
		return r.used, r.admitted, r.err
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
}

// Close waits for every pending request to be committed (or refused),
// stops the flushers and gives back what the leases did not use. Admit
// fails after Close.
func (l *QuotaLedger) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	close(l.stop)
	l.janitor.Wait()
	l.mu.Lock()
	for key, lease := range l.leases {
		l.voidLeases(key, lease)
	}
	l.mu.Unlock()
	l.giveBack()
}

// flush commits q's batches one after the other until q is empty.
func (l *QuotaLedger) flush(key quotaKey, q *quotaQueue) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			delete(l.queues, key)
			l.mu.Unlock()
			return
		}
		lease := l.leases[key]
		// Requests that queued while the previous batch was in Postgres are
		// served from the lease that batch brought, as far as it goes.
		if batch = lease.serve(batch, time.Now()); len(batch) == 0 {
			l.mu.Unlock()
			continue
		}
		// What is left needs a commit: the leases are used up, expired or
		// for another quota, and what they did not use goes back first.
		l.voidLeases(key, lease)
		ahead := l.leaseSize(lease, len(batch), batch[len(batch)-1].quota)
		l.mu.Unlock()
		l.giveBack()
		l.commit(key, q.month, batch, lease, ahead)
	}
}

// commit applies one batch in one round trip and answers its waiters. With
// ahead > 0 (one quota value in the batch) the same commit counts ahead
// more requests, which become the lease's slots.
func (l *QuotaLedger) commit(key quotaKey, month time.Time, batch []*quotaWaiter, lease *quotaLease, ahead int64) {
	clientID := key.clientID
	live := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- quotaResult{err: err}
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	// Waiters are admitted in arrival order. Runs of one quota value share
	// an UPDATE; a batch mixes quotas only around a tier change.
	var runs [][]*quotaWaiter
	for i, w := range live {
		if i == 0 || !sameQuota(live[i-1].quota, w.quota) {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], w)
	}
	if len(runs) > 1 {
		ahead = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	before, afters, err := l.apply(ctx, clientID, month, runs, ahead)
	if err != nil {
		l.logger.Error("store: quota batch failed", "client_id", clientID, "requests", len(live), "err", err)
		for _, w := range live {
			w.done <- quotaResult{err: err}
		}
		return
	}
	last := runs[len(runs)-1]
	l.mu.Lock()
	lease.lastUsed, lease.known = afters[len(afters)-1], true
	if ahead > 0 {
		// The batch is served first; what the commit counted beyond it is
		// the lease (less when the quota cut it short).
		if first := before + int64(len(last)) + 1; first <= afters[0] {
			l.addLease(lease, last[0].quota, first, afters[0])
			afters[0] = first - 1
		}
	}
	l.mu.Unlock()
	for r, run := range runs {
		admitted := afters[r] - before
		for i, w := range run {
			if int64(i) < admitted {
				w.done <- quotaResult{used: before + int64(i) + 1, admitted: true}
			} else {
				w.done <- quotaResult{used: afters[r]}
			}
		}
		before = afters[r]
	}
}

const (
	// ensureUsageRow makes sure the month's row exists for the SELECT ...
	// FOR UPDATE below to lock (a new month or a new client).
	ensureUsageRow = `INSERT INTO usage_months (client_id, month, used) VALUES ($1, $2::date, 0)
ON CONFLICT (client_id, month) DO NOTHING`
	// lockUsageRow reads the count before the batch and holds the row until
	// the batch commits, so the count read is the one the UPDATE starts from.
	lockUsageRow = `SELECT used FROM usage_months WHERE client_id = $1 AND month = $2::date FOR UPDATE`
	// addUsage adds k requests, or as many as the quota still allows; a quota
	// lowered below the count admits none and never lowers the count.
	addUsage = `UPDATE usage_months
SET used = CASE WHEN $3::bigint IS NULL THEN used + $4::bigint
                ELSE LEAST(used + $4::bigint, GREATEST(used, $3::bigint)) END,
    updated_at = now()
WHERE client_id = $1 AND month = $2::date
RETURNING used`
)

// addUsageOne is the whole batch of one run (the usual case: one quota
// value) in ONE statement, so the row lock is held for one statement's
// execution plus the commit instead of three statements'. The subquery
// locks the month's row (FOR UPDATE: under READ COMMITTED it waits for a
// concurrent batch and then reads the committed count), the UPDATE adds k
// requests or as many as the quota still allows, and RETURNING reports the
// count before and after. The first batch of a month (no row yet) inserts
// the row with what it admits; two replicas racing on that insert leave
// one of them with no row returned (ON CONFLICT DO NOTHING), and it simply
// runs the statement again, now updating the row the other inserted.
//
// $1 client, $2 month, $3 quota (NULL: unlimited), $4 k.
const addUsageOne = `WITH upd AS (
  UPDATE usage_months u
  SET used = CASE WHEN $3::bigint IS NULL THEN cur.used + $4::bigint
                  ELSE LEAST(cur.used + $4::bigint, GREATEST(cur.used, $3::bigint)) END,
      updated_at = now()
  FROM (SELECT used FROM usage_months WHERE client_id = $1 AND month = $2::date FOR UPDATE) cur
  WHERE u.client_id = $1 AND u.month = $2::date
  RETURNING cur.used AS before, u.used AS after
), ins AS (
  INSERT INTO usage_months (client_id, month, used)
  SELECT $1, $2::date, CASE WHEN $3::bigint IS NULL THEN $4::bigint ELSE LEAST($4::bigint, GREATEST($3::bigint, 0)) END
  WHERE NOT EXISTS (SELECT 1 FROM upd)
  ON CONFLICT (client_id, month) DO NOTHING
  RETURNING 0::bigint AS before, used AS after
)
SELECT before, after FROM upd UNION ALL SELECT before, after FROM ins`

// apply commits one batch and returns the count before it and after each
// run. One run (one quota value) is one statement, one implicit
// transaction; a batch mixing quotas (around a tier change) sends every
// statement in one pipeline, whose statements before one Sync form one
// implicit transaction.
func (l *QuotaLedger) apply(ctx context.Context, clientID string, month time.Time, runs [][]*quotaWaiter, ahead int64) (before int64, afters []int64, err error) {
	if len(runs) == 1 {
		var after int64
		for range 3 {
			err = l.db.Pool.QueryRow(ctx, addUsageOne, clientID, month, runs[0][0].quota, int64(len(runs[0]))+ahead).Scan(&before, &after)
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
			// Lost the race to insert the month's row: it exists now.
		}
		if err != nil {
			return 0, nil, translate(err, "usage")
		}
		return before, []int64{after}, nil
	}
	return l.applyRuns(ctx, clientID, month, runs)
}

// applyRuns sends every statement of a multi-run batch in one pipeline.
// The row lock taken by lockUsageRow is held until the last UPDATE
// commits: before is exact, and afters[r] is the count after run r.
func (l *QuotaLedger) applyRuns(ctx context.Context, clientID string, month time.Time, runs [][]*quotaWaiter) (before int64, afters []int64, err error) {
	b := &pgx.Batch{}
	b.Queue(ensureUsageRow, clientID, month)
	b.Queue(lockUsageRow, clientID, month)
	for _, run := range runs {
		b.Queue(addUsage, clientID, month, run[0].quota, int64(len(run)))
	}
	res := l.db.Pool.SendBatch(ctx, b)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return 0, nil, translate(err, "usage")
	}
	if err := res.QueryRow().Scan(&before); err != nil {
		return 0, nil, translate(err, "usage")
	}
	afters = make([]int64, len(runs))
	for r := range runs {
		if err := res.QueryRow().Scan(&afters[r]); err != nil {
			return 0, nil, translate(err, "usage")
		}
	}
	if err := res.Close(); err != nil {
		return 0, nil, translate(err, "usage")
	}
	return before, afters, nil
}

func sameQuota(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// UsedThisMonth returns how many requests of clientID were admitted in
// now's calendar month (UTC); 0 before the first one.
func (db *DB) UsedThisMonth(ctx context.Context, clientID string, now time.Time) (int64, error) {
	var used int64
	err := db.Pool.QueryRow(ctx, `SELECT used FROM usage_months WHERE client_id = $1 AND month = $2::date`,
		clientID, domain.Month(now)).Scan(&used)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: used this month: %w", err)
	}
	return used, nil
}
