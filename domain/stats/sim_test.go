package stats

import (
	"fmt"
	"math"
	"sync"
	"testing"
)

// Simulations of what the statistics job sees, at the level of this
// package: a few assets of one market over about a year of daily bars, fed
// to the accumulators exactly as the worker feeds them (every bar, every
// horizon, the bar's day as its cluster). They are deterministic (fixed
// seeds) and small, so they are fast under -race and never flaky; the bounds
// they assert leave a margin over the rates measured when they were written
// (quoted in each test).

// simMarket is a market of random walks: daily log returns with a common
// market factor (each pair of assets correlated rho) and a drift.
type simMarket struct {
	closes [][]float64 // by asset, oldest first
}

func simulateMarket(seed uint64, assets, days int, rho, drift, vol float64) simMarket {
	r := newRand(seed)
	m := simMarket{closes: make([][]float64, assets)}
	for a := range m.closes {
		m.closes[a] = make([]float64, days)
		m.closes[a][0] = 100
	}
	common, own := math.Sqrt(rho), math.Sqrt(1-rho)
	for d := 1; d < days; d++ {
		f := r.NormFloat64()
		for a := range m.closes {
			z := common*f + own*r.NormFloat64()
			m.closes[a][d] = m.closes[a][d-1] * math.Exp(drift+vol*z)
		}
	}
	return m
}

// trendVerdict is a stand-in for the scorer: growth after a 20-day rise of
// more than one daily volatility, decline after such a fall, with the
// scorer's hysteresis (a standing verdict holds until the move is back
// under half of that). On a random walk it has no edge, but its verdicts
// come in long runs and on the same days for every asset, as real ones do.
func trendVerdict(logs []float64, i int, prev string, vol float64) string {
	const lookback = 20
	if i < lookback {
		return ""
	}
	move := logs[i] - logs[i-lookback]
	switch {
	case move > vol, prev == VerdictGrowth && move > vol/2:
		return VerdictGrowth
	case move < -vol, prev == VerdictDecline && move < -vol/2:
		return VerdictDecline
	}
	return VerdictNeutral
}

// simFactors are the synthetic factors: the sign of the past move over
// several look-backs (momentum) and its opposite (mean reversion), each
// neutral while the move is small. None has an edge on a random walk.
var simFactorLookbacks = []int{2, 5, 13, 21}

// simFactorSigns appends to out the signs of the factors on bar i, from the
// asset's log closes.
func simFactorSigns(out []int, logs []float64, i int, vol float64) []int {
	for _, lb := range simFactorLookbacks {
		s := 0
		if i >= lb {
			move := logs[i] - logs[i-lb]
			switch {
			case move > vol/2:
				s = 1
			case move < -vol/2:
				s = -1
			}
		}
		out = append(out, s, -s)
	}
	return out
}

// simFactorNames name simFactorSigns' factors, then the planted oracle.
var simFactorNames = func() []string {
	var out []string
	for _, lb := range simFactorLookbacks {
		out = append(out, fmt.Sprintf("momentum_%d", lb), fmt.Sprintf("reversion_%d", lb))
	}
	return append(out, "oracle_5")
}()

// edge plants a known edge: with probability share, a bar's verdict and
// the "oracle" factor's reading are the sign of its 5-day forward return.
type edge struct{ share float64 }

