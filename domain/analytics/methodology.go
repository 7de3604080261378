package analytics

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/indicator"
)

// Version is one published version of the scoring method. A change of any
// rule (a setting, a threshold, a weight, a condition) is a new version:
// the Rules of the engine hash to Fingerprint, and a test fails when they
// no longer do, so a rule cannot change without a new entry in Versions.
type Version struct {
	// Name is what reports, snapshots, webhooks and verdict stream events carry
	// as model_version.
	Name string `json:"version" doc:"The model_version that reports, history snapshots, webhook payloads and verdict stream events made with this method carry" example:"v1"`
	// Released is the day the version started scoring (YYYY-MM-DD).
	Released string `json:"released" doc:"The day this version started scoring (YYYY-MM-DD)" example:"2026-11-26"`
	// Fingerprint is the SHA-256 of the JSON encoding of its Rules.
	Fingerprint string `json:"fingerprint" doc:"SHA-256 (hex) of the JSON encoding of rules (field order as served, no HTML escaping, one trailing newline): a rule cannot change without changing it" example:"e90a6420ee28e1bffa766d82da01b16e73898feb76651910f1a7608317d580a1"`
	// Changelog says what changed from the version before.
	Changelog string `json:"changelog" doc:"What changed from the previous version"`
}

// Versions lists every version of the method, oldest first; the last one
// is what Score runs. To change a rule: add a version here with the new
// fingerprint (the test names it), a changelog entry, and its vectors
// (docs/vectors/<name>/, written by the vectors test with -update); the
// earlier versions' methodology.json stay as published.
var Versions = []Version{{
	Name:        "v1",
	Released:    "2026-11-26",
	Fingerprint: "e90a6420ee28e1bffa766d82da01b16e73898feb76651910f1a7608317d580a1",
	Changelog: "First published version: the 26 votes of TradingView's Technical Rating v3 (15 moving-average and 11 oscillator votes, " +
		"equal halves), 9 candlestick patterns and 2 volume factors; per-market fundamental inputs sharing 30% of the overall score; " +
		"verdict thresholds ±20 with hysteresis to ±10.",
}}

// CurrentVersion is the version Score runs.
func CurrentVersion() Version { return Versions[len(Versions)-1] }

// Method is one version with its rules: an entry of GET /analytics/methodology.
type Method struct {
	Version
	Rules Rules `json:"rules"`
}

// Rules is everything that decides a score and a verdict, as data.
type Rules struct {
	Candles      CandleRules       `json:"candles"`
	Votes        []VoteRule        `json:"votes" doc:"Every technical factor: the Technical Rating's moving-average and oscillator votes, the candlestick patterns and the volume factors, in report order"`
	Weights      WeightRules       `json:"weights"`
	Verdict      VerdictRules      `json:"verdict"`
	Fundamentals []FundamentalRule `json:"fundamentals" doc:"The fundamental inputs of each market"`
	Scenario     []Param           `json:"scenario" doc:"Settings of the support/resistance scenario (not part of the score)"`
}

// CandleRules are the history a score needs.
type CandleRules struct {
	Min         int `json:"min" doc:"Fewer candles are not scored" example:"60"`
	Recommended int `json:"recommended" doc:"From this many every vote can be cast; below it the long averages are missing and left out of their group" example:"300"`
}

// VoteRule is the rule of one technical factor.
type VoteRule struct {
	Factor    string  `json:"factor" doc:"The factor's name in reports and statistics" example:"rsi_14"`
	Group     string  `json:"group" enum:"ma,oscillator,pattern,volume" example:"oscillator"`
	Indicator string  `json:"indicator" doc:"The indicator and how it is computed" example:"RSI (Wilder's RMA of gains and losses)"`
	Params    []Param `json:"params" doc:"Its settings and thresholds"`
	Buy       string  `json:"buy" doc:"When it votes buy (bullish, +1); x[1] is the value one bar before the last" example:"RSI < 30 and RSI > RSI[1]"`
	Sell      string  `json:"sell" doc:"When it votes sell (bearish, -1); otherwise it is neutral (0)" example:"RSI > 70 and RSI < RSI[1]"`
	Missing   string  `json:"missing" doc:"When it casts no vote and is left out of its group (not counted as neutral)" example:"RSI[1] undefined"`
}

