package indicator

import (
	"fmt"
	"math"
)

// Pattern names a candlestick pattern.
type Pattern string

// The candlestick patterns DetectPatterns recognises.
const (
	BullishEngulfing   Pattern = "bullish_engulfing"
	BearishEngulfing   Pattern = "bearish_engulfing"
	Hammer             Pattern = "hammer"
	ShootingStar       Pattern = "shooting_star"
	Doji               Pattern = "doji"
	MorningStar        Pattern = "morning_star"
	EveningStar        Pattern = "evening_star"
	ThreeWhiteSoldiers Pattern = "three_white_soldiers"
	ThreeBlackCrows    Pattern = "three_black_crows"
)

// Patterns lists every pattern in a stable order.
var Patterns = []Pattern{
	BullishEngulfing, BearishEngulfing, Hammer, ShootingStar, Doji,
	MorningStar, EveningStar, ThreeWhiteSoldiers, ThreeBlackCrows,
}

// Direction is +1 for bullish patterns, −1 for bearish ones and 0 for
// indecision (doji).
func (p Pattern) Direction() int {
	switch p {
	case BullishEngulfing, Hammer, MorningStar, ThreeWhiteSoldiers:
		return 1
	case BearishEngulfing, ShootingStar, EveningStar, ThreeBlackCrows:
		return -1
	}
	return 0
}

// Thresholds of the pattern rules, as fractions of a candle's range or of
// the average body. They follow the common textbook definitions (Nison);
// hammer and shooting star also need the preceding trend (close vs the
// close trendBars earlier) because a hammer in an uptrend is a hanging
// man, a different signal.
const (
	dojiBodyMax      = 0.1  // doji: body ≤ 10% of the range
	smallBodyMax     = 0.35 // hammer/star body ≤ 35% of the range
	shadowToBody     = 2.0  // hammer/star long shadow ≥ 2× body
	shortShadowMax   = 0.15 // hammer/star opposite shadow ≤ 15% of the range
	starBodyMax      = 0.3  // star middle body ≤ 30% of the first body
	longBodyMin      = 1.0  // a "long" body is at least the average body
	soldierShadowMax = 0.3  // soldiers/crows close near the extreme: shadow ≤ 30% of body
	avgBodyBars      = 10   // bars in the average body
	trendBars        = 5    // bars looked back for the preceding trend
)

// Morning/evening stars need the middle candle's body in the far half of
// the first body or beyond it (crypto markets rarely gap, so the textbook
// gap is relaxed to that), and the third candle closing past the first
// body's midpoint.
//
// DetectPatterns returns the patterns that complete on bar i of s, in the
// order of Patterns. A doji is reported only when no hammer or shooting
// star explains the same candle.
func DetectPatterns(s Series, i int) []Pattern {
	if i < 0 || i >= s.Len() {
		return nil
	}
	var out []Pattern
	c := candleAt(s, i)
	avg := averageBody(s, i)
	if i >= 1 {
		p := candleAt(s, i-1)
		if p.bearish() && c.bullish() && c.o <= p.c && c.c >= p.o && c.body() > p.body() {
			out = append(out, BullishEngulfing)
		}
		if p.bullish() && c.bearish() && c.o >= p.c && c.c <= p.o && c.body() > p.body() {
			out = append(out, BearishEngulfing)
		}
	}
	trend := 0.0
	if i >= trendBars {
		trend = s.Close[i-1] - s.Close[i-trendBars]
	}
	smallBody := c.rng() > 0 && c.body() <= smallBodyMax*c.rng()
	hammer := smallBody && trend < 0 && c.lower() >= shadowToBody*c.body() && c.upper() <= shortShadowMax*c.rng()
	star := smallBody && trend > 0 && c.upper() >= shadowToBody*c.body() && c.lower() <= shortShadowMax*c.rng()
	if hammer {
		out = append(out, Hammer)
	}
	if star {
		out = append(out, ShootingStar)
	}
	if !hammer && !star && c.rng() > 0 && c.body() <= dojiBodyMax*c.rng() {
		out = append(out, Doji)
	}
	if i >= 2 {
		a, b := candleAt(s, i-2), candleAt(s, i-1)
		long := a.body() >= longBodyMin*avg && a.body() > 0
		smallMid := b.body() <= starBodyMax*a.body()
		if long && smallMid && a.bearish() && c.bullish() && c.c > (a.o+a.c)/2 && math.Max(b.o, b.c) <= (a.o+a.c)/2 {
			out = append(out, MorningStar)
		}
		if long && smallMid && a.bullish() && c.bearish() && c.c < (a.o+a.c)/2 && math.Min(b.o, b.c) >= (a.o+a.c)/2 {
			out = append(out, EveningStar)
		}
		if soldiers(a, b, c, true) {
			out = append(out, ThreeWhiteSoldiers)
		}
		if soldiers(a, b, c, false) {
			out = append(out, ThreeBlackCrows)
		}
	}
	return out
}

