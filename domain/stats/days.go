package stats

import (
	"time"

	"github.com/marketscreener/market/domain"
)

// Observations are kept per day, for the effective sample size (see
// effective.go), in dense arrays indexed by day: the statistics job adds
// millions of observations over about 400 days, and an array index is
// several times cheaper than a map update.

// MaxDaySpan is the most days, first to last, one accumulator takes
// observations from (20 years; the statistics job spans about 400 days).
// It bounds the per-day arrays.
const MaxDaySpan = 20 * 366

// DayNumber returns the day of t (UTC) as days since 1970-01-01: the day an
// observation is clustered under. Pass the bar's open time.
func DayNumber(t time.Time) int {
	const secondsPerDay = 86400
	s := t.Unix()
	d := s / secondsPerDay
	if s%secondsPerDay < 0 {
		d-- // round down before 1970 too
	}
	return int(d)
}

// byDay is a dense array indexed by day: v[i] belongs to day first+i.
type byDay[T any] struct {
	first int
	v     []T
}

// at returns the element of day, growing the array to reach it.
func (b *byDay[T]) at(day int) *T {
	switch {
	case len(b.v) == 0:
		b.first = day
		b.v = make([]T, 1)
	case day < b.first:
		grown := make([]T, b.first-day+len(b.v), b.first-day+cap(b.v))
		copy(grown[b.first-day:], b.v)
		b.v, b.first = grown, day
	case day-b.first >= len(b.v):
		var zero T
		for day-b.first >= len(b.v) {
			b.v = append(b.v, zero)
		}
	}
	return &b.v[day-b.first]
}

// mergeWith adds every element of o into b with add.
func (b *byDay[T]) mergeWith(o byDay[T], add func(into *T, from T)) {
	for i, x := range o.v {
		add(b.at(o.first+i), x)
	}
}

// dayTally counts the observations and successes (wins or hits) of one
// statistic on one day.
type dayTally struct{ n, k int }

// tallies counts a statistic's observations and successes per day.
type tallies struct{ byDay[dayTally] }

func (t *tallies) add(day int, success bool) {
	c := t.at(day)
	c.n++
	if success {
		c.k++
	}
}

func (t *tallies) merge(o tallies) {
	t.mergeWith(o.byDay, func(into *dayTally, from dayTally) {
		into.n += from.n
		into.k += from.k
	})
}

// daySet is the set of days an accumulator has seen, the market's trading
// days, and the range they span.
type daySet struct{ byDay[bool] }

// check refuses a day that would make the set span MaxDaySpan days or more.
func (s *daySet) check(day int) error {
	if len(s.v) == 0 {
		return nil
	}
	lo, hi := min(s.first, day), max(s.first+len(s.v)-1, day)
	if hi-lo >= MaxDaySpan {
		return domain.Errorf(domain.EINVALID, "stats: day %d is %d days or more from the other observations", day, MaxDaySpan)
	}
	return nil
}

func (s *daySet) add(day int) { *s.at(day) = true }

func (s *daySet) merge(o daySet) {
	s.mergeWith(o.byDay, func(into *bool, from bool) { *into = *into || from })
}

// calendar numbers the days seen in order (their trading-day index), so
// that blocks count trading days: a stock market's weekends and holidays
// do not make a block shorter.
type calendar struct {
	first int
	index []int // index[i]: trading days seen before day first+i
}

func (s daySet) calendar() calendar {
	c := calendar{first: s.first, index: make([]int, len(s.v))}
	n := 0
	for i, seen := range s.v {
		c.index[i] = n
		if seen {
			n++
		}
	}
	return c
}

// tradingDay returns the index of a seen day among the seen days.
func (c calendar) tradingDay(day int) int {
	i := day - c.first
	if i < 0 || i >= len(c.index) {
		return max(0, min(i, len(c.index))) // not seen: never asked for
	}
	return c.index[i]
}
