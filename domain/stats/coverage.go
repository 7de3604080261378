package stats

import "time"

// Coverage is what a source's records of a market were computed over: the
// bars of every asset with enough daily history, delisted ones included
// up to their last day.
type Coverage struct {
	// WindowStart and WindowEnd are the first and last day (YYYY-MM-DD,
	// UTC) of the bars judged; empty when none was.
	WindowStart string `json:"window_start,omitempty"`
	WindowEnd   string `json:"window_end,omitempty"`
	// Assets is how many assets the observations come from, delisted
	// ones included.
	Assets int `json:"assets,omitempty"`
}

// NewCoverage returns the coverage of the days first to last (see
// DayNumber) over assets assets; ok false leaves the window empty.
func NewCoverage(first, last int, ok bool, assets int) Coverage {
	c := Coverage{Assets: assets}
	if ok {
		c.WindowStart, c.WindowEnd = dayString(first), dayString(last)
	}
	return c
}

func dayString(day int) string { return time.Unix(int64(day)*86400, 0).UTC().Format(time.DateOnly) }

// SetVerdictCoverage sets the coverage of every record.
func SetVerdictCoverage(rs []VerdictStat, c Coverage) {
	for i := range rs {
		rs[i].Coverage = c
	}
}

// SetFactorCoverage sets the coverage of every record.
func SetFactorCoverage(rs []FactorStat, c Coverage) {
	for i := range rs {
		rs[i].Coverage = c
	}
}
