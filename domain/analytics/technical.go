package analytics

import (
	"math"
	"slices"
	"strconv"

	"github.com/marketscreener/market/domain/indicator"
)

// Raw weights of the technical factors before normalisation to 1. The two
// TradingView groups get equal halves of their combined weight, split
// evenly among the votes present, so with nothing else the score is
// exactly TradingView's (MA mean + oscillator mean)/2. Patterns and volume
// add to it: with no pattern on the last bar they hold about 13% of the
// technical score, each pattern adds ~6%.
const (
	maGroupWeight  = 0.4
	oscGroupWeight = 0.4
	patternWeight  = 0.06 // per pattern completed on the last bar
	volumeWeight   = 0.06 // per volume factor
)

// Volume confirmation thresholds.
const (
	volumeAvgBars   = 20  // bars in the average volume (before the last bar)
	volumeSpikeMin  = 1.5 // last volume ≥ 1.5× average confirms the bar's direction
	obvAverageBars  = 20  // OBV is compared with its SMA over these bars
	trendChangeBars = 10  // price change horizon for open-interest confirmation
)

var maPeriods = [...]int{10, 20, 30, 50, 100, 200}

// FactorNames lists every factor name Score can produce, in report order,
// for factor statistics and documentation.
var FactorNames = []string{
	"sma_10", "sma_20", "sma_30", "sma_50", "sma_100", "sma_200",
	"ema_10", "ema_20", "ema_30", "ema_50", "ema_100", "ema_200",
	"hma_9", "vwma_20", "ichimoku_9_26_52",
	"rsi_14", "stoch_14_3_3", "cci_20", "adx_14", "awesome_oscillator", "momentum_10", "macd_12_26_9",
	"stoch_rsi_14_14_3_3", "williams_r_14", "bull_bear_power_13", "ultimate_oscillator_7_14_28",
	"pattern_bullish_engulfing", "pattern_bearish_engulfing", "pattern_hammer", "pattern_shooting_star",
	"pattern_doji", "pattern_morning_star", "pattern_evening_star", "pattern_three_white_soldiers",
	"pattern_three_black_crows",
	"volume_confirmation", "obv_trend",
	"funding_rate", "open_interest_change", "volume_to_market_cap",
	"valuation_pe", "revenue_growth", "net_margin", "debt_to_equity",
	"policy_rate_differential", "inflation_differential",
}

// Tails of the series that bounded-window indicators are computed on (see
// indicator.Series.Tail): each covers the indicator's window plus the bars
// the vote looks back, with a margin. Recursive indicators use everything.
const (
	ichimokuTail = 52 + 26 + 4 // span B (52) as of 26 bars ago
	windowTail   = 40          // Stoch 14+3+3, W%R 14, CCI 20, AO 34, UO 28, HMA 9+3: all +2 bars back
)

// technical computes the technical factors (raw weights in Weight) of the
// last bar of s.
func technical(s indicator.Series) []Factor {
	out := make([]Factor, 0, 32)
	var emas [len(maPeriods)]float64 // EMA(close, p) of every MA period, in one pass
	indicator.EMALasts(s.Close, maPeriods[:], emas[:])
	ema50 := emas[slices.Index(maPeriods[:], trendEMA)]
	out = maFactors(s, &emas, out)
	out = oscillatorFactors(s, ema50, out)
	out = patternFactors(s, out)
	out = volumeFactors(s, out)
	return out
}

