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

// MedianWindow is how many h-bar moves, the newest ones completed by a
// bar, make the median absolute move a neutral verdict of that bar is
// judged against (see TrailingMedianMoves).
const MedianWindow = 365

// MinMedianMoves is how many moves a bar's median absolute move needs;
// bars with fewer are not judged.
const MinMedianMoves = 20

// TrailingMedianMoves returns, for every index i of closes from from on,
// the median absolute h-bar move known at bar i: over the moves j → j+h
// completed by it (j+h ≤ i), the newest MedianWindow of them. It is NaN
// where fewer than MinMedianMoves are defined. Each value depends only on
// the closes up to its bar, so a bar judged today is judged the same
// whatever history follows it, and the same from any from. Indices
// before from are NaN.
func TrailingMedianMoves(closes []float64, h, from int) []float64 {
	out := make([]float64, len(closes))
	for i := range out {
		out[i] = math.NaN()
	}
	if h < 1 {
		return out
	}
	from = max(from, 0)
	// window is the sorted absolute moves ending at lo+h..i; a move that
	// is not defined (a bad price) takes no place.
	var window []float64
	move := func(j int) (float64, bool) {
		r, ok := ForwardReturn(closes, j, h)
		return math.Abs(r), ok
	}
	insert := func(x float64) {
		k, _ := slices.BinarySearch(window, x)
		window = slices.Insert(window, k, x)
	}
	remove := func(x float64) {
		if k, found := slices.BinarySearch(window, x); found {
			window = slices.Delete(window, k, k+1)
		}
	}
	first := max(0, from-h-MedianWindow+1) // the oldest move start in from's window
	for j := first; j <= from-h && j < len(closes); j++ {
		if x, ok := move(j); ok {
			insert(x)
		}
	}
	for i := from; i < len(closes); i++ {
		if i > from {
			if j := i - h; j >= 0 {
				if x, ok := move(j); ok {
					insert(x)
				}
			}
			if j := i - h - MedianWindow; j >= 0 {
				if x, ok := move(j); ok {
					remove(x)
				}
			}
		}
		if n := len(window); n >= MinMedianMoves {
			if n%2 == 1 {
				out[i] = window[n/2]
			} else {
				out[i] = window[n/2-1]/2 + window[n/2]/2
			}
		}
	}
	return out
}
