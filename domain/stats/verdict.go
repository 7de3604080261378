package stats

import (
	"slices"

	"github.com/marketscreener/market/domain"
)

// VerdictStat is the verdict statistics record: how a verdict on a market
// performed over one forward horizon.
type VerdictStat struct {
	Verdict     string `json:"verdict"`
	HorizonDays int    `json:"horizon_days"`
	// SampleSize is the number of observations (asset-days).
	SampleSize int `json:"sample_size"`
	// EffectiveSampleSize is the number of independent observations worth
	// the same precision, after overlapping horizons and the co-movement of
	// the market's assets (see effective.go); at most SampleSize.
	EffectiveSampleSize int `json:"effective_sample_size"`
	// IsSignificant: the interval excludes BaseRate and
	// EffectiveSampleSize ≥ 30.
	IsSignificant bool `json:"is_significant"`
	// WinRate is nil (JSON null) when SampleSize is 0: no data is not a
	// zero win rate.
	WinRate      *float64 `json:"win_rate"`
	WinRateCILow float64  `json:"win_rate_ci_low"`
	// WinRateCIHigh with WinRateCILow is the 95% Wilson interval on the
	// effective sample size; 0..1 when SampleSize is 0.
	WinRateCIHigh float64 `json:"win_rate_ci_high"`
	AvgReturnPct  float64 `json:"avg_return_pct"`
	// BaseRate is the fraction of all bars of the same horizon that would
	// have won under this verdict's rule; nil when no bar was seen.
	BaseRate *float64 `json:"base_rate"`
	// PValue is the two-sided p-value of "the win rate is the base rate"
	// (below 0.05 exactly when the interval excludes BaseRate); nil when
	// there is nothing to test.
	PValue *float64 `json:"p_value"`
	Coverage
	Source string `json:"source"`
}

// VerdictAccumulator collects verdict observations, typically from a worker
// replaying history, and turns them into VerdictStat records. The zero value
// is ready to use. It is not safe for concurrent use: give each worker its
// own and combine them with Merge.
type VerdictAccumulator struct {
	cells [3]byHorizon[verdictCell] // indexed like Verdicts
	bases byHorizon[baseCell]
	days  daySet // every day a bar was seen on
}

type verdictCell struct {
	wins    tallies     // observations and wins per day
	returns runningMean // n is the sample size
}

// baseCell counts every bar of a horizon and how many would have won under
// each verdict's rule, indexed like Verdicts.
type baseCell struct {
	n    int
	wins [3]int
}

// Add records one bar of day (see DayNumber) that carried verdict, with its
// forward return over horizonDays and the asset's median absolute move over
// that horizon (see MedianAbsMove). The bar also counts towards the base
// rate of the horizon. Pass every bar exactly once: to Add when it had a
// verdict, otherwise to AddBase.
func (a *VerdictAccumulator) Add(day int, verdict string, horizonDays int, forwardReturnPct, medianAbsMove float64) error {
	vi := slices.Index(Verdicts, verdict)
	if vi < 0 {
		return domain.Errorf(domain.EINVALID, "stats: unknown verdict %q", verdict)
	}
	if err := a.AddBase(day, horizonDays, forwardReturnPct, medianAbsMove); err != nil {
		return err
	}
	c := a.cells[vi].get(horizonDays)
	c.wins.add(day, VerdictWins(verdict, forwardReturnPct, medianAbsMove))
	c.returns.add(forwardReturnPct)
	return nil
}

// AddBase records one bar without a verdict (for live statistics, a bar with
// no published snapshot). It only feeds the unconditional base rate.
func (a *VerdictAccumulator) AddBase(day int, horizonDays int, forwardReturnPct, medianAbsMove float64) error {
	if err := checkObservation(horizonDays, forwardReturnPct); err != nil {
		return err
	}
	if !isFinite(medianAbsMove) || medianAbsMove < 0 {
		return domain.Errorf(domain.EINVALID, "stats: median absolute move %v is not a finite non-negative number", medianAbsMove)
	}
	if err := a.days.check(day); err != nil {
		return err
	}
	b := a.bases.get(horizonDays)
	b.n++
	for i, v := range Verdicts {
		if VerdictWins(v, forwardReturnPct, medianAbsMove) {
			b.wins[i]++
		}
	}
	a.days.add(day)
	return nil
}

// Merge adds the observations of o to a, so partial results of several
// workers combine into the same statistics as one pass over all bars.
func (a *VerdictAccumulator) Merge(o *VerdictAccumulator) {
	if o == nil {
		return
	}
	for vi := range o.cells {
		for _, oc := range o.cells[vi] {
			c := a.cells[vi].get(oc.h)
			c.wins.merge(oc.c.wins)
			c.returns.merge(oc.c.returns)
		}
	}
	for _, ob := range o.bases {
		b := a.bases.get(ob.h)
		b.n += ob.c.n
		for i := range b.wins {
			b.wins[i] += ob.c.wins[i]
		}
	}
	a.days.merge(o.days)
}

// Results returns one record per verdict and horizon, sorted by verdict
// (growth, decline, neutral) and then horizon. Every verdict × horizon of
// VerdictHorizons is present, with sample_size 0 when never observed; other
// horizons appear once observed.
func (a *VerdictAccumulator) Results(source string) []VerdictStat {
	horizons := horizonsWith(VerdictHorizons, a.bases.horizons())
	cal := a.days.calendar()
	out := make([]VerdictStat, 0, len(Verdicts)*len(horizons))
	for vi, v := range Verdicts {
		for _, h := range horizons {
			out = append(out, a.stat(cal, vi, v, h, source))
		}
	}
	return out
}

func (a *VerdictAccumulator) stat(cal calendar, vi int, verdict string, h int, source string) VerdictStat {
	var c verdictCell
	if p := a.cells[vi].find(h); p != nil {
		c = *p
	}
	e := estimateRate(c.wins, cal, h)
	s := VerdictStat{
		Verdict:             verdict,
		HorizonDays:         h,
		SampleSize:          e.n,
		EffectiveSampleSize: e.effectiveSize(),
		WinRateCILow:        e.low,
		WinRateCIHigh:       e.high,
		AvgReturnPct:        c.returns.value(),
		Source:              source,
	}
	if e.n > 0 {
		s.WinRate = ptr(e.rate)
	}
	if b := a.bases.find(h); b != nil && b.n > 0 {
		base := rate(b.wins[vi], b.n)
		s.BaseRate = ptr(base)
		if p, ok := e.pValue(base); ok {
			s.PValue = ptr(p)
		}
		s.IsSignificant = e.significant(base)
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
