package analytics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/indicator"
)

var na = math.NaN()

type voteCase struct {
	name string
	got  func() (int, bool)
	want int
	ok   bool
}

func runVotes(t *testing.T, cases []voteCase) {
	t.Helper()
	for _, c := range cases {
		v, ok := c.got()
		if v != c.want || ok != c.ok {
			t.Errorf("%s: vote %d ok %v, want %d ok %v", c.name, v, ok, c.want, c.ok)
		}
	}
}

func TestMAVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"above", func() (int, bool) { return maVote(101, 100) }, 1, true},
		{"below", func() (int, bool) { return maVote(99, 100) }, -1, true},
		{"equal is neutral", func() (int, bool) { return maVote(100, 100) }, 0, true},
		{"ma undefined is missing", func() (int, bool) { return maVote(100, na) }, 0, false},
	})
}

func TestIchimokuVote(t *testing.T) {
	t.Parallel()
	// close > conversion > base > spanA[26] > spanB[26]
	runVotes(t, []voteCase{
		{"all aligned up", func() (int, bool) { return ichimokuVote(14, 13, 12, 11, 10, 9) }, 1, true},
		{"all aligned down", func() (int, bool) { return ichimokuVote(6, 7, 8, 9, 10, 9) }, -1, true},
		{"close on conversion", func() (int, bool) { return ichimokuVote(13, 13, 12, 11, 10, 9) }, 0, true},
		{"base on cloud top", func() (int, bool) { return ichimokuVote(14, 13, 11, 11, 10, 9) }, 0, true},
		{"flat cloud", func() (int, bool) { return ichimokuVote(14, 13, 12, 10, 10, 9) }, 0, true},
		{"conversion below base", func() (int, bool) { return ichimokuVote(14, 11.5, 12, 11, 10, 9) }, 0, true},
		// The cloud of 26 bars ago not available yet: conditions false, vote 0 (Pine guards only today's span B).
		{"old cloud missing", func() (int, bool) { return ichimokuVote(14, 13, 12, na, na, 9) }, 0, true},
		{"span B missing", func() (int, bool) { return ichimokuVote(14, 13, 12, 11, 10, na) }, 0, false},
	})
}

func TestRSIVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"oversold rising", func() (int, bool) { return rsiVote(29.9, 25) }, 1, true},
		{"30 is not oversold", func() (int, bool) { return rsiVote(30, 25) }, 0, true},
		{"oversold falling", func() (int, bool) { return rsiVote(25, 29) }, 0, true},
		{"oversold flat", func() (int, bool) { return rsiVote(25, 25) }, 0, true},
		{"overbought falling", func() (int, bool) { return rsiVote(70.1, 75) }, -1, true},
		{"70 is not overbought", func() (int, bool) { return rsiVote(70, 75) }, 0, true},
		{"overbought rising", func() (int, bool) { return rsiVote(75, 71) }, 0, true},
		{"previous missing", func() (int, bool) { return rsiVote(25, na) }, 0, false},
	})
}

func TestStochVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"oversold K over D", func() (int, bool) { return stochVote(15, 12, 10) }, 1, true},
		{"K at 20", func() (int, bool) { return stochVote(20, 12, 10) }, 0, true},
		{"K equals D", func() (int, bool) { return stochVote(12, 12, 10) }, 0, true},
		{"overbought K under D", func() (int, bool) { return stochVote(85, 88, 90) }, -1, true},
		{"D at 80", func() (int, bool) { return stochVote(79, 80, 90) }, 0, true},
		{"K undefined (flat range)", func() (int, bool) { return stochVote(na, 12, 10) }, 0, true},
		{"D[1] missing", func() (int, bool) { return stochVote(15, 12, na) }, 0, false},
	})
}

func TestCCIVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"below -100 rising", func() (int, bool) { return cciVote(-101, -150) }, 1, true},
		{"at -100", func() (int, bool) { return cciVote(-100, -150) }, 0, true},
		{"below -100 falling", func() (int, bool) { return cciVote(-150, -101) }, 0, true},
		{"above 100 falling", func() (int, bool) { return cciVote(101, 150) }, -1, true},
		{"at 100", func() (int, bool) { return cciVote(100, 150) }, 0, true},
		{"previous missing", func() (int, bool) { return cciVote(-150, na) }, 0, false},
	})
}

func TestADXVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"strong rising up", func() (int, bool) { return adxVote(25, 24, 30, 10) }, 1, true},
		{"strong rising down", func() (int, bool) { return adxVote(25, 24, 10, 30) }, -1, true},
		{"ADX exactly 20", func() (int, bool) { return adxVote(20, 19, 30, 10) }, 0, true},
		{"ADX falling", func() (int, bool) { return adxVote(25, 26, 30, 10) }, 0, true},
		{"ADX flat", func() (int, bool) { return adxVote(25, 25, 30, 10) }, 0, true},
		{"DIs equal", func() (int, bool) { return adxVote(25, 24, 20, 20) }, 0, true},
		{"ADX[1] missing", func() (int, bool) { return adxVote(25, na, 30, 10) }, 0, true},
		{"ADX missing", func() (int, bool) { return adxVote(na, 24, 30, 10) }, 0, false},
	})
}

func TestAOVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"cross up", func() (int, bool) { return aoVote(0.5, -0.1, -1) }, 1, true},
		// TradingView's crossover counts a previous value of exactly 0.
		{"cross up from exactly 0", func() (int, bool) { return aoVote(0.5, 0, -1) }, 1, true},
		{"saucer above zero", func() (int, bool) { return aoVote(2, 1, 1.5) }, 1, true},
		{"rising above zero without dip", func() (int, bool) { return aoVote(2, 1.5, 1) }, 0, true},
		{"saucer with equal dip", func() (int, bool) { return aoVote(2, 1, 1) }, 0, true},
		{"cross down", func() (int, bool) { return aoVote(-0.5, 0.1, 1) }, -1, true},
		{"cross down from exactly 0", func() (int, bool) { return aoVote(-0.5, 0, 1) }, -1, true},
		{"saucer below zero", func() (int, bool) { return aoVote(-2, -1, -1.5) }, -1, true},
		{"zero now", func() (int, bool) { return aoVote(0, -1, -2) }, 0, true},
		{"ao[2] missing", func() (int, bool) { return aoVote(2, 1, na) }, 0, true},
		{"ao[1] missing", func() (int, bool) { return aoVote(2, na, 1) }, 0, false},
	})
}

func TestMomentumVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"rising", func() (int, bool) { return momVote(-1, -2) }, 1, true},
		{"falling", func() (int, bool) { return momVote(3, 4) }, -1, true},
		{"flat", func() (int, bool) { return momVote(3, 3) }, 0, true},
		{"missing", func() (int, bool) { return momVote(3, na) }, 0, false},
	})
}

func TestMACDVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"above signal", func() (int, bool) { return macdVote(-1, -1.5) }, 1, true},
		{"below signal", func() (int, bool) { return macdVote(1, 1.5) }, -1, true},
		{"on signal", func() (int, bool) { return macdVote(1, 1) }, 0, true},
		{"signal missing", func() (int, bool) { return macdVote(1, na) }, 0, false},
	})
}

func TestStochRSIVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"downtrend oversold cross", func() (int, bool) { return stochRSIVote(90, 100, 15, 10) }, 1, true},
		{"uptrend oversold cross counts nothing", func() (int, bool) { return stochRSIVote(110, 100, 15, 10) }, 0, true},
		{"uptrend overbought cross", func() (int, bool) { return stochRSIVote(110, 100, 85, 90) }, -1, true},
		{"downtrend overbought counts nothing", func() (int, bool) { return stochRSIVote(90, 100, 85, 90) }, 0, true},
		{"close on EMA", func() (int, bool) { return stochRSIVote(100, 100, 15, 10) }, 0, true},
		{"K at 20", func() (int, bool) { return stochRSIVote(90, 100, 20, 10) }, 0, true},
		{"Stoch RSI undefined", func() (int, bool) { return stochRSIVote(90, 100, na, na) }, 0, true},
		{"EMA missing", func() (int, bool) { return stochRSIVote(90, na, 15, 10) }, 0, false},
		{"K equals D at 0 is neutral", func() (int, bool) { return stochRSIVote(90, 100, 0, 0) }, 0, true},
		{"K equals D at 100 is neutral", func() (int, bool) { return stochRSIVote(110, 100, 100, 100) }, 0, true},
	})
}

// TestStochRSIPinnedLinesAreEqual: over random walks of 80–500 bars, when
// the raw stochastic of RSI is pinned at 0 (or 100) on the last five bars,
// %K and %D are both exactly 0 (100) and the vote is neutral. Sum sums each
// window afresh for this: with running sums about 0.5 % of all series end
// with such lines differing by ~1e-14 and a bullish or bearish vote.
func TestStochRSIPinnedLinesAreEqual(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 1))
	pinned := 0
	for range 3000 {
		n := 80 + r.IntN(421)
		closes := make([]float64, n)
		closes[0] = 100
		for i := 1; i < n; i++ {
			closes[i] = closes[i-1] * math.Exp(0.02*r.NormFloat64())
		}
		rsi := indicator.RSI(closes, 14)
		tail := rsi[max(0, n-windowTail):]
		raw := indicator.StochK(tail, tail, tail, 14)
		level := raw[len(raw)-1]
		if (level != 0 && level != 100) || slices.ContainsFunc(raw[len(raw)-5:], func(v float64) bool { return v != level }) {
			continue
		}
		pinned++
		k, d := indicator.StochRSIFrom(tail, 14, 3, 3)
		kl, dl := indicator.Last(k, 0), indicator.Last(d, 0)
		if kl != level || dl != level {
			t.Fatalf("%d bars, raw stochastic pinned at %v: %%K = %v, %%D = %v", n, level, kl, dl)
		}
		if v, _ := stochRSIVote(closes[n-1], indicator.EMALast(closes, 50), kl, dl); v != 0 {
			t.Fatalf("%d bars: %%K = %%D = %v votes %d", n, kl, v)
		}
	}
	if pinned < 20 {
		t.Fatalf("only %d series end pinned: the test tests nothing", pinned)
	}
}