// Param is a named setting or threshold.
type Param struct {
	Name  string  `json:"name" example:"length"`
	Value float64 `json:"value" example:"14"`
}

// WeightRules are how the factors add up to the scores.
type WeightRules struct {
	MAGroup          float64 `json:"ma_group" doc:"Raw weight of the moving-average votes, split evenly among the votes cast" example:"0.4"`
	OscillatorGroup  float64 `json:"oscillator_group" doc:"Raw weight of the oscillator votes, split evenly among the votes cast" example:"0.4"`
	Pattern          float64 `json:"pattern" doc:"Raw weight of each pattern completed on the last candle" example:"0.06"`
	Volume           float64 `json:"volume" doc:"Raw weight of each volume factor" example:"0.06"`
	TechnicalShare   float64 `json:"technical_share" doc:"Share of the technical score in the overall score when a fundamental score exists" example:"0.7"`
	FundamentalShare float64 `json:"fundamental_share" doc:"Share of the fundamental score in the overall score" example:"0.3"`
	Score            string  `json:"score" doc:"How a score is computed from its factors"`
}

// VerdictRules are the verdict thresholds and their hysteresis.
type VerdictRules struct {
	GrowthEnter  int    `json:"growth_enter" doc:"overall_score ≥ this: growth" example:"20"`
	DeclineEnter int    `json:"decline_enter" doc:"overall_score ≤ this: decline" example:"-20"`
	GrowthHold   int    `json:"growth_hold" doc:"A standing growth verdict holds while overall_score > this" example:"10"`
	DeclineHold  int    `json:"decline_hold" doc:"A standing decline verdict holds while overall_score < this" example:"-10"`
	Rule         string `json:"rule" doc:"The decision in words"`
}

// FundamentalRule is one fundamental input of a market.
type FundamentalRule struct {
	Market  string  `json:"market" enum:"crypto,forex,stocks" example:"crypto"`
	Factor  string  `json:"factor" example:"funding_rate"`
	Input   string  `json:"input" doc:"What the input is and its unit" example:"latest funding rate of the perpetual future per 8 h, fraction"`
	Weight  float64 `json:"weight" doc:"Relative weight inside the market's fundamental score; missing inputs drop out and the rest are renormalised" example:"0.4"`
	Params  []Param `json:"params"`
	Bullish string  `json:"bullish" example:"funding ≤ -0.0001"`
	Bearish string  `json:"bearish" example:"funding ≥ 0.0005"`
}

// CurrentMethod is the current version with the rules the engine runs,
// generated from the same constants Score reads.
func CurrentMethod() Method {
	return Method{Version: CurrentVersion(), Rules: currentRules()}
}

// Fingerprint is the SHA-256 (hex) of r's JSON encoding: encoding/json's,
// in field order, without HTML escaping, with the trailing newline of
// json.Encoder.
func (r Rules) Fingerprint() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		panic(fmt.Sprintf("analytics: rules do not encode: %v", err)) // plain data: cannot happen
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// Methodology lists every version with its rules, oldest first: the
// current version's generated from the engine, each earlier one's from
// published, its methodology.json as published when it was current (the
// engine no longer runs it). It fails when an earlier version is missing
// from published or its rules do not hash to its fingerprint.
func Methodology(published map[string]Method) ([]Method, error) {
	return methodology(Versions, currentRules(), published)
}

func methodology(versions []Version, current Rules, published map[string]Method) ([]Method, error) {
	out := make([]Method, 0, len(versions))
	for _, v := range versions[:len(versions)-1] {
		m, ok := published[v.Name]
		if !ok {
			return nil, fmt.Errorf("analytics: the rules of model version %s are not published", v.Name)
		}
		if fp := m.Rules.Fingerprint(); fp != v.Fingerprint {
			return nil, fmt.Errorf("analytics: the published rules of model version %s hash to %s, not %s", v.Name, fp, v.Fingerprint)
		}
		out = append(out, Method{Version: v, Rules: m.Rules})
	}
	return append(out, Method{Version: versions[len(versions)-1], Rules: current}), nil
}

