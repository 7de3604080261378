package stats

import (
	"iter"
	"maps"
	"slices"

	"github.com/marketscreener/market/domain"
)

// FactorStat is the factor statistics record: how one indicator or pattern
// on a market called the direction of the forward return over one horizon.
type FactorStat struct {
	Factor      string `json:"factor"`
	HorizonDays int    `json:"horizon_days"`
	// SampleSize is the number of observations with a bullish or bearish
	// reading.
	SampleSize int `json:"sample_size"`
	// EffectiveSampleSize: see VerdictStat.
	EffectiveSampleSize int `json:"effective_sample_size"`
	// IsSignificant: PValueAdjusted ≤ 0.05 and EffectiveSampleSize ≥ 30.
	IsSignificant bool `json:"is_significant"`
	// HitRate is 0 when SampleSize is 0 (the spec makes it a plain number);
	// the 0..1 interval and is_significant=false mark it as uninformative.
	HitRate float64 `json:"hit_rate"`
	// HitRateCILow and HitRateCIHigh are the 95% Wilson interval on the
	// effective sample size, for this record alone (not adjusted for the
	// other factors tested).
	HitRateCILow  float64 `json:"hit_rate_ci_low"`
	HitRateCIHigh float64 `json:"hit_rate_ci_high"`
	// Correlation is the Pearson correlation of the factor's signed
	// contribution with the forward return, 0 when undefined.
	Correlation float64 `json:"correlation"`
	// BaseRate is the hit rate the factor would have with no edge: its
	// readings' mix of bullish and bearish applied to how often the
	// market's forward returns of this horizon were up and down. nil when
	// SampleSize is 0 or no return was seen.
	BaseRate *float64 `json:"base_rate"`
	// PValue is the two-sided p-value of "the hit rate is the base rate";
	// nil with BaseRate.
	PValue *float64 `json:"p_value"`
	// PValueAdjusted is PValue after the Benjamini–Hochberg procedure over
	// every factor × horizon record of the same market and source that has
	// a PValue, which keeps the expected share of false discoveries among
	// the significant records at 5 %.
	PValueAdjusted *float64 `json:"p_value_adjusted"`
	Coverage
	Source string `json:"source"`
}

// FalseDiscoveryRate is the level at which factor statistics are declared
// significant after the Benjamini–Hochberg adjustment.
const FalseDiscoveryRate = 0.05

// FactorAccumulator collects factor observations and turns them into
// FactorStat records. The zero value is ready to use. It is not safe for
// concurrent use: give each worker its own and combine them with Merge.
type FactorAccumulator struct {
	// factors holds every factor seen, even only as neutral.
	factors map[string]*byHorizon[factorCell]
	moves   byHorizon[moveCell]
	days    daySet // every day an observation was seen on
}

type factorCell struct {
	hits    tallies // counted observations and hits per day
	bullish int     // counted observations with a bullish reading
	// m pairs contribution (x) with forward return (y); m.n is the
	// sample size.
	m moments
}

// moveCell counts the forward returns of one horizon and how many were up
// (> 0) and down (< 0), for the no-edge hit rate.
type moveCell struct{ n, up, down int }

// Add records one bar of day (see DayNumber) on which factor had a
// sentiment of sign sentimentSign (see SentimentSign) and a signed
// contribution to the score, with the forward return over horizonDays.
// Neutral sentiments (sign 0) are not counted, neither in the hit rate nor
// in the correlation, so both describe the same sample; the factor is still
// listed in Results. Pass each bar's forward return once to AddMove too.
func (a *FactorAccumulator) Add(day int, factor string, horizonDays int, sentimentSign int, contribution, forwardReturnPct float64) error {
	if factor == "" {
		return domain.Errorf(domain.EINVALID, "stats: empty factor name")
	}
	if err := checkObservation(horizonDays, forwardReturnPct); err != nil {
		return err
	}
	if !isFinite(contribution) {
		return domain.Errorf(domain.EINVALID, "stats: contribution %v of factor %q is not finite", contribution, factor)
	}
	if err := a.days.check(day); err != nil {
		return err
	}
	cells := a.factor(factor)
	hit, counted := FactorHits(sentimentSign, forwardReturnPct)
	if !counted {
		return nil
	}
	c := cells.get(horizonDays)
	c.hits.add(day, hit)
	if sentimentSign > 0 {
		c.bullish++
	}
	c.m.add(contribution, forwardReturnPct)
	a.days.add(day)
	return nil
}

