package admission

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
)

// UsageStore is the ledger's storage: the statements on the month's row of
// a client (store.DB implements it). Each call is one round trip and one
// transaction, committed before it returns.
type UsageStore interface {
	// AddUsage adds n requests to clientID's count for month, or as many as
	// quota (nil: unlimited) still allows, and returns the count before and
	// after. A quota below the count adds none and never lowers it.
	AddUsage(ctx context.Context, clientID string, month time.Time, quota *int64, n int64) (before, after int64, err error)
	// AddUsageRuns does the same for several runs in order, in one
	// transaction: counts[i] requests with quotas[i]. It returns the count
	// before the first run and after each.
	AddUsageRuns(ctx context.Context, clientID string, month time.Time, quotas []*int64, counts []int64) (before int64, afters []int64, err error)
	// GiveBackUsage subtracts n unused leased requests (never below 0).
	GiveBackUsage(ctx context.Context, clientID string, month time.Time, n int64) error
}

// flushTimeout bounds one batch in Postgres. A batch is shared by many
// requests, so it runs on the ledger's context, not on any one of theirs.
const flushTimeout = 10 * time.Second

// MaxQuotaLease is the most requests one lease counts ahead, and so the
// most a killed api process can leave counted but not served.
const MaxQuotaLease = leaseMax

// QuotaLedger admits requests against the monthly quota. Postgres is the
// ledger: a request is admitted only once its increment is committed, so
// the count survives a Redis flush or a killed api process, and every api
// process can share one row without over-admitting.
//
// One UPDATE per request on a client's row would serialise every request
// of that client on the row lock. The ledger group-commits instead (the
// engine's batches): the Admit calls of one (client, month) queue up while
// a batch is in Postgres, and the next batch takes all of them in one
// round trip as soon as the previous one returns. At low load a batch is a
// single request and waits for nothing; under load, batches grow and the
// row sees one transaction per round trip per api process.
//
// A client that sustains a high request rate on one process, far from its
// quota, gets a lease: the batch's commit also counts the next leaseSpan's
// worth of its requests (as measured on this process), and those requests
// are then admitted from memory, with no round trip, because they are
// already in the committed count. What a lease has not used when it
// expires (leaseTTL after the last grant: a client's leases expire
// together, so the used values a process hands out stay 1, 2, 3, ... with
// no gap), when the quota changes or when the ledger closes is given back
// in one UPDATE. So:
//
//   - nothing is over-admitted: every admitted request, leased or not, was
//     inside the quota in a committed row before it was served;
//   - nothing admitted is lost: a killed process leaves its unused lease
//     in the count (an over-count of at most one lease, about leaseSpan of
//     that client's traffic on that process), never an under-count;
//   - near the quota nothing changes: leases are only granted while the
//     quota is at least leaseMinHeadroom away, and at most 1/64 of what is
//     left, so the last requests of a month are counted one batch at a
//     time; a request may be refused up to leaseTTL before another process
//     gives back what its lease did not use.
type QuotaLedger struct {
	eng *engine[quotaKey, quotaParam, usage, usageReturn]
	// month is the calendar month of the last request: computing a month
	// from a time costs more than comparing it with this one's bounds.
	month atomic.Pointer[monthSpan]

	// LeaseMin overrides the smallest lease (default 256, i.e. a client
	// sending ≈ 2 500 requests/s to this process); tests lower it so that
	// a loaded machine still exercises leases. Set before first use.
	LeaseMin int
}

// usage is the ledger's answer for one request.
type usage struct {
	// Used is the month's count including this request when admitted, the
	// current count when refused.
	Used     int64
	Admitted bool
}

type quotaKey struct {
	clientID string
	month    int64 // unix seconds of the month's first instant
}

// quotaParam is a quota as a comparable value (nil = unlimited).
type quotaParam struct {
	limited bool
	n       int64
}

func paramOf(q *int64) quotaParam {
	if q == nil {
		return quotaParam{}
	}
	return quotaParam{limited: true, n: *q}
}

func (p quotaParam) ptr() *int64 {
	if !p.limited {
		return nil
	}
	n := p.n
	return &n
}

