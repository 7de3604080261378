package stats

// The verdicts, as written on the wire, in the order statistics are listed.
const (
	VerdictGrowth  = "growth"
	VerdictDecline = "decline"
	VerdictNeutral = "neutral"
)

// Verdicts lists every verdict in the order results are sorted.
var Verdicts = []string{VerdictGrowth, VerdictDecline, VerdictNeutral}

// VerdictWins reports whether a verdict was right about a forward return
// (DESIGN §3): growth wins on a return above 0, decline on one below 0, and
// neutral when |return| is strictly below the asset's median absolute move
// over the same horizon. A flat return is therefore a loss for both growth
// and decline, and a move exactly equal to the median is a loss for neutral.
// An unknown verdict never wins.
func VerdictWins(verdict string, forwardReturnPct, medianAbsMove float64) bool {
	switch verdict {
	case VerdictGrowth:
		return forwardReturnPct > 0
	case VerdictDecline:
		return forwardReturnPct < 0
	case VerdictNeutral:
		return abs(forwardReturnPct) < medianAbsMove
	}
	return false
}

// SentimentSign maps a factor sentiment (bullish, bearish, neutral) to +1,
// -1 or 0. Anything else is 0, so it is not counted as a hit or a miss.
func SentimentSign(sentiment string) int {
	switch sentiment {
	case "bullish":
		return 1
	case "bearish":
		return -1
	}
	return 0
}

// FactorHits reports whether a factor with the given sentiment sign was right
// about a forward return: the signs must match. counted is false for a
// neutral (zero) sentiment, which is left out of the hit rate; a zero return
// is a miss for either direction.
func FactorHits(sentimentSign int, forwardReturnPct float64) (hit, counted bool) {
	switch {
	case sentimentSign > 0:
		return forwardReturnPct > 0, true
	case sentimentSign < 0:
		return forwardReturnPct < 0, true
	}
	return false, false
}

// BaseRate returns the unconditional fraction of closes' h-bar forward
// returns that would win under verdict's rule, whatever the verdict actually
// was, and the number of returns it is taken over. It is the yardstick a win
// rate is shown beside: a growth win rate of 0.55 means little in a market
// that rose on 60% of days. ok is false when no return is defined.
func BaseRate(verdict string, closes []float64, h int) (rate float64, n int, ok bool) {
	med, ok := MedianAbsMove(closes, h)
	if !ok {
		return 0, 0, false
	}
	wins := 0
	for _, r := range ForwardReturns(closes, h) {
		n++
		if VerdictWins(verdict, r, med) {
			wins++
		}
	}
	return float64(wins) / float64(n), n, true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