func maFactors(s indicator.Series, emas *[len(maPeriods)]float64, out []Factor) []Factor {
	c := s.Close
	close := indicator.Last(c, 0)
	closeS := fmtPrice(close)
	start := len(out)
	addMA := func(name, label string, ma float64) {
		v, ok := maVote(close, ma)
		if !ok {
			return
		}
		maS := fmtPrice(ma)
		out = append(out, Factor{Name: name, Value: maS, Sentiment: sentimentOf(v), Group: GroupMA,
			Text: msg(voteKey("ma", v), "ind", label, "ma", maS, "close", closeS)})
	}
	for _, p := range maPeriods {
		ps := strconv.Itoa(p)
		addMA("sma_"+ps, "SMA "+ps, lastSMA(c, p))
	}
	for i, p := range maPeriods {
		ps := strconv.Itoa(p)
		addMA("ema_"+ps, "EMA "+ps, emas[i])
	}
	w := s.Tail(windowTail)
	addMA("hma_9", "HMA 9", indicator.Last(indicator.HMA(w.Close, hmaLength), 0))
	addMA("vwma_20", "VWMA 20", indicator.Last(indicator.VWMA(w.Close, w.Volume, vwmaLength), 0))

	it := s.Tail(ichimokuTail)
	conv, base, a26, b26, spanB := indicator.IchimokuLast(it.High, it.Low, ichimokuConversion, ichimokuBase, ichimokuSpanB,
		ichimokuDisplacement)
	if v, ok := ichimokuVote(close, conv, base, a26, b26, spanB); ok {
		out = append(out, Factor{Name: "ichimoku_9_26_52", Value: fmtPrice(conv) + " / " + fmtPrice(base),
			Sentiment: sentimentOf(v), Group: GroupMA,
			Text: msg(voteKey("ichimoku", v), "conversion", fmtPrice(conv), "base", fmtPrice(base),
				"span_a", fmtPrice(a26), "span_b", fmtPrice(b26), "close", closeS)})
	}
	spread(out[start:], maGroupWeight)
	return out
}

func oscillatorFactors(s indicator.Series, ema50 float64, out []Factor) []Factor {
	c := s.Close
	w := s.Tail(windowTail)
	h, l, wc := w.High, w.Low, w.Close
	close := indicator.Last(c, 0)
	start := len(out)
	add := func(name string, v int, ok bool, value, key string, kv ...string) {
		if !ok {
			return
		}
		out = append(out, Factor{Name: name, Value: value, Sentiment: sentimentOf(v), Group: GroupOscillator,
			Text: msg(voteKey(key, v), kv...)})
	}
	f2 := func(v float64) string { return fmtNum(v, 2) }
	px := func(v float64) string { return fmtSigned(v, close) }

	rsiSeries := indicator.RSI(c, rsiLength)
	rsi, rsi1 := indicator.Last(rsiSeries, 0), indicator.Last(rsiSeries, 1)
	v, ok := rsiVote(rsi, rsi1)
	add("rsi_14", v, ok, f2(rsi), "rsi", "value", f2(rsi), "prev", f2(rsi1))

	k, d := indicator.Stoch(h, l, wc, stochLength, stochSmoothK, stochSmoothD)
	kl, dl := indicator.Last(k, 0), indicator.Last(d, 0)
	v, ok = stochVote(kl, dl, indicator.Last(d, 1))
	add("stoch_14_3_3", v, ok, f2(kl)+" / "+f2(dl), "stoch", "k", f2(kl), "d", f2(dl))

	cci := indicator.CCI(wc, cciLength)
	cl, cl1 := indicator.Last(cci, 0), indicator.Last(cci, 1)
	v, ok = cciVote(cl, cl1)
	add("cci_20", v, ok, f2(cl), "cci", "value", f2(cl), "prev", f2(cl1))

	pl, ml, al, al1 := indicator.DMILast(s.High, s.Low, c, adxDILength, adxSmoothing)
	v, ok = adxVote(al, al1, pl, ml)
	add("adx_14", v, ok, f2(al), "adx", "adx", f2(al), "plus", f2(pl), "minus", f2(ml))

	ao := indicator.AwesomeOscillator(h, l, aoFast, aoSlow)
	aol, aol1 := indicator.Last(ao, 0), indicator.Last(ao, 1)
	v, ok = aoVote(aol, aol1, indicator.Last(ao, 2))
	add("awesome_oscillator", v, ok, px(aol), "ao", "value", px(aol), "prev", px(aol1))

	mom, mom1 := indicator.Last(c, 0)-indicator.Last(c, momentumLength), indicator.Last(c, 1)-indicator.Last(c, momentumLength+1)
	v, ok = momVote(mom, mom1)
	add("momentum_10", v, ok, px(mom), "mom", "value", px(mom), "prev", px(mom1))

	ml0, sl0 := indicator.MACDLast(c, macdFast, macdSlow, macdSignal)
	v, ok = macdVote(ml0, sl0)
	add("macd_12_26_9", v, ok, px(ml0)+" / "+px(sl0), "macd", "macd", px(ml0), "signal", px(sl0))

	sk, sd := indicator.StochRSIFrom(rsiSeries[max(0, len(rsiSeries)-windowTail):], stochRSIStochLength, stochRSISmoothK, stochRSISmoothD)
	skl, sdl := indicator.Last(sk, 0), indicator.Last(sd, 0)
	v, ok = stochRSIVote(close, ema50, skl, sdl)
	add("stoch_rsi_14_14_3_3", v, ok, f2(skl)+" / "+f2(sdl), "stochrsi", "k", f2(skl), "d", f2(sdl), "ema", fmtPrice(ema50))

	wr := indicator.WilliamsR(h, l, wc, williamsLength)
	wl, wl1 := indicator.Last(wr, 0), indicator.Last(wr, 1)
	v, ok = williamsRVote(wl, wl1)
	add("williams_r_14", v, ok, f2(wl), "wr", "value", f2(wl), "prev", f2(wl1))

	bl, bl1, brl, brl1 := indicator.BullBearPowerLast(s.High, s.Low, c, bullBearLength)
	v, ok = bullBearVote(close, ema50, bl, bl1, brl, brl1)
	add("bull_bear_power_13", v, ok, px(bl)+" / "+px(brl), "bbp", "bull", px(bl), "bear", px(brl), "ema", fmtPrice(ema50))

	uo := indicator.Last(indicator.UltimateOscillator(h, l, wc, uoFast, uoMid, uoSlow), 0)
	v, ok = ultimateVote(uo)
	add("ultimate_oscillator_7_14_28", v, ok, f2(uo), "uo", "value", f2(uo))

	spread(out[start:], oscGroupWeight)
	return out
}

