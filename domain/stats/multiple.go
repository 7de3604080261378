package stats

import (
	"cmp"
	"slices"
)

// BenjaminiHochberg returns the Benjamini–Hochberg adjusted p-values of ps,
// in the same order: rank the m p-values, p(1) ≤ … ≤ p(m); the adjusted
// value of p(i) is min over j ≥ i of m·p(j)/j, at most 1. Declaring
// significant every test whose adjusted p-value is at most q keeps the
// expected share of false discoveries among the declared at most q (for
// independent or positively dependent tests, which the records of one
// market are: they share its returns). Ties keep their order; NaN counts
// as 1.
func BenjaminiHochberg(ps []float64) []float64 {
	m := len(ps)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	p := func(i int) float64 {
		if v := ps[i]; v == v { // not NaN
			return min(max(v, 0), 1)
		}
		return 1
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p(a), p(b)) })
	out := make([]float64, m)
	running := 1.0
	for rank := m; rank >= 1; rank-- {
		i := order[rank-1]
		running = min(running, p(i)*float64(m)/float64(rank))
		out[i] = running
	}
	return out
}
