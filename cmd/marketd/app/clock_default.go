//go:build !benchclock

package app

// benchClockBuild: this build refuses MARKET_BENCH_CLOCK_OFFSET.
const benchClockBuild = false
