package analytics

import "math"

// Settings and thresholds of the Technical Rating votes: the vote
// functions and technical read them, and Methodology describes them, so
// the published method is always the one that runs.
const (
	hmaLength  = 9
	vwmaLength = 20

	ichimokuConversion, ichimokuBase, ichimokuSpanB, ichimokuDisplacement = 9, 26, 52, 26

	rsiLength, rsiOversold, rsiOverbought = 14, 30, 70

	stochLength, stochSmoothK, stochSmoothD = 14, 3, 3
	stochOversold, stochOverbought          = 20, 80

	cciLength, cciOversold, cciOverbought = 20, -100, 100

	adxDILength, adxSmoothing, adxTrend = 14, 14, 20

	aoFast, aoSlow = 5, 34

	momentumLength = 10

	macdFast, macdSlow, macdSignal = 12, 26, 9

	stochRSILength, stochRSIStochLength, stochRSISmoothK, stochRSISmoothD = 14, 14, 3, 3
	stochRSIOversold, stochRSIOverbought                                  = 20, 80

	// trendEMA is the EMA that Stoch RSI and Bull Bear Power read the trend from.
	trendEMA = 50

	williamsLength, williamsOversold, williamsOverbought = 14, -80, -20

	bullBearLength = 13

	uoFast, uoMid, uoSlow, uoBuy, uoSell = 7, 14, 28, 70, 30
)

// The vote rules of TradingView's Technical Rating library v3 (2024-11-29),
// one function per indicator. Arguments are the indicator's values on the
// last bar (x) and the bars before it (x1 = x[1], x2 = x[2]); NaN stands
// for Pine's `na`, and like `na` it makes every comparison false. ok is
// false when Pine's calcRating would return `na` (the vote is missing and
// left out of its group mean); a vote is +1 buy, −1 sell, 0 neutral.

// maVote: math.sign(close − ma): +1 when the close is above the moving
// average, −1 below, 0 on it; missing while the average is undefined.
func maVote(close, ma float64) (vote int, ok bool) {
	if math.IsNaN(ma) || math.IsNaN(close) {
		return 0, false
	}
	switch {
	case close > ma:
		return 1, true
	case close < ma:
		return -1, true
	}
	return 0, true
}

// ichimokuVote compares the cloud computed 26 bars ago (spanA26, spanB26:
// the cloud drawn under today's bar) with today's lines:
// buy:  spanA[26] > spanB[26] and base > spanA[26] and conversion > base and close > conversion;
// sell: spanA[26] < spanB[26] and base < spanA[26] and conversion < base and close < conversion.
// Missing only while today's span B is undefined (Pine guards `lead2`).
func ichimokuVote(close, conversion, base, spanA26, spanB26, spanB float64) (int, bool) {
	return rating(spanB,
		spanA26 > spanB26 && base > spanA26 && conversion > base && close > conversion,
		spanA26 < spanB26 && base < spanA26 && conversion < base && close < conversion)
}

// rsiVote: buy when RSI(14) < 30 and rising (rsi[1] < rsi), sell when
// > 70 and falling; guarded by rsi[1].
func rsiVote(rsi, rsi1 float64) (int, bool) {
	return rating(rsi1, rsi < rsiOversold && rsi1 < rsi, rsi > rsiOverbought && rsi1 > rsi)
}

// stochVote (Stochastic 14/3/3): buy when %K < 20, %D < 20 and %K > %D;
// sell when %K > 80, %D > 80 and %K < %D; guarded by %D[1].
func stochVote(k, d, d1 float64) (int, bool) {
	return rating(d1, k < stochOversold && d < stochOversold && k > d, k > stochOverbought && d > stochOverbought && k < d)
}

// cciVote (cci(close, 20)): buy when CCI < −100 and rising, sell when
// > 100 and falling; guarded by cci[1].
func cciVote(cci, cci1 float64) (int, bool) {
	return rating(cci1, cci < cciOversold && cci > cci1, cci > cciOverbought && cci < cci1)
}

// adxVote (DMI 14/14): buy when ADX > 20 and rising and +DI > −DI; sell
// when ADX > 20 and rising and +DI < −DI; guarded by ADX.
func adxVote(adx, adx1, plus, minus float64) (int, bool) {
	return rating(adx, adx > adxTrend && adx > adx1 && plus > minus, adx > adxTrend && adx > adx1 && plus < minus)
}

// aoVote (Awesome Oscillator): buy on a cross above zero (ao > 0 and
// ao[1] <= 0, so a previous value of exactly 0 counts) or a bullish saucer
// (ao > 0, ao[1] > 0, ao > ao[1], ao[2] > ao[1]); sell on the mirror;
// guarded by ao[1].
func aoVote(ao, ao1, ao2 float64) (int, bool) {
	return rating(ao1,
		(ao > 0 && ao1 <= 0) || (ao > 0 && ao1 > 0 && ao > ao1 && ao2 > ao1),
		(ao < 0 && ao1 >= 0) || (ao < 0 && ao1 < 0 && ao < ao1 && ao2 < ao1))
}

// momVote (Momentum 10): buy when momentum rises, sell when it falls;
// guarded by mom[1].
func momVote(mom, mom1 float64) (int, bool) {
	return rating(mom1, mom > mom1, mom < mom1)
}

// macdVote (MACD 12/26/9): buy when the MACD line is above its signal,
// sell when below; guarded by the signal.
func macdVote(macd, signal float64) (int, bool) {
	return rating(signal, macd > signal, macd < signal)
}

// stochRSIVote (Stoch RSI 14/14/3/3) only counts against the trend given
// by EMA(close, 50): buy in a downtrend (close < EMA50) when %K < 20,
// %D < 20 and %K > %D; sell in an uptrend (close > EMA50) when %K > 80,
// %D > 80 and %K < %D; guarded by the EMA.
func stochRSIVote(close, ema50, k, d float64) (int, bool) {
	return rating(ema50,
		close < ema50 && k < stochRSIOversold && d < stochRSIOversold && k > d,
		close > ema50 && k > stochRSIOverbought && d > stochRSIOverbought && k < d)
}

// williamsRVote (Williams %R 14): buy when %R < −80 and rising, sell when
// > −20 and falling; guarded by %R[1].
func williamsRVote(wr, wr1 float64) (int, bool) {
	return rating(wr1, wr < williamsOversold && wr > wr1, wr > williamsOverbought && wr < wr1)
}

// bullBearVote (Elder's power, EMA 13): buy in an uptrend (close > EMA50)
// when bear power is negative and rising; sell in a downtrend (close <
// EMA50) when bull power is positive and falling; guarded by the EMA50.
func bullBearVote(close, ema50, bull, bull1, bear, bear1 float64) (int, bool) {
	return rating(ema50,
		close > ema50 && bear < 0 && bear > bear1,
		close < ema50 && bull > 0 && bull < bull1)
}

// ultimateVote (Ultimate Oscillator 7/14/28): buy above 70, sell below 30;
// guarded by UO.
func ultimateVote(uo float64) (int, bool) {
	return rating(uo, uo > uoBuy, uo < uoSell)
}

// rating is Pine's calcRating(src, bull, bear): missing when src is na,
// else +1, −1 or 0 (bull wins a tie, as in Pine).
func rating(guard float64, bull, bear bool) (int, bool) {
	switch {
	case math.IsNaN(guard):
		return 0, false
	case bull:
		return 1, true
	case bear:
		return -1, true
	}
	return 0, true
}
