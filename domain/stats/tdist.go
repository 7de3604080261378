package stats

import "math"

// Student's t distribution, for the critical values and p-values of
// intervals whose variance is estimated from a handful of independent
// blocks (see effective.go). With G blocks the variance estimate has G−1
// degrees of freedom, and a normal 1.96 would pretend it is known exactly.

// tTwoSidedP returns the two-sided p-value P(|T| ≥ |t|) of Student's t with
// df degrees of freedom: the regularized incomplete beta I_x(df/2, 1/2) at
// x = df/(df+t²). df ≤ 0 or a NaN gives 1 (no evidence).
func tTwoSidedP(t, df float64) float64 {
	if !(df > 0) || math.IsNaN(t) {
		return 1
	}
	if math.IsInf(t, 0) {
		return 0
	}
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// tCritical95 returns the two-sided 95 % critical value of Student's t with
// df degrees of freedom (12.71 at 1, 2.78 at 4, 2.04 at 30, → 1.96), found
// by bisection on tTwoSidedP; +Inf for df ≤ 0.
func tCritical95(df float64) float64 {
	if !(df > 0) {
		return math.Inf(1)
	}
	if df > 1e7 {
		return Z95
	}
	lo, hi := Z95, 2*Z95 // the critical value is never below the normal one
	for tTwoSidedP(hi, df) > 0.05 {
		hi *= 2
	}
	for range 100 {
		mid := (lo + hi) / 2
		if tTwoSidedP(mid, df) > 0.05 {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-12 {
			break
		}
	}
	return (lo + hi) / 2
}

// regIncBeta is the regularized incomplete beta function I_x(a, b) for
// a, b > 0 and x in [0, 1], by the continued fraction of Numerical Recipes
// (modified Lentz), using the symmetry I_x(a,b) = 1 − I_{1−x}(b,a) where
// the fraction converges slowly.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaContinuedFraction(a, b, x) / a
	}
	return 1 - front*betaContinuedFraction(b, a, 1-x)/b
}

func betaContinuedFraction(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		num := fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm))
		for i := range 2 {
			if i == 1 {
				num = -(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1))
			}
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < eps {
			break
		}
	}
	return h
}
