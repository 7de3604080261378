package analytics

// Verdict is the report's call on the asset.
type Verdict string

// Verdicts as shown on the wire.
const (
	VerdictGrowth  Verdict = "growth"
	VerdictDecline Verdict = "decline"
	VerdictNeutral Verdict = "neutral"
)

// Verdicts lists every verdict; DirectionalVerdicts those that point
// somewhere (the top setups filter on them).
var (
	Verdicts            = []Verdict{VerdictGrowth, VerdictDecline, VerdictNeutral}
	DirectionalVerdicts = []Verdict{VerdictGrowth, VerdictDecline}
)

// ParseVerdict parses a verdict as written on the wire.
func ParseVerdict(s string) (Verdict, bool) {
	for _, v := range Verdicts {
		if string(v) == s {
			return v, true
		}
	}
	return "", false
}

// Verdict thresholds on the overall score, the one place they live. A new
// growth (decline) verdict needs +20 (−20); a standing one holds until the
// score comes back inside ±10, so a score wobbling around 20 does not flip
// the verdict (and fire webhooks) on every scoring run.
const (
	GrowthEnter  = 20  // overall ≥ this: growth
	DeclineEnter = -20 // overall ≤ this: decline
	GrowthHold   = 10  // a standing growth holds while overall > this
	DeclineHold  = -10 // a standing decline holds while overall < this
)

// DecideVerdict returns the verdict for an overall score given the
// previous verdict (empty or unknown = none).
func DecideVerdict(prev Verdict, overall int) Verdict {
	switch {
	case overall >= GrowthEnter:
		return VerdictGrowth
	case overall <= DeclineEnter:
		return VerdictDecline
	case prev == VerdictGrowth && overall > GrowthHold:
		return VerdictGrowth
	case prev == VerdictDecline && overall < DeclineHold:
		return VerdictDecline
	}
	return VerdictNeutral
}
