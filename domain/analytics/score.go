package analytics

import (
	"fmt"
	"math"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/indicator"
)

// Candle counts. Below MinCandles Score refuses; from MinCandles to
// RecommendedCandles the long averages (SMA/EMA 100 and 200) are missing
// and left out of the MA group, and EMA 200 is still close to its SMA seed.
const (
	MinCandles         = 60
	RecommendedCandles = 300
)

// Shares of the overall score when both parts exist.
const (
	TechnicalShare   = 0.7
	FundamentalShare = 0.3
)

// Score scores one asset from its candles and optional fundamentals. It
// returns an EINVALID error for fewer than MinCandles candles or candles
// that fail domain.ValidateCandles (Bars.Validate for Input.Bars).
func Score(in Input) (Result, error) {
	n := len(in.Candles)
	if in.Bars != nil {
		n = in.Bars.Len()
	}
	if n < MinCandles {
		return Result{}, fmt.Errorf("analytics: %w", domain.Errorf(domain.EINVALID,
			"too few candles to score %s: %d (need at least %d)", in.Symbol, n, MinCandles))
	}
	var s indicator.Series
	if b := in.Bars; b != nil {
		if err := b.Validate(); err != nil {
			return Result{}, fmt.Errorf("analytics: %w", err)
		}
		s = indicator.Series{Open: b.Open, High: b.High, Low: b.Low, Close: b.Close, Volume: b.Volume}
	} else {
		if err := domain.ValidateCandles(in.Candles); err != nil {
			return Result{}, fmt.Errorf("analytics: %w", err)
		}
		s = indicator.FromCandles(in.Candles)
	}

	factors := technical(s)
	normalise(factors)
	tech := scoreOf(factors)

	fund := fundamental(in.Market, in.Fundamentals, s.Close[n-1]-s.Close[n-1-trendChangeBars])
	res := Result{TechnicalScore: tech, OverallScore: tech, ModelVersion: CurrentVersion().Name}
	if len(fund) > 0 {
		fs := scoreOf(fund)
		res.FundamentalScore = &fs
		res.OverallScore = clampScore(math.Round(TechnicalShare*float64(tech) + FundamentalShare*float64(fs)))
		scale(factors, TechnicalShare)
		scale(fund, FundamentalShare)
		factors = append(factors, fund...)
	}
	for i := range factors {
		factors[i].Contribution = factors[i].Sentiment.sign() * factors[i].Weight
	}
	res.Factors = factors
	res.Verdict = DecideVerdict(in.PrevVerdict, res.OverallScore)
	res.Scenario = scenario(s, indicator.Last(indicator.ATR(s.High, s.Low, s.Close, scenarioATR), 0), res.Verdict)
	res.Summary = summary(in.Symbol, res)
	return res, nil
}

// normalise scales raw weights to sum to 1.
func normalise(fs []Factor) {
	var total float64
	for _, f := range fs {
		total += f.Weight
	}
	if total > 0 {
		scale(fs, 1/total)
	}
}

func scale(fs []Factor, k float64) {
	for i := range fs {
		fs[i].Weight *= k
	}
}

// scoreOf is 100 × the weighted mean of the factors' signs (weights sum
// to 1), rounded and clamped to −100..100.
func scoreOf(fs []Factor) int {
	var sum float64
	for _, f := range fs {
		sum += f.Sentiment.sign() * f.Weight
	}
	return clampScore(math.Round(100 * sum))
}

func clampScore(v float64) int {
	if math.IsNaN(v) {
		return 0
	}
	return int(math.Max(-100, math.Min(100, v)))
}

// summary is the one-paragraph digest of a result.
func summary(symbol string, r Result) Message {
	var bull, bear, neutral int
	for _, f := range r.Factors {
		switch f.Sentiment {
		case Bullish:
			bull++
		case Bearish:
			bear++
		default:
			neutral++
		}
	}
	fund := ref("fundamental.unavailable")
	if r.FundamentalScore != nil {
		fund = fmt.Sprint(*r.FundamentalScore)
	}
	if symbol == "" {
		symbol = "—"
	}
	return msg("summary", "symbol", symbol, "overall", fmt.Sprint(r.OverallScore), "verdict", ref("verdict."+string(r.Verdict)),
		"technical", fmt.Sprint(r.TechnicalScore), "fundamental", fund,
		"bullish", fmt.Sprint(bull), "bearish", fmt.Sprint(bear), "neutral", fmt.Sprint(neutral),
		"support", fmtPrice(r.Scenario.Support), "resistance", fmtPrice(r.Scenario.Resistance))
}