// patternFactors adds a factor per candlestick pattern completed on the
// last bar.
func patternFactors(s indicator.Series, out []Factor) []Factor {
	for _, p := range indicator.DetectPatterns(s, s.Len()-1) {
		out = append(out, Factor{Name: "pattern_" + string(p), Value: string(p), Sentiment: sentimentOf(p.Direction()),
			Group: GroupPattern, Weight: patternWeight, Text: msg("pattern." + string(p))})
	}
	return out
}

// volumeFactors adds the volume confirmation of the last bar and the OBV
// trend; both are left out when the feed has no volume (many forex feeds).
func volumeFactors(s indicator.Series, out []Factor) []Factor {
	n := s.Len()
	if n < volumeAvgBars+1 {
		return out
	}
	var avg float64
	for _, v := range s.Volume[n-1-volumeAvgBars : n-1] {
		avg += v
	}
	avg /= volumeAvgBars
	if avg <= 0 {
		return out
	}
	ratio := s.Volume[n-1] / avg
	dir := 0
	if ratio >= volumeSpikeMin {
		dir = int(math.Copysign(1, s.Close[n-1]-s.Close[n-2]))
		if s.Close[n-1] == s.Close[n-2] {
			dir = 0
		}
	}
	ratioS := fmtNum(ratio, 2)
	out = append(out, Factor{Name: "volume_confirmation", Value: ratioS, Sentiment: sentimentOf(dir),
		Group: GroupVolume, Weight: volumeWeight, Text: msg(voteKey("volume", dir), "ratio", ratioS)})

	obv := indicator.OBV(s.Close, s.Volume)
	obvAvg := lastSMA(obv, obvAverageBars)
	last := obv[n-1]
	dir = 0
	switch {
	case last > obvAvg:
		dir = 1
	case last < obvAvg:
		dir = -1
	}
	out = append(out, Factor{Name: "obv_trend", Value: fmtNum(last, 0), Sentiment: sentimentOf(dir),
		Group: GroupVolume, Weight: volumeWeight, Text: msg(voteKey("obv", dir))})
	return out
}

// spread gives each factor of a group an equal part of the group weight.
func spread(fs []Factor, total float64) {
	for i := range fs {
		fs[i].Weight = total / float64(len(fs))
	}
}

// voteKey is the catalogue key of a vote's explanation.
func voteKey(prefix string, v int) string {
	switch {
	case v > 0:
		return prefix + ".bull"
	case v < 0:
		return prefix + ".bear"
	}
	return prefix + ".neutral"
}

// lastSMA is the SMA of the last n values (NaN when x is shorter): the MA
// votes need only today's value, not the series.
func lastSMA(x []float64, n int) float64 {
	if len(x) < n {
		return math.NaN()
	}
	var sum float64
	for _, v := range x[len(x)-n:] {
		sum += v
	}
	return sum / float64(n)
}
