package stats

import "math"

// How much a win or hit rate really tells.
//
// Observations are not independent trials. Two sources of dependence matter:
//
//   - Overlap: the 21-day forward returns of consecutive days share 20 of
//     their 21 days, so an asset's wins come in runs; 300 consecutive daily
//     up-or-down outcomes at 21 days carry about as much information as
//     300/15 independent ones (for a random walk), not 300.
//   - The market: assets of a market move together, so the observations of
//     one day are one draw of the market's move, not 200 draws.
//
// The interval is therefore computed from blocks of days. Every observation
// belongs to its day (all assets of a day together), and consecutive
// trading days form blocks of BlockDays(h) = 2h days. Two blocks that are
// not neighbours share no day of any forward return, so block totals are
// close to independent whatever the correlation between assets; the spread
// of the blocks' wins around the overall rate measures the variance of the
// rate directly (the cluster-robust "batch means" variance, with the G/(G−1)
// small-sample factor). Blocks of 2h rather than h because neighbouring
// blocks still overlap at their edge: with blocks of h days that edge hides
// about 30 % of the variance, with 2h about 15 %, and fewer blocks cost
// degrees of freedom (see the coverage tests).
//
// The variance gives the effective sample size, n_eff = p(1−p)/variance:
// the number of independent trials that would give the same precision. The
// 95 % Wilson interval is computed on n_eff with Student's t critical value
// of G−1 degrees of freedom instead of 1.96 (Korn and Graubard's adjustment
// for surveys with few clusters), since the variance is estimated from only
// G blocks (a year of daily data holds 6 blocks at 30 days). The p-value is
// the score test that the Wilson interval inverts, so the interval excludes
// a rate exactly when the p-value against it is below 0.05.

// BlockDays returns the length, in trading days, of the blocks a statistic
// over horizonDays-day forward returns is computed from: 2h, at least 1.
func BlockDays(horizonDays int) int { return max(1, 2*horizonDays) }

// rateEstimate is a success rate with its dependence-aware uncertainty.
type rateEstimate struct {
	n, k int     // observations and successes
	rate float64 // k/n, 0 when n = 0
	// effN is the effective sample size, 1..n (0 without observations).
	effN float64
	// blocks is the number of blocks with observations; the critical value
	// has blocks−1 degrees of freedom.
	blocks    int
	low, high float64 // 95 % Wilson interval on effN
}

// estimateRate computes a statistic's rate, effective sample size and
// interval from its daily tallies (see the comment at the top of the file).
// When the variance cannot be estimated, because all observations fall in
// one block or every block has the same rate (a rate of 0 or 1 above all:
// agreement says nothing about how dependent the blocks are), each block
// counts as one observation.
func estimateRate(t tallies, cal calendar, horizonDays int) rateEstimate {
	return estimateRateBlocks(t, cal, BlockDays(horizonDays))
}

// estimateRateBlocks is estimateRate with blocks of size trading days.
func estimateRateBlocks(t tallies, cal calendar, size int) rateEstimate {
	type blockSum struct{ n, k float64 }
	var blocks []blockSum // in day order
	lastBlock := -1
	var e rateEstimate
	for i, c := range t.v {
		if c.n == 0 {
			continue
		}
		e.n += c.n
		e.k += c.k
		if b := cal.tradingDay(t.first+i) / size; b != lastBlock {
			blocks = append(blocks, blockSum{})
			lastBlock = b
		}
		b := &blocks[len(blocks)-1]
		b.n += float64(c.n)
		b.k += float64(c.k)
	}
	e.blocks = len(blocks)
	if e.n == 0 {
		e.low, e.high = 0, 1
		return e
	}
	n := float64(e.n)
	e.rate = float64(e.k) / n
	e.effN = math.Min(n, float64(e.blocks))
	if e.blocks >= 2 {
		var ss float64
		for _, b := range blocks {
			r := b.k - e.rate*b.n
			ss += r * r
		}
		g := float64(e.blocks)
		variance := g / (g - 1) * ss / (n * n)
		if pq := e.rate * (1 - e.rate); variance > 0 && pq > 0 {
			// At least one observation's worth, at most all of them.
			e.effN = math.Min(n, math.Max(1, pq/variance))
		}
	}
	e.low, e.high = wilsonInterval(e.rate, e.effN, e.critical())
	return e
}

// critical is the interval's critical value: Student's t with blocks−1
// degrees of freedom, +Inf (the interval 0..1) with fewer than two blocks.
func (e rateEstimate) critical() float64 { return tCritical95(float64(e.blocks - 1)) }

// pValue is the two-sided p-value of the score test of rate = p0 on the
// effective sample size, the test the Wilson interval inverts: it is below
// 0.05 exactly when the interval excludes p0. ok is false when there is
// nothing to test (no observations, or p0 is NaN).
func (e rateEstimate) pValue(p0 float64) (p float64, ok bool) {
	if e.n == 0 || math.IsNaN(p0) {
		return 0, false
	}
	if e.blocks < 2 {
		return 1, true // no variance estimate: the interval is 0..1
	}
	se := math.Sqrt(p0 * (1 - p0) / e.effN)
	if !(se > 0) {
		// A base rate of 0 or 1: any other rate refutes it outright.
		if e.rate == p0 {
			return 1, true
		}
		return 0, true
	}
	return tTwoSidedP((e.rate-p0)/se, float64(e.blocks-1)), true
}

// excludes reports whether the interval lies wholly above or below p0.
func (e rateEstimate) excludes(p0 float64) bool { return p0 < e.low || p0 > e.high }

// significant is the is_significant rule: the interval excludes the base
// rate and the effective sample size is at least SignificantSampleSize.
func (e rateEstimate) significant(p0 float64) bool {
	return e.effectiveSize() >= SignificantSampleSize && e.excludes(p0)
}

// effectiveSize is effN as published: whole observations, rounded down so
// that effective_sample_size ≥ 30 is exactly the size condition.
func (e rateEstimate) effectiveSize() int { return int(math.Floor(e.effN + 1e-9)) }
