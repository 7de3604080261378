package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
)

// runOrder orders the scoring runs of one market that go at once in this
// process (a close of several styles: all four of crypto's at 00:00 UTC)
// by their alerts: a run whose saves evaluate fewer alerts per asset waits,
// before it scores, until the runs with more than orderRatio times as many
// (and at least minDensityGap more) have handed over their last save.
//
// The runs of a close share the host's cores whatever their order, so
// their last report is stored at about the same time either way; what the
// order changes is when each alert is delivered. Side by side, every run ends at the close's
// end, and so do the alerts of each; in order, the runs that deliver the
// most alerts for their work end first (Smith's rule, which minimises the
// alerts' mean delay, and every quantile of it when the work is
// divisible; here approximately: the work is taken as the run's assets,
// though a denser run's saves cost a little more an asset). At a 00:00
// close of 2,000 crypto assets with 10,000 alerts (BenchmarkCloseAlerts),
// the position run fires under 5 % of the alerts and now scores after the
// others: p95 and p50 of close → alert fell (BENCHMARKS.md, "The runs of a
// close in order of their alerts").
//
// Runs of similar density (within orderRatio) go side by side: ordering
// them would not bring the later one's alerts forward, and one run alone
// leaves part of the CPU idle while its pipeline starts and drains. A run
// waits only for the runs present when it starts waiting, at most
// maxOrderWait, so a stream of denser runs, or one stuck on a lock,
// cannot hold it back for long; a run still deciding (a query, as long
// for every run of a close) is waited for until it knows its density.
// Without alerts on the market (or a scorer without alerts) no run waits,
// and a run denser by less than minDensityGap is not waited for: the
// reports and verdict events of the run that would wait matter more than
// a fraction of an alert an asset. A waiting run keeps its in-process slot
// (Worker.Gate), as every run of a close held its slot to the close's end
// side by side; in order, the denser runs end, and free theirs, sooner.
type runOrder struct {
	mu   sync.Mutex
	runs map[domain.Market]map[*orderedRun]struct{}
}

// orderedRun is one run in runOrder.
type orderedRun struct {
	market  domain.Market
	density float64       // alert evaluations per asset; set before decided is closed
	decided chan struct{} // closed once density is set (or the run ended without)
	scored  chan struct{} // closed once the run has handed over its last save (or ended)
	decide  sync.Once
	score   sync.Once
	waiters atomic.Int32 // runs waiting for its density or its last save (read by the tests)
}

// orderRatio is how many times denser a run must be to go first, and
// minDensityGap by how many alert evaluations an asset at least.
const (
	orderRatio    = 2
	minDensityGap = 1
)

// maxOrderWait is the longest a run waits for denser ones (a variable for
// the tests, which may run slowly).
var maxOrderWait = 10 * time.Second

// begin registers a run of m that is about to decide: denser runs that
// start waiting meanwhile see it (and wait for its density).
func (o *runOrder) begin(m domain.Market) *orderedRun {
	r := &orderedRun{market: m, decided: make(chan struct{}), scored: make(chan struct{})}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runs == nil {
		o.runs = map[domain.Market]map[*orderedRun]struct{}{}
	}
	if o.runs[m] == nil {
		o.runs[m] = map[*orderedRun]struct{}{}
	}
	o.runs[m][r] = struct{}{}
	return r
}

// setDensity sets the run's density: alert evaluations per asset its
// saves will make.
func (r *orderedRun) setDensity(d float64) {
	r.decide.Do(func() {
		r.density = d
		close(r.decided)
	})
}

// scoredAll marks the run as having handed over its last save: the runs
// waiting for it go on.
func (r *orderedRun) scoredAll() {
	r.score.Do(func() { close(r.scored) })
}

// end removes the run; it is called however the run ended.
func (o *runOrder) end(r *orderedRun) {
	r.setDensity(0)
	r.scoredAll()
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.runs[r.market], r)
	if len(o.runs[r.market]) == 0 {
		delete(o.runs, r.market)
	}
}

// wait waits until every run of r's market present now that is more than
// orderRatio times, and minDensityGap, denser has handed over its last
// save (a run still deciding is waited for until it knows its density),
// for at most maxOrderWait or until ctx ends. It returns how long it
// waited.
func (o *runOrder) wait(ctx context.Context, r *orderedRun) time.Duration {
	start := time.Now()
	o.mu.Lock()
	others := make([]*orderedRun, 0, len(o.runs[r.market]))
	for x := range o.runs[r.market] {
		if x != r {
			others = append(others, x)
		}
	}
	o.mu.Unlock()
	if len(others) == 0 {
		return 0
	}
	timeout := time.NewTimer(maxOrderWait)
	defer timeout.Stop()
	for _, x := range others {
		if !awaitRun(ctx, timeout.C, x, x.decided) {
			return time.Since(start)
		}
		if x.density <= orderRatio*r.density || x.density-r.density < minDensityGap {
			continue
		}
		if !awaitRun(ctx, timeout.C, x, x.scored) {
			return time.Since(start)
		}
	}
	return time.Since(start)
}

// awaitRun waits for one of x's channels to close; false when ctx ended
// or the time ran out first.
func awaitRun(ctx context.Context, timeout <-chan time.Time, x *orderedRun, ch <-chan struct{}) bool {
	x.waiters.Add(1)
	defer x.waiters.Add(-1)
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	case <-timeout:
		return false
	}
}
