package stats

import "math"

// Z95 is the two-sided 95% standard normal quantile used by the Wilson
// intervals.
const Z95 = 1.959963984540054

// SignificantSampleSize is the smallest effective sample size whose
// statistics can be flagged is_significant (which also needs the interval
// to exclude the base rate; see effective.go). It counts effective, not raw,
// observations: thirty overlapping, correlated observations are far fewer
// than thirty independent ones.
const SignificantSampleSize = 30

// Wilson returns the 95% Wilson score interval for successes out of n
// independent trials. It is preferred over the normal approximation because
// it stays inside [0,1] and behaves at 0 and n successes and at small n,
// which is exactly where young statistics live. n <= 0 gives the
// uninformative 0..1; successes is clamped to [0,n]. The published
// statistics use wilsonInterval on an effective sample size instead.
func Wilson(successes, n int) (low, high float64) {
	if n <= 0 {
		return 0, 1
	}
	successes = min(max(successes, 0), n)
	return wilsonInterval(float64(successes)/float64(n), float64(n), Z95)
}

// wilsonInterval is the Wilson score interval of an observed rate p over n
// (possibly fractional, effective) trials with critical value z: the rates
// p0 that the score test (p − p0)² ≤ z²·p0(1−p0)/n does not reject. n <= 0
// or an infinite z gives 0..1.
func wilsonInterval(p, n, z float64) (low, high float64) {
	if !(n > 0) || math.IsInf(z, 1) || math.IsNaN(z) {
		return 0, 1
	}
	p = clamp01(p)
	z2 := z * z
	denom := 1 + z2/n
	center := (p + z2/(2*n)) / denom
	half := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n)) / denom
	return clamp01(center - half), clamp01(center + half)
}

func clamp01(x float64) float64 {
	switch {
	case math.IsNaN(x) || x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}