// soldiers checks three white soldiers (up) or three black crows: three
// candles of the same colour, each closing beyond the previous close,
// opening inside the previous body and closing near its extreme.
func soldiers(a, b, c candle, up bool) bool {
	for _, k := range []candle{a, b, c} {
		if up && (!k.bullish() || k.upper() > soldierShadowMax*k.body()) {
			return false
		}
		if !up && (!k.bearish() || k.lower() > soldierShadowMax*k.body()) {
			return false
		}
	}
	if up {
		return b.c > a.c && c.c > b.c && b.o >= a.o && b.o <= a.c && c.o >= b.o && c.o <= b.c
	}
	return b.c < a.c && c.c < b.c && b.o <= a.o && b.o >= a.c && c.o <= b.o && c.o >= b.c
}

type candle struct{ o, h, l, c float64 }

func candleAt(s Series, i int) candle {
	return candle{s.Open[i], s.High[i], s.Low[i], s.Close[i]}
}

func (k candle) body() float64  { return math.Abs(k.c - k.o) }
func (k candle) rng() float64   { return k.h - k.l }
func (k candle) upper() float64 { return k.h - math.Max(k.o, k.c) }
func (k candle) lower() float64 { return math.Min(k.o, k.c) - k.l }
func (k candle) bullish() bool  { return k.c > k.o }
func (k candle) bearish() bool  { return k.c < k.o }

// averageBody is the mean body of the avgBodyBars bars before i (or of
// what exists), the yardstick for a "long" candle.
func averageBody(s Series, i int) float64 {
	from := max(0, i-avgBodyBars)
	if from == i {
		return 0
	}
	var sum float64
	for j := from; j < i; j++ {
		sum += math.Abs(s.Close[j] - s.Open[j])
	}
	return sum / float64(i-from)
}

// PatternParam is a named threshold of the pattern rules.
type PatternParam struct {
	Name  string
	Value float64
}

// PatternParams lists the thresholds DetectPatterns uses, for a published
// description of the rules.
func PatternParams() []PatternParam {
	return []PatternParam{
		{"doji_body_max", dojiBodyMax}, {"small_body_max", smallBodyMax}, {"shadow_to_body", shadowToBody},
		{"short_shadow_max", shortShadowMax}, {"star_body_max", starBodyMax}, {"long_body_min", longBodyMin},
		{"soldier_shadow_max", soldierShadowMax}, {"average_body_bars", avgBodyBars}, {"trend_bars", trendBars},
	}
}

// Definition is the pattern's rule in words, with the thresholds
// DetectPatterns uses (range = high − low, body = |close − open|, trend =
// close[1] − close[trend_bars]).
func (p Pattern) Definition() string {
	star := fmt.Sprintf("body ≤ %g·range, trend %%s 0, %%s shadow ≥ %g·body, %%s shadow ≤ %g·range",
		smallBodyMax, shadowToBody, shortShadowMax)
	longFirst := fmt.Sprintf("first body ≥ %g × the average body of the %d bars before the last, middle body ≤ %g × the first body",
		longBodyMin, avgBodyBars, starBodyMax)
	switch p {
	case BullishEngulfing:
		return "previous candle bearish, last bullish, last open ≤ previous close, last close ≥ previous open, last body > previous body"
	case BearishEngulfing:
		return "previous candle bullish, last bearish, last open ≥ previous close, last close ≤ previous open, last body > previous body"
	case Hammer:
		return fmt.Sprintf(star, "<", "lower", "upper")
	case ShootingStar:
		return fmt.Sprintf(star, ">", "upper", "lower")
	case Doji:
		return fmt.Sprintf("range > 0 and body ≤ %g·range, when the candle is neither a hammer nor a shooting star", dojiBodyMax)
	case MorningStar:
		return longFirst + ", first bearish, last bullish closing above the first body's midpoint, middle body's top ≤ that midpoint"
	case EveningStar:
		return longFirst + ", first bullish, last bearish closing below the first body's midpoint, middle body's bottom ≥ that midpoint"
	case ThreeWhiteSoldiers:
		return fmt.Sprintf("three bullish candles, each upper shadow ≤ %g·body, each closing above the previous close and opening inside the previous body", soldierShadowMax)
	case ThreeBlackCrows:
		return fmt.Sprintf("three bearish candles, each lower shadow ≤ %g·body, each closing below the previous close and opening inside the previous body", soldierShadowMax)
	}
	return ""
}
