package stats

import (
	"iter"
	"slices"
)

// The origins of a statistic (DESIGN §3), the record's source field.
const (
	SourceBacktest = "backtest" // scoring replayed over stored history
	SourceLive     = "live"     // snapshots the service actually published
)

// runningMean is a mean that is updated one value at a time and merges
// exactly; it avoids a running sum that could overflow on long histories.
type runningMean struct {
	n    int
	mean float64
}

func (m *runningMean) add(x float64) {
	m.n++
	m.mean += (x - m.mean) / float64(m.n)
}

func (m *runningMean) merge(o runningMean) {
	if o.n == 0 {
		return
	}
	n := m.n + o.n
	m.mean += (o.mean - m.mean) * float64(o.n) / float64(n)
	m.n = n
}

// value returns the mean, 0 when empty or not finite.
func (m runningMean) value() float64 {
	if m.n == 0 || !isFinite(m.mean) {
		return 0
	}
	return m.mean
}

// horizonsWith returns the default horizons plus any other seen ones,
// ascending, so every default horizon is always reported.
func horizonsWith(defaults []int, seen iter.Seq[int]) []int {
	out := slices.Clone(defaults)
	for h := range seen {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// rate returns k/n, 0 for n = 0.
func rate(k, n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(k) / float64(n)
}

func ptr(x float64) *float64 { return &x }