// feed runs one simulated market through the accumulators as the worker
// does: every bar with a forward return, at every horizon.
func (m simMarket) feed(t *testing.T, seed uint64, vol float64, planted *edge) (VerdictAccumulator, FactorAccumulator) {
	t.Helper()
	r := newRand(seed ^ 0xfeed)
	var va VerdictAccumulator
	var fa FactorAccumulator
	for _, closes := range m.closes {
		med := map[int]float64{}
		for _, h := range VerdictHorizons {
			med[h], _ = MedianAbsMove(closes, h)
		}
		logs := make([]float64, len(closes))
		for i, c := range closes {
			logs[i] = math.Log(c)
		}
		prev := ""
		signs := make([]int, 0, len(simFactorNames))
		for i := range closes {
			verdict := trendVerdict(logs, i, prev, vol)
			prev = verdict
			signs = simFactorSigns(signs[:0], logs, i, vol)
			if planted != nil {
				// The oracle reads bullish or bearish on every bar: a coin
				// flip, or on a share of bars the coming 5-day move.
				oracle := 1
				if r.IntN(2) == 0 {
					oracle = -1
				}
				if r.Float64() < planted.share {
					if ret, ok := ForwardReturn(closes, i, 5); ok && ret != 0 {
						oracle, verdict = 1, VerdictGrowth
						if ret < 0 {
							oracle, verdict = -1, VerdictDecline
						}
					}
				}
				signs = append(signs, oracle)
			}
			for _, h := range VerdictHorizons {
				ret, ok := ForwardReturn(closes, i, h)
				if !ok {
					continue
				}
				var err error
				if verdict == "" {
					err = va.AddBase(i, h, ret, med[h])
				} else {
					err = va.Add(i, verdict, h, ret, med[h])
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if verdict == "" {
				continue // not scored yet
			}
			for _, h := range FactorHorizons {
				ret, ok := ForwardReturn(closes, i, h)
				if !ok {
					continue
				}
				if err := fa.AddMove(i, h, ret); err != nil {
					t.Fatal(err)
				}
				for j, s := range signs {
					if err := fa.Add(i, simFactorNames[j], h, s, 0.1*float64(s), ret); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	return va, fa
}

// The simulated market: 5 assets, 240 days, pairwise correlation 0.5, 2 %
// daily volatility and no drift; the worker's data is 208 assets over 400.
// Small, so that 200 markets take seconds under -race.
const (
	simAssets = 5
	simDays   = 240
	simRho    = 0.5
	simVol    = 0.02
)

// naiveSignificant judges a record by the same "interval excludes the base
// rate" rule, but on a Wilson interval over sample_size as if every
// observation were independent: the mistake effective_sample_size corrects.
func naiveSignificant(n int, rate float64, base *float64) bool {
	if base == nil || n < SignificantSampleSize {
		return false
	}
	low, high := Wilson(int(math.Round(rate*float64(n))), n)
	return *base < low || *base > high
}

// counts tallies how often records are flagged under the rules compared.
type counts struct {
	records, flagged, oldRule, naive int
	seedsWithFlag                    int
}

func (c counts) rate(k int) float64 { return float64(k) / float64(max(1, c.records)) }

// runSeeds runs fn for seeds 1..n on two goroutines (the machine's cores)
// and sums its counts.
func runSeeds(n int, fn func(seed uint64) (verdicts, factors counts)) (verdicts, factors counts) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan uint64)
	for range 2 {
		wg.Go(func() {
			for seed := range next {
				v, f := fn(seed)
				mu.Lock()
				verdicts = verdicts.add(v)
				factors = factors.add(f)
				mu.Unlock()
			}
		})
	}
	for s := range n {
		next <- uint64(s + 1)
	}
	close(next)
	wg.Wait()
	return verdicts, factors
}

func (c counts) add(o counts) counts {
	c.records += o.records
	c.flagged += o.flagged
	c.oldRule += o.oldRule
	c.naive += o.naive
	c.seedsWithFlag += o.seedsWithFlag
	return c
}

// TestNoEdgeIsRarelySignificant: on random walks nothing has an edge, so a
// record should be flagged about as often as the test's nominal 5 %, and a
// market's factor records (8 factors × 3 horizons) should show any
// significant record in at most about 5 % of markets (Benjamini–Hochberg
// controls that when every hypothesis is null).
//
// Measured over 200 markets when written: verdict records 1.9 % flagged
// (100 % under the former "sample_size ≥ 30", 28 % with the former interval
// over every observation); factor records 0.3 % (100 % and 28 %); markets
// with any significant factor record 3.0 %. The verdicts' rate is below 5 %
// because their base rate is measured on the same days, which makes the
// test conservative.
func TestNoEdgeIsRarelySignificant(t *testing.T) {
	t.Parallel()
	const seeds = 200
	verdicts, factors := runSeeds(seeds, func(seed uint64) (v, f counts) {
		m := simulateMarket(seed, simAssets, simDays, simRho, 0, simVol)
		va, fa := m.feed(t, seed, simVol, nil)
		for _, s := range va.Results(SourceBacktest) {
			if s.SampleSize == 0 {
				continue
			}
			v.records++
			v.flagged += b2i(s.IsSignificant)
			v.oldRule += b2i(s.SampleSize >= SignificantSampleSize)
			v.naive += b2i(naiveSignificant(s.SampleSize, *s.WinRate, s.BaseRate))
		}
		any := false
		for _, s := range fa.Results(SourceBacktest) {
			if s.SampleSize == 0 {
				continue
			}
			f.records++
			f.flagged += b2i(s.IsSignificant)
			any = any || s.IsSignificant
			f.oldRule += b2i(s.SampleSize >= SignificantSampleSize)
			f.naive += b2i(naiveSignificant(s.SampleSize, s.HitRate, s.BaseRate))
		}
		f.seedsWithFlag = b2i(any)
		return v, f
	})
	t.Logf("verdict records: %d; significant %.1f %% (sample_size ≥ 30: %.1f %%, naive interval: %.1f %%)",
		verdicts.records, 100*verdicts.rate(verdicts.flagged), 100*verdicts.rate(verdicts.oldRule), 100*verdicts.rate(verdicts.naive))
	t.Logf("factor records: %d; significant %.2f %% (sample_size ≥ 30: %.1f %%, naive interval: %.1f %%); markets with any: %.1f %%",
		factors.records, 100*factors.rate(factors.flagged), 100*factors.rate(factors.oldRule), 100*factors.rate(factors.naive),
		100*float64(factors.seedsWithFlag)/seeds)
	if r := verdicts.rate(verdicts.flagged); r > 0.06 {
		t.Errorf("%.1f %% of verdict records significant with no edge, want at most 6 %%", 100*r)
	}
	if r := factors.rate(factors.flagged); r > 0.03 {
		t.Errorf("%.2f %% of factor records significant with no edge, want at most 3 %%", 100*r)
	}
	if r := float64(factors.seedsWithFlag) / seeds; r > 0.07 {
		t.Errorf("%.1f %% of markets show a significant factor with no edge, want at most 7 %%", 100*r)
	}
	// The naive rules (sample_size ≥ 30, or the interval over sample_size)
	// must flag far more, or the simulation is too easy to show anything.
	if verdicts.rate(verdicts.oldRule) < 0.9 || verdicts.rate(verdicts.naive) < 0.2 || factors.rate(factors.naive) < 0.2 {
		t.Errorf("old rules flag %.1f %% and %.1f %% of verdict records, %.1f %% of factor ones; the simulation is too easy",
			100*verdicts.rate(verdicts.oldRule), 100*verdicts.rate(verdicts.naive), 100*factors.rate(factors.naive))
	}
}

// TestPlantedEdgeIsFound: 30 % of the verdicts and of an "oracle" factor's
// readings are the sign of the 5-day forward return (a win rate of about
// 0.65 instead of 0.5 at 5 days); the statistics must find it, above the
// base rate, while the factors without an edge stay quiet.
//
// Measured over 20 markets when written: growth/5 and decline/5 significant
// in 40 of 40 records, oracle_5 at 5 days in 20 of 20 markets; factor
// records without an edge 0.8 %.
func TestPlantedEdgeIsFound(t *testing.T) {
	t.Parallel()
	const seeds = 20
	verdicts, factors := runSeeds(seeds, func(seed uint64) (v, f counts) {
		m := simulateMarket(1000+seed, simAssets, simDays, simRho, 0, simVol)
		va, fa := m.feed(t, seed, simVol, &edge{share: 0.3})
		for _, s := range va.Results(SourceBacktest) {
			if s.HorizonDays == 5 && s.Verdict != VerdictNeutral {
				v.records++
				if s.IsSignificant && *s.WinRate > *s.BaseRate {
					v.flagged++
				}
			}
		}
		for _, s := range fa.Results(SourceBacktest) {
			switch {
			case s.Factor == "oracle_5" && s.HorizonDays == 5:
				if s.IsSignificant && s.HitRate > *s.BaseRate {
					f.seedsWithFlag++
				}
			case s.Factor != "oracle_5" && s.SampleSize > 0:
				f.records++
				f.flagged += b2i(s.IsSignificant)
			}
		}
		return v, f
	})
	t.Logf("growth/5 and decline/5 found in %d of %d; oracle_5 at 5 days in %d of %d; null factor records significant %.1f %%",
		verdicts.flagged, verdicts.records, factors.seedsWithFlag, seeds, 100*factors.rate(factors.flagged))
	if verdicts.flagged < verdicts.records*9/10 {
		t.Errorf("the planted verdict edge was found in %d of %d records, want at least 90 %%", verdicts.flagged, verdicts.records)
	}
	if factors.seedsWithFlag < seeds*9/10 {
		t.Errorf("the planted factor edge was found in %d of %d markets, want at least 90 %%", factors.seedsWithFlag, seeds)
	}
	if r := factors.rate(factors.flagged); r > 0.03 {
		t.Errorf("%.1f %% of factor records without an edge significant, want at most 3 %%", 100*r)
	}
}

// TestIntervalCoverage: on Bernoulli outcomes with a known rate, "the
// h-day return of a drifting random walk is above 0", observed every day on
// 8 correlated assets (so at 21 days each outcome shares 20 days with the
// next and the assets move together), the 95 % interval must contain the
// true rate about 95 % of the time. The naive Wilson interval over every
// observation covers it far less often.
//
// Measured over 300 markets when written: coverage 95.0 %, 92.7 %, 95.0 %
// and 94.3 % at 1, 5, 21 and 30 days (the plain Wilson interval over every
// observation: 72 %, 45 %, 19 %, 13 %).
func TestIntervalCoverage(t *testing.T) {
	t.Parallel()
	const (
		seeds  = 300
		assets = 8
		days   = 340
		drift  = 0.05 // per day, in daily standard deviations
	)
	for _, h := range VerdictHorizons {
		t.Run(fmt.Sprintf("%d days", h), func(t *testing.T) {
			t.Parallel()
			truth := 0.5 * math.Erfc(-drift*math.Sqrt(float64(h))/math.Sqrt2)
			covered, naive := 0, 0
			for seed := range uint64(seeds) {
				tl, cal := overlappingOutcomes(seed, assets, days, h, simRho, drift)
				e := estimateRate(tl, cal, h)
				if e.low <= truth && truth <= e.high {
					covered++
				}
				if low, high := Wilson(e.k, e.n); low <= truth && truth <= high {
					naive++
				}
			}
			rate, naiveRate := float64(covered)/seeds, float64(naive)/seeds
			t.Logf("true rate %.3f: coverage %.1f %%, naive %.1f %%", truth, 100*rate, 100*naiveRate)
			// 300 seeds: one standard error of a 95 % coverage is 1.3 %.
			if rate < 0.90 || rate > 0.99 {
				t.Errorf("coverage %.1f %%, want about 95 %% (90..99)", 100*rate)
			}
			if h > 1 && naiveRate > 0.8 {
				t.Errorf("naive coverage %.1f %%: the simulation has too little overlap to test anything", 100*naiveRate)
			}
		})
	}
}

// overlappingOutcomes returns the daily tallies of "the h-day return is
// above 0" of assets correlated random walks with drift (in daily standard
// deviations), observed on each of days days.
func overlappingOutcomes(seed uint64, assets, days, h int, rho, drift float64) (tallies, calendar) {
	r := newRand(seed)
	steps := make([][]float64, assets)
	for a := range steps {
		steps[a] = make([]float64, days+h)
	}
	common, own := math.Sqrt(rho), math.Sqrt(1-rho)
	for d := range days + h {
		f := r.NormFloat64()
		for a := range steps {
			steps[a][d] = drift + common*f + own*r.NormFloat64()
		}
	}
	var tl tallies
	var seen daySet
	for _, s := range steps {
		sum := 0.0
		for d := range h {
			sum += s[d]
		}
		for d := range days {
			if d > 0 {
				sum += s[d+h-1] - s[d-1]
			}
			tl.add(d, sum > 0)
			seen.add(d)
		}
	}
	return tl, seen.calendar()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