// TestStochRSIExactEqualityOnTheFloatingPointPath runs the scorer's own path
// (RSI → 40-bar tail → Stoch RSI → vote) on a series whose %K and %D are
// both exactly 0: a swing, then a steady 1 % decline, so every RSI of the
// last bars is the lowest of its 14 and the raw stochastic is 0. The vote
// must be neutral, as TradingView's K > D gives. With the former running
// sum the three zeros summed to ±1e-14 (the residue of the swing's values),
// K came out as 3.03e-15 and D as −1.48e-14, and the vote was bullish.
func TestStochRSIExactEqualityOnTheFloatingPointPath(t *testing.T) {
	t.Parallel()
	closes := make([]float64, 0, 96)
	p := 100.0
	for i := range 90 {
		p *= 1 + 0.03*math.Sin(float64(2*i)*0.7)
		closes = append(closes, p)
	}
	for range 6 {
		p *= 0.99
		closes = append(closes, p)
	}
	rsi := indicator.RSI(closes, 14)
	k, d := indicator.StochRSIFrom(rsi[len(rsi)-windowTail:], 14, 3, 3)
	kl, dl := indicator.Last(k, 0), indicator.Last(d, 0)
	if kl != 0 || dl != 0 {
		t.Fatalf("%%K = %v, %%D = %v; want both exactly 0", kl, dl)
	}
	ema50 := indicator.EMALast(closes, 50)
	if !(closes[len(closes)-1] < ema50) {
		t.Fatalf("close %v not below EMA50 %v: the case does not test the buy rule", closes[len(closes)-1], ema50)
	}
	if v, ok := stochRSIVote(closes[len(closes)-1], ema50, kl, dl); v != 0 || !ok {
		t.Errorf("vote %d ok %v with %%K == %%D, want neutral", v, ok)
	}

	// The same through Score, as a report shows it.
	cs := make([]domain.Candle, len(closes))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range closes {
		cs[i] = domain.Candle{Time: t0.Add(time.Duration(i) * time.Hour), Open: c, High: c, Low: c, Close: c, Volume: 1}
	}
	res, err := Score(Input{Market: domain.Crypto, Symbol: "BTC_USDT", Candles: cs})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Factors {
		if f.Name == "stoch_rsi_14_14_3_3" {
			if f.Sentiment != Neutral {
				t.Errorf("stoch_rsi_14_14_3_3 = %s (%s), want neutral", f.Sentiment, f.Value)
			}
			return
		}
	}
	t.Error("no stoch_rsi_14_14_3_3 factor")
}

func TestWilliamsRVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"below -80 rising", func() (int, bool) { return williamsRVote(-85, -90) }, 1, true},
		{"at -80", func() (int, bool) { return williamsRVote(-80, -90) }, 0, true},
		{"above -20 falling", func() (int, bool) { return williamsRVote(-15, -10) }, -1, true},
		{"at -20", func() (int, bool) { return williamsRVote(-20, -10) }, 0, true},
		{"previous missing", func() (int, bool) { return williamsRVote(-85, na) }, 0, false},
	})
}

func TestBullBearVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"uptrend bear power rising below 0", func() (int, bool) { return bullBearVote(110, 100, 5, 6, -1, -2) }, 1, true},
		{"uptrend bear power at 0", func() (int, bool) { return bullBearVote(110, 100, 5, 6, 0, -2) }, 0, true},
		{"uptrend bear power falling", func() (int, bool) { return bullBearVote(110, 100, 5, 6, -2, -1) }, 0, true},
		{"downtrend bull power falling above 0", func() (int, bool) { return bullBearVote(90, 100, 1, 2, -5, -6) }, -1, true},
		{"downtrend bull power at 0", func() (int, bool) { return bullBearVote(90, 100, 0, 2, -5, -6) }, 0, true},
		{"EMA missing", func() (int, bool) { return bullBearVote(90, na, 1, 2, -5, -6) }, 0, false},
	})
}

func TestUltimateVote(t *testing.T) {
	t.Parallel()
	runVotes(t, []voteCase{
		{"above 70", func() (int, bool) { return ultimateVote(70.01) }, 1, true},
		{"at 70", func() (int, bool) { return ultimateVote(70) }, 0, true},
		{"below 30", func() (int, bool) { return ultimateVote(29.99) }, -1, true},
		{"at 30", func() (int, bool) { return ultimateVote(30) }, 0, true},
		{"undefined", func() (int, bool) { return ultimateVote(na) }, 0, false},
	})
}