// factor returns the cells of a factor, adding it if needed.
func (a *FactorAccumulator) factor(name string) *byHorizon[factorCell] {
	cells := a.factors[name]
	if cells == nil {
		if a.factors == nil {
			a.factors = make(map[string]*byHorizon[factorCell])
		}
		cells = new(byHorizon[factorCell])
		a.factors[name] = cells
	}
	return cells
}

// AddMove records the forward return over horizonDays of one bar of day
// whose factors are passed to Add: once per bar and horizon, whatever its
// factors. The shares of up and down returns make the base rate.
func (a *FactorAccumulator) AddMove(day int, horizonDays int, forwardReturnPct float64) error {
	if err := checkObservation(horizonDays, forwardReturnPct); err != nil {
		return err
	}
	if err := a.days.check(day); err != nil {
		return err
	}
	m := a.moves.get(horizonDays)
	m.n++
	switch {
	case forwardReturnPct > 0:
		m.up++
	case forwardReturnPct < 0:
		m.down++
	}
	a.days.add(day)
	return nil
}

// Merge adds the observations of o to a.
func (a *FactorAccumulator) Merge(o *FactorAccumulator) {
	if o == nil {
		return
	}
	for name, ocells := range o.factors {
		cells := a.factor(name)
		for _, oc := range *ocells {
			c := cells.get(oc.h)
			c.hits.merge(oc.c.hits)
			c.bullish += oc.c.bullish
			c.m.merge(oc.c.m)
		}
	}
	for _, om := range o.moves {
		m := a.moves.get(om.h)
		m.n += om.c.n
		m.up += om.c.up
		m.down += om.c.down
	}
	a.days.merge(o.days)
}

// Results returns one record per factor seen and horizon, sorted by factor
// name and then horizon. Every horizon of FactorHorizons is present for each
// factor, with sample_size 0 when never counted; other horizons appear once
// observed. The records are one family for the Benjamini–Hochberg
// adjustment: pass one market's and source's observations.
func (a *FactorAccumulator) Results(source string) []FactorStat {
	horizons := horizonsWith(FactorHorizons, a.horizons())
	factors := slices.Sorted(maps.Keys(a.factors))
	cal := a.days.calendar()
	out := make([]FactorStat, 0, len(factors)*len(horizons))
	effective := make([]int, 0, cap(out))
	for _, f := range factors {
		for _, h := range horizons {
			s, e := a.stat(cal, f, h, source)
			out = append(out, s)
			effective = append(effective, e.effectiveSize())
		}
	}
	adjustFactorSignificance(out, effective)
	return out
}

// horizons yields every horizon a factor was counted at.
func (a *FactorAccumulator) horizons() iter.Seq[int] {
	return func(yield func(int) bool) {
		for _, cells := range a.factors {
			for h := range cells.horizons() {
				if !yield(h) {
					return
				}
			}
		}
	}
}

func (a *FactorAccumulator) stat(cal calendar, factor string, h int, source string) (FactorStat, rateEstimate) {
	var c factorCell
	if p := a.factors[factor].find(h); p != nil {
		c = *p
	}
	e := estimateRate(c.hits, cal, h)
	s := FactorStat{
		Factor:              factor,
		HorizonDays:         h,
		SampleSize:          e.n,
		EffectiveSampleSize: e.effectiveSize(),
		HitRate:             e.rate,
		HitRateCILow:        e.low,
		HitRateCIHigh:       e.high,
		Correlation:         c.m.correlation(),
		Source:              source,
	}
	if m := a.moves.find(h); m != nil && m.n > 0 && e.n > 0 {
		// With no edge a bullish reading hits as often as the market
		// rises, a bearish one as often as it falls.
		up, down := rate(m.up, m.n), rate(m.down, m.n)
		bull := float64(c.bullish)
		base := (bull*up + (float64(e.n)-bull)*down) / float64(e.n)
		s.BaseRate = ptr(base)
		if p, ok := e.pValue(base); ok {
			s.PValue = ptr(p)
		}
	}
	return s, e
}

// adjustFactorSignificance sets the adjusted p-values of the records that
// have a p-value, and is_significant: adjusted p ≤ FalseDiscoveryRate and an
// effective sample size (effective[i] for out[i]) of at least
// SignificantSampleSize.
func adjustFactorSignificance(out []FactorStat, effective []int) {
	var idx []int
	var ps []float64
	for i, s := range out {
		if s.PValue != nil {
			idx = append(idx, i)
			ps = append(ps, *s.PValue)
		}
	}
	for j, q := range BenjaminiHochberg(ps) {
		i := idx[j]
		out[i].PValueAdjusted = ptr(q)
		out[i].IsSignificant = q <= FalseDiscoveryRate && effective[i] >= SignificantSampleSize
	}
}
