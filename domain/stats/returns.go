package stats

import (
	"math"
	"slices"
)

// VerdictHorizons are the forward horizons, in bars (days for daily data),
// of the verdict statistics records.
var VerdictHorizons = []int{1, 5, 21, 30}

// FactorHorizons are the forward horizons, in bars, of the factor
// statistics records.
var FactorHorizons = []int{1, 5, 21}

// ForwardReturn returns the percent change of closes (oldest to newest) from
// index i to index i+h. ok is false when there is not enough future data, h
// is not positive, or either close is not a positive finite price, so that
// callers never feed a meaningless return into an accumulator.
func ForwardReturn(closes []float64, i, h int) (pct float64, ok bool) {
	if h < 1 || i < 0 || i+h >= len(closes) || i+h < i {
		return 0, false
	}
	from, to := closes[i], closes[i+h]
	if !validPrice(from) || !validPrice(to) {
		return 0, false
	}
	pct = (to/from - 1) * 100
	if !isFinite(pct) {
		return 0, false
	}
	return pct, true
}

// ForwardReturns returns the h-bar forward return from every index of closes
// where it is defined, in index order. Indices without one (the last h bars,
// bad prices) are skipped, so the result is not aligned with closes; use
// ForwardReturn when the index matters.
func ForwardReturns(closes []float64, h int) []float64 {
	var out []float64
	for i := range closes {
		if r, ok := ForwardReturn(closes, i, h); ok {
			out = append(out, r)
		}
	}
	return out
}

// MedianAbsMove returns the median absolute h-bar forward return of closes,
// in percent: the asset's typical h-day move that a neutral verdict must stay
// inside to win. ok is false when no h-bar return is defined.
func MedianAbsMove(closes []float64, h int) (pct float64, ok bool) {
	moves := ForwardReturns(closes, h)
	for i, r := range moves {
		moves[i] = math.Abs(r)
	}
	return median(moves)
}

// median returns the median of xs, reordering xs. ok is false for no values.
func median(xs []float64) (float64, bool) {
	n := len(xs)
	if n == 0 {
		return 0, false
	}
	slices.Sort(xs)
	if n%2 == 1 {
		return xs[n/2], true
	}
	// Halve before adding so two huge values cannot overflow to Inf.
	return xs[n/2-1]/2 + xs[n/2]/2, true
}

func validPrice(p float64) bool { return p > 0 && isFinite(p) }

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
