//go:build benchclock

package app

// benchClockBuild: this build honours MARKET_BENCH_CLOCK_OFFSET, for
// scale benchmarks that must reach a given close (bin/scalebench -clock-at).
const benchClockBuild = true