func currentRules() Rules {
	return Rules{
		Candles:      CandleRules{Min: MinCandles, Recommended: RecommendedCandles},
		Votes:        voteRules(),
		Weights:      weightRules(),
		Verdict:      verdictRules(),
		Fundamentals: fundamentalRules(),
		Scenario: []Param{
			{"atr_length", scenarioATR}, {"bars", scenarioBars}, {"pivot_bars", pivotBars},
			{"cluster_atr", clusterATR}, {"min_distance_atr", minDistanceATR},
			{"fallback_atr", fallbackATR}, {"fallback_pct", fallbackPct},
		},
	}
}

func voteRules() []VoteRule {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out []VoteRule
	ma := func(factor, ind string, params []Param, label string, period int) {
		out = append(out, VoteRule{Factor: factor, Group: GroupMA, Indicator: ind, Params: params,
			Buy: "close > " + label, Sell: "close < " + label, Missing: fmt.Sprintf("%s undefined (fewer than %d candles)", label, period)})
	}
	for _, p := range maPeriods {
		ma(fmt.Sprintf("sma_%d", p), "simple moving average of the close", []Param{{"length", float64(p)}}, fmt.Sprintf("SMA(%d)", p), p)
	}
	for _, p := range maPeriods {
		ma(fmt.Sprintf("ema_%d", p), "exponential moving average of the close, seeded with the SMA of its first length closes",
			[]Param{{"length", float64(p)}}, fmt.Sprintf("EMA(%d)", p), p)
	}
	ma("hma_9", "Hull moving average: WMA(2·WMA(close, length/2) − WMA(close, length), ⌊√length⌋)",
		[]Param{{"length", hmaLength}}, fmt.Sprintf("HMA(%d)", hmaLength), hmaLength)
	ma("vwma_20", "volume-weighted moving average: SMA(close·volume, length) / SMA(volume, length)",
		[]Param{{"length", vwmaLength}}, fmt.Sprintf("VWMA(%d)", vwmaLength), vwmaLength)
	out = append(out, VoteRule{Factor: "ichimoku_9_26_52", Group: GroupMA,
		Indicator: "Ichimoku cloud: conversion and base are the midpoints of the highest high and lowest low over their lengths; " +
			"span A = (conversion + base)/2, span B = the midpoint over span_b_length; the cloud under the last candle is the one computed displacement bars before it",
		Params: []Param{{"conversion_length", ichimokuConversion}, {"base_length", ichimokuBase}, {"span_b_length", ichimokuSpanB},
			{"displacement", ichimokuDisplacement}},
		Buy:     fmt.Sprintf("span A[%[1]d] > span B[%[1]d] and base > span A[%[1]d] and conversion > base and close > conversion", ichimokuDisplacement),
		Sell:    fmt.Sprintf("span A[%[1]d] < span B[%[1]d] and base < span A[%[1]d] and conversion < base and close < conversion", ichimokuDisplacement),
		Missing: "span B of the last candle undefined"})

	osc := func(r VoteRule) {
		r.Group = GroupOscillator
		out = append(out, r)
	}
	osc(VoteRule{Factor: "rsi_14", Indicator: "RSI (Wilder's RMA of gains and losses, seeded with their simple mean)",
		Params: []Param{{"length", rsiLength}, {"oversold", rsiOversold}, {"overbought", rsiOverbought}},
		Buy:    "RSI < " + g(rsiOversold) + " and RSI > RSI[1]", Sell: "RSI > " + g(rsiOverbought) + " and RSI < RSI[1]",
		Missing: "RSI[1] undefined"})
	osc(VoteRule{Factor: "stoch_14_3_3", Indicator: "full stochastic: %K = SMA(100·(close − lowest low)/(highest high − lowest low), smooth_k), %D = SMA(%K, smooth_d); undefined over a flat range",
		Params: []Param{{"length", stochLength}, {"smooth_k", stochSmoothK}, {"smooth_d", stochSmoothD}, {"oversold", stochOversold}, {"overbought", stochOverbought}},
		Buy:    fmt.Sprintf("%%K < %s and %%D < %[1]s and %%K > %%D", g(stochOversold)),
		Sell:   fmt.Sprintf("%%K > %s and %%D > %[1]s and %%K < %%D", g(stochOverbought)), Missing: "%D[1] undefined"})
	osc(VoteRule{Factor: "cci_20", Indicator: "commodity channel index of the close: (close − SMA) / (0.015 · mean absolute deviation)",
		Params: []Param{{"length", cciLength}, {"oversold", cciOversold}, {"overbought", cciOverbought}},
		Buy:    "CCI < " + g(cciOversold) + " and CCI > CCI[1]", Sell: "CCI > " + g(cciOverbought) + " and CCI < CCI[1]", Missing: "CCI[1] undefined"})
	osc(VoteRule{Factor: "adx_14", Indicator: "directional movement: +DI, −DI (RMA over di_length) and ADX (RMA of DX over adx_smoothing)",
		Params: []Param{{"di_length", adxDILength}, {"adx_smoothing", adxSmoothing}, {"trend", adxTrend}},
		Buy:    "ADX > " + g(adxTrend) + " and ADX > ADX[1] and +DI > −DI", Sell: "ADX > " + g(adxTrend) + " and ADX > ADX[1] and +DI < −DI",
		Missing: "ADX undefined"})
	osc(VoteRule{Factor: "awesome_oscillator", Indicator: "awesome oscillator: SMA(hl2, fast) − SMA(hl2, slow), hl2 = (high + low)/2",
		Params:  []Param{{"fast", aoFast}, {"slow", aoSlow}},
		Buy:     "(AO > 0 and AO[1] ≤ 0) or (AO > 0 and AO[1] > 0 and AO > AO[1] and AO[2] > AO[1])",
		Sell:    "(AO < 0 and AO[1] ≥ 0) or (AO < 0 and AO[1] < 0 and AO < AO[1] and AO[2] < AO[1])",
		Missing: "AO[1] undefined"})
	osc(VoteRule{Factor: "momentum_10", Indicator: "momentum: close − close[length]", Params: []Param{{"length", momentumLength}},
		Buy: "MOM > MOM[1]", Sell: "MOM < MOM[1]", Missing: "MOM[1] undefined"})
	osc(VoteRule{Factor: "macd_12_26_9", Indicator: "MACD: EMA(close, fast) − EMA(close, slow); signal = EMA(MACD, signal)",
		Params: []Param{{"fast", macdFast}, {"slow", macdSlow}, {"signal", macdSignal}},
		Buy:    "MACD > signal", Sell: "MACD < signal", Missing: "signal undefined"})
	osc(VoteRule{Factor: "stoch_rsi_14_14_3_3", Indicator: "stochastic RSI: the full stochastic (length, smooth_k, smooth_d) of RSI(rsi_length); trend from EMA(close, trend_ema)",
		Params: []Param{{"rsi_length", stochRSILength}, {"length", stochRSIStochLength}, {"smooth_k", stochRSISmoothK}, {"smooth_d", stochRSISmoothD},
			{"oversold", stochRSIOversold}, {"overbought", stochRSIOverbought}, {"trend_ema", trendEMA}},
		Buy:     fmt.Sprintf("close < EMA(%d) and %%K < %s and %%D < %[2]s and %%K > %%D", trendEMA, g(stochRSIOversold)),
		Sell:    fmt.Sprintf("close > EMA(%d) and %%K > %s and %%D > %[2]s and %%K < %%D", trendEMA, g(stochRSIOverbought)),
		Missing: fmt.Sprintf("EMA(%d) undefined", trendEMA)})
	osc(VoteRule{Factor: "williams_r_14", Indicator: "Williams %R: 100·(close − highest high)/(highest high − lowest low); undefined over a flat range",
		Params: []Param{{"length", williamsLength}, {"oversold", williamsOversold}, {"overbought", williamsOverbought}},
		Buy:    "%R < " + g(williamsOversold) + " and %R > %R[1]", Sell: "%R > " + g(williamsOverbought) + " and %R < %R[1]", Missing: "%R[1] undefined"})
	osc(VoteRule{Factor: "bull_bear_power_13", Indicator: "Elder's power: bull = high − EMA(close, length), bear = low − EMA(close, length); trend from EMA(close, trend_ema)",
		Params:  []Param{{"length", bullBearLength}, {"trend_ema", trendEMA}},
		Buy:     fmt.Sprintf("close > EMA(%d) and bear < 0 and bear > bear[1]", trendEMA),
		Sell:    fmt.Sprintf("close < EMA(%d) and bull > 0 and bull < bull[1]", trendEMA),
		Missing: fmt.Sprintf("EMA(%d) undefined", trendEMA)})
	osc(VoteRule{Factor: "ultimate_oscillator_7_14_28", Indicator: "ultimate oscillator: 100·(4·avg(fast) + 2·avg(mid) + avg(slow))/7, avg(n) = Σ buying pressure / Σ true range over n bars",
		Params: []Param{{"fast", uoFast}, {"mid", uoMid}, {"slow", uoSlow}, {"buy", uoBuy}, {"sell", uoSell}},
		Buy:    "UO > " + g(uoBuy), Sell: "UO < " + g(uoSell), Missing: "UO undefined"})

	var patternParams []Param
	for _, p := range indicator.PatternParams() {
		patternParams = append(patternParams, Param{p.Name, p.Value})
	}
	for _, p := range indicator.Patterns {
		r := VoteRule{Factor: "pattern_" + string(p), Group: GroupPattern, Indicator: "candlestick pattern completed on the last candle: " + p.Definition(),
			Params: patternParams, Missing: "the pattern is not on the last candle (the factor is absent)"}
		switch p.Direction() {
		case 1:
			r.Buy, r.Sell = "always (a bullish pattern)", "never"
		case -1:
			r.Buy, r.Sell = "never", "always (a bearish pattern)"
		default:
			r.Buy, r.Sell = "never (indecision: neutral)", "never (indecision: neutral)"
		}
		out = append(out, r)
	}

	out = append(out, VoteRule{Factor: "volume_confirmation", Group: GroupVolume,
		Indicator: "last volume / mean volume of the average_bars candles before it",
		Params:    []Param{{"average_bars", volumeAvgBars}, {"spike_min", volumeSpikeMin}},
		Buy:       "ratio ≥ " + g(volumeSpikeMin) + " and close > close[1]", Sell: "ratio ≥ " + g(volumeSpikeMin) + " and close < close[1]",
		Missing: fmt.Sprintf("fewer than %d candles, or the mean volume is 0 (a feed without volume)", volumeAvgBars+1)})
	out = append(out, VoteRule{Factor: "obv_trend", Group: GroupVolume,
		Indicator: "on-balance volume against its SMA over average_bars",
		Params:    []Param{{"average_bars", obvAverageBars}},
		Buy:       "OBV > SMA(OBV)", Sell: "OBV < SMA(OBV)", Missing: "as volume_confirmation"})
	return out
}

