package analytics

import (
	"math"
	"slices"

	"github.com/marketscreener/market/domain/indicator"
)

// Scenario parameters. Swing pivots need pivotBars lower highs (higher
// lows) on each side; pivots closer than clusterATR·ATR merge into one
// level; a level closer to the close than minDistanceATR·ATR is the
// price itself, not a level to trade against.
const (
	scenarioATR    = 14 // ATR length, the scenario's yardstick
	scenarioBars   = 200
	pivotBars      = 3
	clusterATR     = 0.5
	minDistanceATR = 0.25
	fallbackATR    = 2.0  // no level found: close ± 2 ATR
	fallbackPct    = 0.02 // no ATR either (flat series): close ± 2%
)

// level is a cluster of swing pivots.
type level struct {
	price   float64 // mean of the pivots
	touches int
}

// scenario builds support, resistance and their texts for a verdict.
func scenario(s indicator.Series, atr float64, v Verdict) Scenario {
	n := s.Len()
	close := s.Close[n-1]
	if math.IsNaN(atr) || atr <= 0 {
		atr = close * fallbackPct / fallbackATR
	}
	from := max(0, n-scenarioBars)
	levels := clusterPivots(indicator.SwingPivots(s.High[from:], s.Low[from:], pivotBars, pivotBars), clusterATR*atr)

	support, resistance := math.Inf(-1), math.Inf(1)
	for _, l := range levels {
		switch {
		case l.price <= close-minDistanceATR*atr && l.price > support:
			support = l.price
		case l.price >= close+minDistanceATR*atr && l.price < resistance:
			resistance = l.price
		}
	}
	if math.IsInf(support, 0) {
		support = close - fallbackATR*atr
		if lo := slices.Min(s.Low[from:]); lo < support {
			support = lo
		}
	}
	if math.IsInf(resistance, 0) {
		resistance = close + fallbackATR*atr
		if hi := slices.Max(s.High[from:]); hi > resistance {
			resistance = hi
		}
	}
	// Rounded to the precision the texts show, so numbers and texts agree.
	support, resistance = roundPrice(math.Max(support, 0)), roundPrice(resistance)

	sc := Scenario{Support: support, Resistance: resistance, LastClose: close}
	args := []string{"support", fmtPrice(support), "resistance", fmtPrice(resistance), "close", fmtPrice(close),
		"up", fmtPct((resistance-close)/close, 1), "down", fmtPct((close-support)/close, 1)}
	switch v {
	case VerdictGrowth:
		sc.Text, sc.Invalidation = msg("scenario.growth", args...), msg("invalidation.growth", args...)
	case VerdictDecline:
		sc.Text, sc.Invalidation = msg("scenario.decline", args...), msg("invalidation.decline", args...)
	default:
		sc.Text, sc.Invalidation = msg("scenario.neutral", args...), msg("invalidation.neutral", args...)
	}
	return sc
}

// clusterPivots merges pivot prices within tol of a cluster's running mean
// (sorted sweep), so several touches of one zone become one level.
func clusterPivots(ps []indicator.Pivot, tol float64) []level {
	prices := make([]float64, len(ps))
	for i, p := range ps {
		prices[i] = p.Price
	}
	slices.Sort(prices)
	var out []level
	var sum float64
	for _, p := range prices {
		if k := len(out) - 1; k >= 0 && p-out[k].price <= tol {
			sum += p
			out[k].touches++
			out[k].price = sum / float64(out[k].touches)
			continue
		}
		sum = p
		out = append(out, level{price: p, touches: 1})
	}
	return out
}

// roundPrice rounds a price to the decimals fmtPrice shows.
func roundPrice(v float64) float64 {
	p := math.Pow(10, float64(priceDecimals(v)))
	return math.Round(v*p) / p
}
