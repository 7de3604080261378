package analytics

import (
	"slices"

	"github.com/marketscreener/market/domain"
)

// Sentiment is the direction a factor points to.
type Sentiment string

// Factor sentiments as shown on the wire.
const (
	Bullish Sentiment = "bullish"
	Bearish Sentiment = "bearish"
	Neutral Sentiment = "neutral"
)

// Sentiments lists every sentiment.
var Sentiments = []Sentiment{Bullish, Bearish, Neutral}

// sign is +1, −1 or 0.
func (s Sentiment) sign() float64 {
	switch s {
	case Bullish:
		return 1
	case Bearish:
		return -1
	}
	return 0
}

// sentimentOf maps a vote (+1, 0, −1) to a Sentiment.
func sentimentOf(v int) Sentiment {
	switch {
	case v > 0:
		return Bullish
	case v < 0:
		return Bearish
	}
	return Neutral
}

// Factor groups: the two TradingView vote groups, our additions, and the
// fundamental inputs.
const (
	GroupMA          = "ma"
	GroupOscillator  = "oscillator"
	GroupPattern     = "pattern"
	GroupVolume      = "volume"
	GroupFundamental = "fundamental"
)

// TechnicalGroups lists the groups of the technical votes (the rules of
// the methodology); Groups adds the fundamental inputs.
var TechnicalGroups = []string{GroupMA, GroupOscillator, GroupPattern, GroupVolume}

// Groups lists every factor group.
var Groups = append(slices.Clip(TechnicalGroups), GroupFundamental)

// Factor is one reason behind the score.
type Factor struct {
	// Name is a stable identifier ("rsi_14", "pattern_hammer"); statistics
	// group by it. FactorNames lists them all.
	Name string `json:"name"`
	// Value is the indicator reading, formatted language-neutrally.
	Value     string    `json:"value"`
	Sentiment Sentiment `json:"sentiment"`
	// Weight is the factor's share of the overall score, 0..1; the weights
	// of one result sum to 1. Technical factors share 0.7 and fundamental
	// ones 0.3 when both parts exist.
	Weight float64 `json:"weight"`
	Group  string  `json:"group"`
	// Contribution is sign(sentiment) × Weight: what the factor adds to the
	// overall score (÷100). Factor statistics correlate it with returns.
	Contribution float64 `json:"contribution"`
	// Text explains the factor.
	Text Message `json:"text"`
}

// Scenario is the price plan around the current close.
type Scenario struct {
	Support      float64 `json:"support"`
	Resistance   float64 `json:"resistance"`
	LastClose    float64 `json:"last_close"`
	Text         Message `json:"text"`
	Invalidation Message `json:"invalidation"`
}

// Result is a scored asset, language-neutral and JSON-serialisable (the
// worker stores it; the api renders it with Localize).
type Result struct {
	TechnicalScore int `json:"technical_score"`
	// FundamentalScore is nil when no fundamental input was available.
	FundamentalScore *int     `json:"fundamental_score"`
	OverallScore     int      `json:"overall_score"`
	Verdict          Verdict  `json:"verdict"`
	Factors          []Factor `json:"factors"`
	Scenario         Scenario `json:"scenario"`
	Summary          Message  `json:"summary"`
	// ModelVersion is the Version.Name of the method that made the result.
	ModelVersion string `json:"model_version"`
}

// Input is what Score needs about one asset.
type Input struct {
	Market domain.Market
	Symbol string
	// Candles of the trading style's timeframe (Style.Timeframe), oldest
	// first. At least MinCandles; RecommendedCandles for every vote.
	Candles []domain.Candle
	// Bars, when set, are the candles by column and Candles is not read:
	// the scoring worker's cache keeps its series so. Score only reads
	// them.
	Bars *domain.Bars
	// Fundamentals is optional; nil or all-nil fields make the
	// fundamental part unavailable.
	Fundamentals *Fundamentals
	// PrevVerdict is the asset's standing verdict, empty for none; it
	// drives the hysteresis of DecideVerdict.
	PrevVerdict Verdict
}