func weightRules() WeightRules {
	return WeightRules{MAGroup: maGroupWeight, OscillatorGroup: oscGroupWeight, Pattern: patternWeight, Volume: volumeWeight,
		TechnicalShare: TechnicalShare, FundamentalShare: FundamentalShare,
		Score: "Each part's raw weights are scaled to sum to 1; a part's score is round(100 × Σ sign × weight), sign +1 bullish, −1 bearish, 0 neutral, " +
			"clamped to −100..100. Without a fundamental score, overall = technical; with one, overall = round(technical_share × technical + fundamental_share × fundamental) " +
			"and the factors' weights are scaled by their part's share (so every report's weights sum to 1). Rounding is half away from zero."}
}

func verdictRules() VerdictRules {
	return VerdictRules{GrowthEnter: GrowthEnter, DeclineEnter: DeclineEnter, GrowthHold: GrowthHold, DeclineHold: DeclineHold,
		Rule: fmt.Sprintf("growth when overall ≥ %d; decline when overall ≤ %d; otherwise a standing growth holds while overall > %d, "+
			"a standing decline while overall < %d; else neutral. The standing verdict is the asset's previous one in the same style.",
			GrowthEnter, DeclineEnter, GrowthHold, DeclineHold)}
}

func fundamentalRules() []FundamentalRule {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	c, s, f := string(domain.Crypto), string(domain.Stocks), string(domain.Forex)
	return []FundamentalRule{
		{Market: c, Factor: "funding_rate", Input: "latest funding rate of the perpetual future per 8 h, fraction", Weight: wFunding,
			Params:  []Param{{"high", fundingHigh}, {"low", fundingLow}},
			Bullish: "funding ≤ " + g(fundingLow) + " (shorts pay)", Bearish: "funding ≥ " + g(fundingHigh) + " (crowded longs)"},
		{Market: c, Factor: "open_interest_change", Input: fmt.Sprintf("open-interest change over 24 h, fraction; read with the close change over the last %d candles", trendChangeBars),
			Weight: wOpenInterest, Params: []Param{{"min_move", oiMove}, {"price_change_bars", trendChangeBars}},
			Bullish: "change ≥ " + g(oiMove) + " and the close rose", Bearish: "change ≥ " + g(oiMove) + " and the close fell"},
		{Market: c, Factor: "volume_to_market_cap", Input: "24 h traded volume / market capitalisation", Weight: wLiquidity,
			Params:  []Param{{"high", liquidityHigh}, {"low", liquidityLow}},
			Bullish: "ratio ≥ " + g(liquidityHigh), Bearish: "ratio < " + g(liquidityLow)},
		{Market: s, Factor: "valuation_pe", Input: "price / trailing earnings against the sector's median P/E (the market's when unknown)", Weight: wValuation,
			Params:  []Param{{"market_pe", MarketPE}, {"cheap", peCheap}, {"expensive", peExpensive}},
			Bullish: "0 < P/E < " + g(peCheap) + " × reference", Bearish: "P/E ≤ 0 (losses) or P/E ≥ " + g(peExpensive) + " × reference"},
		{Market: s, Factor: "revenue_growth", Input: "revenue change year on year, fraction", Weight: wGrowth,
			Params: []Param{{"strong", growthStrong}}, Bullish: "growth ≥ " + g(growthStrong), Bearish: "growth < 0"},
		{Market: s, Factor: "net_margin", Input: "net income / revenue, fraction", Weight: wMargin,
			Params: []Param{{"strong", marginStrong}}, Bullish: "margin ≥ " + g(marginStrong), Bearish: "margin < 0"},
		{Market: s, Factor: "debt_to_equity", Input: "total debt / shareholders' equity", Weight: wLeverage,
			Params:  []Param{{"low", leverageLow}, {"high", leverageHigh}},
			Bullish: "0 ≤ ratio < " + g(leverageLow), Bearish: "ratio ≥ " + g(leverageHigh) + " or negative (negative equity)"},
		{Market: f, Factor: "policy_rate_differential", Input: "policy rate of the base currency minus the quote's, percentage points", Weight: wRateDiff,
			Params: []Param{{"min", rateDiffMin}}, Bullish: "differential ≥ " + g(rateDiffMin), Bearish: "differential < −" + g(rateDiffMin)},
		{Market: f, Factor: "inflation_differential", Input: "inflation of the base currency minus the quote's, percentage points", Weight: wInflation,
			Params: []Param{{"min", inflationDiff}}, Bullish: "differential < −" + g(inflationDiff), Bearish: "differential ≥ " + g(inflationDiff)},
	}
}
