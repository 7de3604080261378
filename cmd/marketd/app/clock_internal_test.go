package app

import (
	"strings"
	"testing"
	"time"
)

// TestBenchClockOffset: a benchclock build (make test runs this test in
// one too) shifts the clock of market time by MARKET_BENCH_CLOCK_OFFSET
// and refuses an offset that is not whole minutes; any other build
// refuses the variable, naming it, and keeps the wall clock.
func TestBenchClockOffset(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return LoadConfig(func(k string) string {
			if k == "MARKET_BENCH_CLOCK_OFFSET" {
				return v
			}
			return ""
		})
	}
	near := func(c Config, want time.Duration) bool {
		d := c.now()().Sub(time.Now())
		return d > want-time.Minute && d < want+time.Minute
	}
	wall, err := load("")
	if err != nil || wall.ClockOffset != 0 || !near(wall, 0) {
		t.Fatalf("unset: offset %v, %v; want the wall clock", wall.ClockOffset, err)
	}
	shift := 14*time.Hour + 25*time.Minute
	c, err := load("14h25m")
	if !benchClockBuild {
		if err == nil || !strings.HasPrefix(err.Error(), "MARKET_BENCH_CLOCK_OFFSET: ") || !strings.Contains(err.Error(), "-tags benchclock") {
			t.Fatalf("a production build took MARKET_BENCH_CLOCK_OFFSET: %+v, %v", c.ClockOffset, err)
		}
		return
	}
	if err != nil || c.ClockOffset != shift || !near(c, shift) {
		t.Fatalf("14h25m: offset %v, %v; want the clock %v ahead", c.ClockOffset, err, shift)
	}
	if c, err := load("-9h"); err != nil || !near(c, -9*time.Hour) {
		t.Fatalf("-9h: offset %v, %v", c.ClockOffset, err)
	}
	for _, bad := range []string{"90s", "1.5s", "soon"} {
		if _, err := load(bad); err == nil || !strings.HasPrefix(err.Error(), "MARKET_BENCH_CLOCK_OFFSET: ") {
			t.Errorf("%s: %v, want an error naming the variable", bad, err)
		}
	}
}
