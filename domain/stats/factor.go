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
	Factor        string `json:"factor"`
	HorizonDays   int    `json:"horizon_days"`
	SampleSize    int    `json:"sample_size"`
	IsSignificant bool   `json:"is_significant"`
	// HitRate is 0 when SampleSize is 0 (the spec makes it a plain number);
	// the 0..1 interval and is_significant=false mark it as uninformative.
	HitRate       float64 `json:"hit_rate"`
	HitRateCILow  float64 `json:"hit_rate_ci_low"`
	HitRateCIHigh float64 `json:"hit_rate_ci_high"`
	// Correlation is the Pearson correlation of the factor's signed
	// contribution with the forward return, 0 when undefined.
	Correlation float64 `json:"correlation"`
	Source      string  `json:"source"`
}

// FactorAccumulator collects factor observations and turns them into
// FactorStat records. The zero value is ready to use. It is not safe for
// concurrent use: give each worker its own and combine them with Merge.
type FactorAccumulator struct {
	factors map[string]bool // every factor seen, even only as neutral
	cells   map[factorKey]factorCell
}

type factorKey struct {
	factor  string
	horizon int
}

type factorCell struct {
	hits int
	// m pairs contribution (x) with forward return (y); m.n is the
	// sample size.
	m moments
}

// Add records one bar on which factor had a sentiment of sign sentimentSign
// (see SentimentSign) and a signed contribution to the score, with the
// forward return over horizonDays. Neutral sentiments (sign 0) are not
// counted, neither in the hit rate nor in the correlation, so both describe
// the same sample; the factor is still listed in Results.
func (a *FactorAccumulator) Add(factor string, horizonDays int, sentimentSign int, contribution, forwardReturnPct float64) error {
	if factor == "" {
		return domain.Errorf(domain.EINVALID, "stats: empty factor name")
	}
	if err := checkObservation(horizonDays, forwardReturnPct); err != nil {
		return err
	}
	if !isFinite(contribution) {
		return domain.Errorf(domain.EINVALID, "stats: contribution %v of factor %q is not finite", contribution, factor)
	}
	if a.factors == nil {
		a.factors = make(map[string]bool)
		a.cells = make(map[factorKey]factorCell)
	}
	a.factors[factor] = true
	hit, counted := FactorHits(sentimentSign, forwardReturnPct)
	if !counted {
		return nil
	}
	k := factorKey{factor, horizonDays}
	c := a.cells[k]
	if hit {
		c.hits++
	}
	c.m.add(contribution, forwardReturnPct)
	a.cells[k] = c
	return nil
}

// Merge adds the observations of o to a.
func (a *FactorAccumulator) Merge(o *FactorAccumulator) {
	if o == nil || len(o.factors) == 0 {
		return
	}
	if a.factors == nil {
		a.factors = make(map[string]bool, len(o.factors))
		a.cells = make(map[factorKey]factorCell, len(o.cells))
	}
	for f := range o.factors {
		a.factors[f] = true
	}
	for k, oc := range o.cells {
		c := a.cells[k]
		c.hits += oc.hits
		c.m.merge(oc.m)
		a.cells[k] = c
	}
}

// Results returns one record per factor seen and horizon, sorted by factor
// name and then horizon. Every horizon of FactorHorizons is present for each
// factor, with sample_size 0 when never counted; other horizons appear once
// observed.
func (a *FactorAccumulator) Results(source string) []FactorStat {
	horizons := horizonsWith(FactorHorizons, a.horizons())
	factors := slices.Sorted(maps.Keys(a.factors))
	out := make([]FactorStat, 0, len(factors)*len(horizons))
	for _, f := range factors {
		for _, h := range horizons {
			out = append(out, a.stat(f, h, source))
		}
	}
	return out
}

func (a *FactorAccumulator) horizons() iter.Seq[int] {
	return func(yield func(int) bool) {
		for k := range a.cells {
			if !yield(k.horizon) {
				return
			}
		}
	}
}

func (a *FactorAccumulator) stat(factor string, h int, source string) FactorStat {
	c := a.cells[factorKey{factor, h}]
	n := c.m.n
	s := FactorStat{
		Factor:        factor,
		HorizonDays:   h,
		SampleSize:    n,
		IsSignificant: IsSignificant(n),
		HitRate:       rate(c.hits, n),
		Correlation:   c.m.correlation(),
		Source:        source,
	}
	s.HitRateCILow, s.HitRateCIHigh = Wilson(c.hits, n)
	return s
}
