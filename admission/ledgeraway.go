package admission

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/obs"
)

// While the quota ledger cannot commit (the Postgres primary died and a
// replica is being promoted, or the primary does not answer), the gate
// does not turn every metered request into a 503: a request whose ledger
// batch failed, and every request after it, is admitted provisionally, in
// memory, against the last count the ledger answered for its client plus
// what this process admitted provisionally since. Those requests are owed
// to the ledger and counted in it, exactly and whatever the quota (they
// were served), as soon as a write commits again; then the ledger decides
// alone again. So a failover interrupts no read the replica can serve.
//
// The trade-offs, each bounded:
//   - near its quota a client may get up to ProvisionalMax requests more
//     per api process and outage than its quota (the count it is judged
//     against is this process's last, not the other processes' since);
//   - a client without a recent count on this process is admitted up to
//     ProvisionalMax without one;
//   - what an api process killed during the outage owed is lost: the
//     ledger under-counts (in the client's favour), never over-counts;
//   - past ProvisionalMax a client's requests are 503 until the ledger is
//     back.
//
// A request whose own context ends while its batch is in Postgres is not
// admitted (the caller's 503, as before): the ledger does not know
// whether that batch committed. An outage is entered on a batch that
// failed; while the primary is frozen rather than gone, requests wait for
// their budget as before.

// ProvisionalMax is the most requests of one client and month an api
// process admits provisionally while the ledger is away.
const ProvisionalMax = 5000

// awayProbeEvery is how often the owed counts are written while the
// ledger is away: the first write that commits ends the outage.
const awayProbeEvery = time.Second

// errProvisionalFull: a client took ProvisionalMax provisional requests.
// It is a 503 (with Retry-After), as a request whose ledger batch failed
// was before.
var errProvisionalFull = domain.Errorf(domain.EUNAVAILABLE,
	"the usage ledger is unavailable and this client's allowance while it is has been used; retry later")

// ledgerAway is the gate's provisional admission while the ledger is away.
type ledgerAway struct {
	ledger *QuotaLedger
	store  UsageStore
	logger *slog.Logger
	now    func() time.Time

	active atomic.Bool

	mu     sync.Mutex
	since  time.Time
	probe  quotaKey           // the key of the batch that failed: written to when nothing is owed
	owed   map[quotaKey]int64 // provisional requests not yet counted
	total  int64              // provisional requests of this outage
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newLedgerAway(ledger *QuotaLedger, store UsageStore, logger *slog.Logger, now func() time.Time) *ledgerAway {
	return &ledgerAway{ledger: ledger, store: store, logger: logger, now: now, owed: map[quotaKey]int64{}, stop: make(chan struct{})}
}

// begin starts an outage on the failure err of k's batch (nothing when one
// is under way).
func (a *ledgerAway) begin(k quotaKey, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.active.Load() {
		return
	}
	a.since, a.probe, a.total = a.now(), k, 0
	a.active.Store(true)
	obs.QuotaLedgerAway(true)
	a.logger.Warn("admission: the quota ledger cannot commit; admitting provisionally, counted once it can",
		"err", err, "provisional_max_per_client", ProvisionalMax)
	a.wg.Add(1)
	go a.run()
}

// admit decides a request of k with quota provisionally: used is the
// count it makes by this process's reckoning. away is false when the
// outage ended meanwhile (the ledger decides the request).
func (a *ledgerAway) admit(k quotaKey, quota *int64) (used int64, admitted, away bool, err error) {
	base, _ := a.ledger.eng.hintOf(k)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.active.Load() {
		return 0, false, false, nil // a request counted now would be owed to a round that has ended
	}
	owed := a.owed[k]
	if quota != nil && base+owed >= *quota {
		return base + owed, false, true, nil
	}
	if owed >= ProvisionalMax {
		return 0, false, true, errProvisionalFull
	}
	a.owed[k] = owed + 1
	a.total++
	obs.QuotaProvisional()
	return base + owed + 1, true, true, nil
}

// run writes what is owed every awayProbeEvery until a round commits
// everything, then ends the outage.
func (a *ledgerAway) run() {
	defer a.wg.Done()
	t := time.NewTicker(awayProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		if a.flush(context.Background()) {
			return
		}
	}
}

// flush writes every owed count (or, with none, the probe key's zero) and,
// when all committed and nothing new is owed, ends the outage; it reports
// whether it did.
func (a *ledgerAway) flush(ctx context.Context) bool {
	a.mu.Lock()
	owed := make(map[quotaKey]int64, len(a.owed))
	for k, n := range a.owed {
		owed[k] = n
	}
	probe := a.probe
	a.mu.Unlock()
	if len(owed) == 0 {
		owed[probe] = 0
	}
	ok := true
	for k, n := range owed {
		cctx, cancel := context.WithTimeout(ctx, flushTimeout)
		_, _, err := a.store.AddUsage(cctx, k.clientID, time.Unix(k.month, 0).UTC(), nil, n)
		cancel()
		if err != nil {
			ok = false
			break
		}
		a.mu.Lock()
		if a.owed[k] -= n; a.owed[k] <= 0 {
			delete(a.owed, k)
		}
		a.mu.Unlock()
	}
	if !ok {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.owed) > 0 {
		return false // admitted meanwhile: the next round counts them
	}
	a.active.Store(false)
	obs.QuotaLedgerAway(false)
	a.logger.Info("admission: the quota ledger commits again; provisional requests counted",
		"away", a.now().Sub(a.since).Round(time.Millisecond), "provisional", a.total)
	return true
}

// close stops the prober and writes what is owed once more; what does not
// commit is logged as lost (an under-count).
func (a *ledgerAway) close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	close(a.stop)
	a.mu.Unlock()
	a.wg.Wait()
	if !a.active.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !a.flush(ctx) {
		a.mu.Lock()
		var lost int64
		for _, n := range a.owed {
			lost += n
		}
		a.mu.Unlock()
		a.logger.Error("admission: closing while the quota ledger is away; provisional requests not counted", "requests", lost)
	}
}
