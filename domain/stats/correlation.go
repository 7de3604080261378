package stats

import "math"

// Pearson returns the Pearson correlation of the pairs (x[i], y[i]). Extra
// elements of the longer slice and pairs with a NaN or Inf are ignored. It is
// 0 when undefined (fewer than two pairs, or either side constant) rather
// than NaN, because the value is published as a JSON number.
func Pearson(x, y []float64) float64 {
	var m moments
	for i := range min(len(x), len(y)) {
		m.add(x[i], y[i])
	}
	return m.correlation()
}

// moments keeps running means and co-moments of pairs (Welford), which stay
// accurate over long histories where raw sums of squares would cancel, and
// merge exactly (Chan et al.) so workers can combine partial results.
type moments struct {
	n            int
	meanX, meanY float64
	m2x, m2y     float64 // sums of squared deviations
	cxy          float64 // sum of co-deviations
}

// add records one pair; pairs with a NaN or Inf are ignored.
func (m *moments) add(x, y float64) {
	if !isFinite(x) || !isFinite(y) {
		return
	}
	m.n++
	n := float64(m.n)
	dx := x - m.meanX
	dy := y - m.meanY
	m.meanX += dx / n
	m.meanY += dy / n
	m.m2x += dx * (x - m.meanX)
	m.m2y += dy * (y - m.meanY)
	m.cxy += dx * (y - m.meanY)
}

// merge folds o into m.
func (m *moments) merge(o moments) {
	if o.n == 0 {
		return
	}
	if m.n == 0 {
		*m = o
		return
	}
	na, nb := float64(m.n), float64(o.n)
	n := na + nb
	dx := o.meanX - m.meanX
	dy := o.meanY - m.meanY
	m.meanX += dx * nb / n
	m.meanY += dy * nb / n
	m.m2x += o.m2x + dx*dx*na*nb/n
	m.m2y += o.m2y + dy*dy*na*nb/n
	m.cxy += o.cxy + dx*dy*na*nb/n
	m.n += o.n
}

// correlation returns the Pearson correlation, 0 when undefined, clamped to
// [-1,1] against rounding.
func (m *moments) correlation() float64 {
	if m.n < 2 || !(m.m2x > 0) || !(m.m2y > 0) {
		return 0
	}
	r := m.cxy / (math.Sqrt(m.m2x) * math.Sqrt(m.m2y))
	if !isFinite(r) {
		return 0
	}
	return math.Max(-1, math.Min(1, r))
}
