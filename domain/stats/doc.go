// Package stats is the statistics math behind the historical verdict and
// factor performance records (GET /analytics/{market}/stats and
// /factor-stats, and the verdict_stats / factor_stats of a report).
//
// It is pure computation: forward returns and the median absolute move of a
// close series, the win and hit rules of DESIGN §3, Wilson score intervals
// on an effective sample size that accounts for overlapping horizons and
// for assets moving together (effective.go), Student's t, the
// Benjamini–Hochberg adjustment, Pearson correlation, and mergeable
// accumulators that a worker replaying history feeds one observation, with
// its day, at a time. Outputs never contain NaN or Inf, because they are
// rendered as JSON and stored in Postgres, neither of which accepts them.
package stats
