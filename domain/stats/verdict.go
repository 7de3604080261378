package stats

import (
	"maps"
	"slices"

	"github.com/marketscreener/market/domain"
)

// VerdictStat is the verdict statistics record: how a verdict on a market
// performed over one forward horizon.
type VerdictStat struct {
	Verdict       string `json:"verdict"`
	HorizonDays   int    `json:"horizon_days"`
	SampleSize    int    `json:"sample_size"`
	IsSignificant bool   `json:"is_significant"`
	// WinRate is nil (JSON null) when SampleSize is 0: no data is not a
	// zero win rate.
	WinRate      *float64 `json:"win_rate"`
	WinRateCILow float64  `json:"win_rate_ci_low"`
	// WinRateCIHigh with WinRateCILow is the 95% Wilson interval; 0..1
	// when SampleSize is 0.
	WinRateCIHigh float64 `json:"win_rate_ci_high"`
	AvgReturnPct  float64 `json:"avg_return_pct"`
	// BaseRate is the fraction of all bars of the same horizon that would
	// have won under this verdict's rule; nil when no bar was seen.
	BaseRate *float64 `json:"base_rate"`
	Source   string   `json:"source"`
}

// VerdictAccumulator collects verdict observations, typically from a worker
// replaying history, and turns them into VerdictStat records. The zero value
// is ready to use. It is not safe for concurrent use: give each worker its
// own and combine them with Merge.
type VerdictAccumulator struct {
	cells map[verdictKey]verdictCell
	bases map[int]baseCell // by horizon
}

type verdictKey struct {
	verdict string
	horizon int
}

type verdictCell struct {
	wins    int
	returns runningMean // n is the sample size
}

// baseCell counts every bar of a horizon and how many would have won under
// each verdict's rule, indexed like Verdicts.
type baseCell struct {
	n    int
	wins [3]int
}

// Add records one bar that carried verdict, with its forward return over
// horizonDays and the asset's median absolute move over that horizon (see
// MedianAbsMove). The bar also counts towards the base rate of the horizon.
// Pass every bar exactly once: to Add when it had a verdict, otherwise to
// AddBase.
func (a *VerdictAccumulator) Add(verdict string, horizonDays int, forwardReturnPct, medianAbsMove float64) error {
	if !slices.Contains(Verdicts, verdict) {
		return domain.Errorf(domain.EINVALID, "stats: unknown verdict %q", verdict)
	}
	if err := a.AddBase(horizonDays, forwardReturnPct, medianAbsMove); err != nil {
		return err
	}
	if a.cells == nil {
		a.cells = make(map[verdictKey]verdictCell)
	}
	k := verdictKey{verdict, horizonDays}
	c := a.cells[k]
	if VerdictWins(verdict, forwardReturnPct, medianAbsMove) {
		c.wins++
	}
	c.returns.add(forwardReturnPct)
	a.cells[k] = c
	return nil
}

// AddBase records one bar without a verdict (for live statistics, a bar with
// no published snapshot). It only feeds the unconditional base rate.
func (a *VerdictAccumulator) AddBase(horizonDays int, forwardReturnPct, medianAbsMove float64) error {
	if err := checkObservation(horizonDays, forwardReturnPct); err != nil {
		return err
	}
	if !isFinite(medianAbsMove) || medianAbsMove < 0 {
		return domain.Errorf(domain.EINVALID, "stats: median absolute move %v is not a finite non-negative number", medianAbsMove)
	}
	if a.bases == nil {
		a.bases = make(map[int]baseCell)
	}
	b := a.bases[horizonDays]
	b.n++
	for i, v := range Verdicts {
		if VerdictWins(v, forwardReturnPct, medianAbsMove) {
			b.wins[i]++
		}
	}
	a.bases[horizonDays] = b
	return nil
}

// Merge adds the observations of o to a, so partial results of several
// workers combine into the same statistics as one pass over all bars.
func (a *VerdictAccumulator) Merge(o *VerdictAccumulator) {
	if o == nil {
		return
	}
	if a.cells == nil && len(o.cells) > 0 {
		a.cells = make(map[verdictKey]verdictCell, len(o.cells))
	}
	for k, oc := range o.cells {
		c := a.cells[k]
		c.wins += oc.wins
		c.returns.merge(oc.returns)
		a.cells[k] = c
	}
	if a.bases == nil && len(o.bases) > 0 {
		a.bases = make(map[int]baseCell, len(o.bases))
	}
	for h, ob := range o.bases {
		b := a.bases[h]
		b.n += ob.n
		for i := range b.wins {
			b.wins[i] += ob.wins[i]
		}
		a.bases[h] = b
	}
}

// Results returns one record per verdict and horizon, sorted by verdict
// (growth, decline, neutral) and then horizon. Every verdict × horizon of
// VerdictHorizons is present, with sample_size 0 when never observed; other
// horizons appear once observed.
func (a *VerdictAccumulator) Results(source string) []VerdictStat {
	horizons := horizonsWith(VerdictHorizons, maps.Keys(a.bases))
	out := make([]VerdictStat, 0, len(Verdicts)*len(horizons))
	for vi, v := range Verdicts {
		for _, h := range horizons {
			out = append(out, a.stat(vi, v, h, source))
		}
	}
	return out
}

func (a *VerdictAccumulator) stat(vi int, verdict string, h int, source string) VerdictStat {
	c := a.cells[verdictKey{verdict, h}]
	n := c.returns.n
	s := VerdictStat{
		Verdict:       verdict,
		HorizonDays:   h,
		SampleSize:    n,
		IsSignificant: IsSignificant(n),
		AvgReturnPct:  c.returns.value(),
		Source:        source,
	}
	s.WinRateCILow, s.WinRateCIHigh = Wilson(c.wins, n)
	if n > 0 {
		s.WinRate = ptr(rate(c.wins, n))
	}
	if b := a.bases[h]; b.n > 0 {
		s.BaseRate = ptr(rate(b.wins[vi], b.n))
	}
	return s
}

// checkObservation rejects what would poison the statistics: a horizon that
// is not positive or a forward return that is NaN or Inf (callers should skip
// bars for which ForwardReturn is not ok).
func checkObservation(horizonDays int, forwardReturnPct float64) error {
	if horizonDays < 1 {
		return domain.Errorf(domain.EINVALID, "stats: horizon %d days is not positive", horizonDays)
	}
	if !isFinite(forwardReturnPct) {
		return domain.Errorf(domain.EINVALID, "stats: forward return %v is not finite", forwardReturnPct)
	}
	return nil
}
