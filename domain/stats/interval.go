package stats

import "math"

// Z95 is the two-sided 95% standard normal quantile used by the Wilson
// intervals.
const Z95 = 1.959963984540054

// SignificantSampleSize is the smallest sample size whose statistics are
// flagged is_significant (DESIGN §3).
const SignificantSampleSize = 30

// IsSignificant reports whether a sample is large enough to be treated as
// reliable.
func IsSignificant(sampleSize int) bool { return sampleSize >= SignificantSampleSize }

// Wilson returns the 95% Wilson score interval for successes out of n
// trials. It is preferred over the normal approximation because it stays
// inside [0,1] and behaves at 0 and n successes and at small n, which is
// exactly where young statistics live. n <= 0 gives the uninformative 0..1;
// successes is clamped to [0,n].
func Wilson(successes, n int) (low, high float64) {
	if n <= 0 {
		return 0, 1
	}
	successes = min(max(successes, 0), n)
	nf := float64(n)
	p := float64(successes) / nf
	z2 := Z95 * Z95
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := Z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / denom
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
