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

// Sources lists the origins in the order records are shown: backtest, then live.
var Sources = []string{SourceBacktest, SourceLive}

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
	if m.n == 0 {
		*m = o // exactly: the statistics job merges stored days into empty ones
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

// byHorizon holds one cell per forward horizon. There are a handful of
// horizons, so a scan is cheaper than a map on the accumulators' hot path.
type byHorizon[T any] []horizonCell[T]

type horizonCell[T any] struct {
	h int
	c *T
}

// get returns the cell of horizon h, adding it if needed.
func (b *byHorizon[T]) get(h int) *T {
	if c := b.find(h); c != nil {
		return c
	}
	c := new(T)
	*b = append(*b, horizonCell[T]{h, c})
	return c
}

// find returns the cell of horizon h, nil when there is none.
func (b byHorizon[T]) find(h int) *T {
	for _, hc := range b {
		if hc.h == h {
			return hc.c
		}
	}
	return nil
}

// horizons yields the horizons with a cell.
func (b byHorizon[T]) horizons() iter.Seq[int] {
	return func(yield func(int) bool) {
		for _, hc := range b {
			if !yield(hc.h) {
				return
			}
		}
	}
}