// NewQuotaLedger returns a ledger on store. Close it to flush what is
// pending and give back what leases did not use.
func NewQuotaLedger(store UsageStore, opts Options) *QuotaLedger {
	opts = opts.withDefaults()
	policy := defaultPolicy()
	policy.expireTogether = true
	policy.callTimeout = flushTimeout
	l := &QuotaLedger{}
	l.eng = newEngine[quotaKey, quotaParam, usage, usageReturn]("quota", &ledgerStatements{store: store, logger: opts.Logger},
		policy, opts.Now, opts.Logger, func() int {
			if l.LeaseMin > 0 {
				return l.LeaseMin
			}
			return leaseMin
		})
	return l
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
func (l *QuotaLedger) Admit(ctx context.Context, clientID string, quota *int64, now time.Time) (used int64, admitted bool, err error) {
	return l.admitAt(ctx, clientID, quota, now, l.eng.now())
}

// monthSpan is one calendar month (UTC): [start, next).
type monthSpan struct{ start, next time.Time }

// monthOf is the unix time of the first instant of now's month.
func (l *QuotaLedger) monthOf(now time.Time) int64 {
	if m := l.month.Load(); m != nil && !now.Before(m.start) && now.Before(m.next) {
		return m.start.Unix()
	}
	m := &monthSpan{start: domain.Month(now), next: domain.NextMonth(now)}
	l.month.Store(m)
	return m.start.Unix()
}

// admitAt is Admit with the ledger clock read by the caller (the gate's
// request time serves as both).
func (l *QuotaLedger) admitAt(ctx context.Context, clientID string, quota *int64, now, clock time.Time) (int64, bool, error) {
	u, err := l.eng.admit(ctx, quotaKey{clientID: clientID, month: l.monthOf(now)}, paramOf(quota), clock)
	if err != nil {
		return 0, false, err
	}
	return u.Used, u.Admitted, nil
}

// Close waits for every pending request to be committed (or refused),
// stops the background work and gives back what the leases did not use.
// Admit fails after Close.
func (l *QuotaLedger) Close() { l.eng.close() }

// LeaseStats reports how many request slots leases have counted ahead and
// how many of them were given back unused, since the ledger started.
func (l *QuotaLedger) LeaseStats() (granted, givenBack int64) { return l.eng.leaseStats() }

// usageReturn is a count of unused leased requests.
type usageReturn int64

func (u usageReturn) slots() int64 { return int64(u) }

// quotaLease is a lease of used values first, first+1, ...
type quotaLease struct{ first int64 }

func (q quotaLease) result(i int, _ time.Time) usage {
	return usage{Used: q.first + int64(i), Admitted: true}
}

func (q quotaLease) unused(from, n int) usageReturn { return usageReturn(n - from) }

// ledgerStatements is the ledger's backend: one statement per batch.
type ledgerStatements struct {
	store  UsageStore
	logger *slog.Logger
}

func (s *ledgerStatements) call(ctx context.Context, k quotaKey, runs []run[quotaParam], want int, gbs []usageReturn) (outcome[usage, usageReturn], error) {
	out := outcome[usage, usageReturn]{gaveBack: true}
	month := time.Unix(k.month, 0).UTC()
	if len(gbs) > 0 {
		if err := s.giveBack(ctx, k, gbs); err != nil {
			out.gaveBack = false
			s.logger.Warn("admission: giving back unused quota lease failed; retrying", "client_id", k.clientID, "err", err)
		}
	}
	if len(runs) == 1 {
		r := runs[0]
		before, after, err := s.store.AddUsage(ctx, k.clientID, month, r.param.ptr(), int64(r.n+want))
		if err != nil {
			s.logger.Error("admission: quota batch failed", "client_id", k.clientID, "requests", r.n, "err", err)
			return out, err
		}
		out.hint = after
		served := after
		if first := before + int64(r.n) + 1; want > 0 && first <= after {
			// The batch is served first; what the commit counted beyond it is
			// the lease (less when the quota cut it short).
			out.lease, out.leaseN, served = quotaLease{first: first}, int(after-first+1), first-1
		}
		out.results = make([]usage, r.n)
		for i := range out.results {
			if u := before + int64(i) + 1; u <= served {
				out.results[i] = usage{Used: u, Admitted: true}
			} else {
				out.results[i] = usage{Used: served}
			}
		}
		return out, nil
	}
	// A batch mixing quotas (around a tier change) is admitted run by run
	// in arrival order, and takes no lease.
	quotas, counts := make([]*int64, len(runs)), make([]int64, len(runs))
	total := 0
	for i, r := range runs {
		quotas[i], counts[i] = r.param.ptr(), int64(r.n)
		total += r.n
	}
	before, afters, err := s.store.AddUsageRuns(ctx, k.clientID, month, quotas, counts)
	if err != nil {
		s.logger.Error("admission: quota batch failed", "client_id", k.clientID, "requests", total, "err", err)
		return out, err
	}
	if len(afters) != len(runs) {
		return out, fmt.Errorf("admission: quota batch of %d runs got %d counts", len(runs), len(afters))
	}
	out.results = make([]usage, 0, total)
	for r, run := range runs {
		admitted := afters[r] - before
		for i := range run.n {
			if int64(i) < admitted {
				out.results = append(out.results, usage{Used: before + int64(i) + 1, Admitted: true})
			} else {
				out.results = append(out.results, usage{Used: afters[r]})
			}
		}
		before = afters[r]
	}
	out.hint = afters[len(afters)-1]
	return out, nil
}

func (s *ledgerStatements) giveBack(ctx context.Context, k quotaKey, gbs []usageReturn) error {
	var n int64
	for _, g := range gbs {
		n += int64(g)
	}
	if n == 0 {
		return nil
	}
	return s.store.GiveBackUsage(ctx, k.clientID, time.Unix(k.month, 0).UTC(), n)
}

// leaseCap: an unlimited quota may lease what the rate asks for; a limited
// one only while the quota is at least leaseMinHeadroom away after the
// pending requests, and at most 1/64 of what is left.
func (s *ledgerStatements) leaseCap(q quotaParam, lastCount int64, known bool, pending, size int) int {
	if !q.limited {
		return size
	}
	if !known {
		return 0
	}
	headroom := q.n - lastCount - int64(pending)
	if headroom < leaseMinHeadroom {
		return 0
	}
	return int(min(int64(size), headroom/64))
}
