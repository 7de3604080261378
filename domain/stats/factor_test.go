package stats

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestFactorAccumulatorResults(t *testing.T) {
	t.Parallel()
	var a FactorAccumulator
	add := func(day int, factor string, h, sign int, contribution, ret float64) {
		t.Helper()
		if err := a.Add(day, factor, h, sign, contribution, ret); err != nil {
			t.Fatal(err)
		}
		if err := a.AddMove(day, h, ret); err != nil {
			t.Fatal(err)
		}
	}
	add(0, "RSI14", 1, 1, 0.2, 1)    // hit
	add(1, "RSI14", 1, -1, -0.1, -2) // hit
	add(2, "RSI14", 1, 1, 0.3, 0)    // zero return misses
	add(3, "RSI14", 1, 0, 0, 5)      // neutral: not counted
	add(3, "MACD", 5, 0, 0, 1)       // only ever neutral: listed, n 0

	got := a.Results(SourceLive)
	wantOrder := []struct {
		factor string
		h      int
	}{{"MACD", 1}, {"MACD", 5}, {"MACD", 21}, {"RSI14", 1}, {"RSI14", 5}, {"RSI14", 21}}
	if len(got) != len(wantOrder) {
		t.Fatalf("got %d records, want %d", len(got), len(wantOrder))
	}
	for i, w := range wantOrder {
		if got[i].Factor != w.factor || got[i].HorizonDays != w.h || got[i].Source != SourceLive {
			t.Errorf("record %d is %s/%d/%s, want %s/%d/live", i, got[i].Factor, got[i].HorizonDays, got[i].Source, w.factor, w.h)
		}
	}

	rsi1 := got[3]
	if rsi1.SampleSize != 3 || rsi1.IsSignificant {
		t.Errorf("RSI14/1 sample %d significant %v, want 3 false", rsi1.SampleSize, rsi1.IsSignificant)
	}
	approx(t, "hit rate", rsi1.HitRate, 2.0/3, 1e-12)
	approx(t, "correlation", rsi1.Correlation, Pearson([]float64{0.2, -0.1, 0.3}, []float64{1, -2, 0}), 1e-12)
	// Blocks of 2 days: {0, 1} hit twice of 2, {2} missed its 1. Residuals
	// 2 − 2·2/3 = 2/3 and 0 − 2/3; variance 2/(2−1)·(8/9)/3² = 16/81;
	// n_eff = (2/3·1/3)/(16/81) = 1.125, with t of 1 degree of freedom.
	if rsi1.EffectiveSampleSize != 1 {
		t.Errorf("effective sample size %d, want 1 (1.125)", rsi1.EffectiveSampleSize)
	}
	low, high := wilsonInterval(2.0/3, 1.125, tCritical95(1))
	approx(t, "ci low", rsi1.HitRateCILow, low, 1e-12)
	approx(t, "ci high", rsi1.HitRateCIHigh, high, 1e-12)
	// Moves at 1 day: +1, −2, 0, +5 → up 2/4, down 1/4; two bullish and one
	// bearish reading hit (2·1/2 + 1/4)/3 of the time with no edge.
	if rsi1.BaseRate == nil || rsi1.PValue == nil || rsi1.PValueAdjusted == nil {
		t.Fatalf("RSI14/1 = %+v, want a base rate and p-values", rsi1)
	}
	approx(t, "base rate", *rsi1.BaseRate, 1.25/3, 1e-12)
	// One record tested: adjusting changes nothing.
	approx(t, "adjusted p", *rsi1.PValueAdjusted, *rsi1.PValue, 0)

	macd5 := got[1]
	if macd5.SampleSize != 0 || macd5.EffectiveSampleSize != 0 || macd5.HitRate != 0 || macd5.HitRateCILow != 0 ||
		macd5.HitRateCIHigh != 1 || macd5.Correlation != 0 || macd5.BaseRate != nil || macd5.PValue != nil || macd5.PValueAdjusted != nil {
		t.Errorf("neutral-only MACD/5 = %+v, want n 0, rate 0, 0..1, r 0, nothing tested", macd5)
	}
}

// TestFactorSignificanceIsAdjusted: of two factors with the same raw
// p-value just under 0.05, Benjamini–Hochberg over the family keeps one
// significant only if the rest of the family backs it.
func TestFactorSignificanceIsAdjusted(t *testing.T) {
	t.Parallel()
	out := []FactorStat{{PValue: ptr(0.04)}, {PValue: ptr(0.9)}, {}, {PValue: ptr(0.001)}}
	adjustFactorSignificance(out, []int{100, 100, 100, 29})
	want := []*float64{ptr(0.06), ptr(0.9), nil, ptr(0.003)}
	for i, w := range want {
		if (w == nil) != (out[i].PValueAdjusted == nil) || (w != nil && math.Abs(*w-*out[i].PValueAdjusted) > 1e-12) {
			t.Errorf("record %d adjusted to %v, want %v", i, out[i].PValueAdjusted, w)
		}
		if out[i].IsSignificant {
			// 0.04 → 0.06 is not significant; 0.003 lacks effective size.
			t.Errorf("record %d is significant", i)
		}
	}
}

func TestFactorAccumulatorRejects(t *testing.T) {
	t.Parallel()
	var a FactorAccumulator
	for name, err := range map[string]error{
		"empty name":        a.Add(0, "", 1, 1, 1, 1),
		"zero horizon":      a.Add(0, "RSI14", 0, 1, 1, 1),
		"NaN return":        a.Add(0, "RSI14", 1, 1, 1, nan()),
		"inf contribution":  a.Add(0, "RSI14", 1, 1, inf(), 1),
		"move zero horizon": a.AddMove(0, 0, 1),
		"move NaN return":   a.AddMove(0, 1, nan()),
	} {
		if domain.ErrorCode(err) != domain.EINVALID {
			t.Errorf("%s: err = %v, want EINVALID", name, err)
		}
	}
	if got := a.Results(SourceBacktest); len(got) != 0 {
		t.Errorf("rejected observations were recorded: %+v", got)
	}
}

func TestFactorAccumulatorMerge(t *testing.T) {
	t.Parallel()
	var one, p1, p2 FactorAccumulator
	for i := range 100 {
		factor := []string{"ADX14", "CCI20"}[i%2]
		sign := i%3 - 1
		contribution := float64(sign) * float64(i%7) / 7
		ret := float64(i%11) - 5
		part := &p1
		if i >= 50 {
			part = &p2
		}
		for _, acc := range []*FactorAccumulator{&one, part} {
			if err := acc.Add(i/3, factor, FactorHorizons[i%3], sign, contribution, ret); err != nil {
				t.Fatal(err)
			}
			if err := acc.AddMove(i/3, FactorHorizons[i%3], ret); err != nil {
				t.Fatal(err)
			}
		}
	}
	var merged FactorAccumulator
	merged.Merge(&p1)
	merged.Merge(&p2)
	merged.Merge(nil)
	want, got := one.Results(SourceBacktest), merged.Results(SourceBacktest)
	if len(got) != len(want) {
		t.Fatalf("merged %d records, one pass %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Factor != g.Factor || w.SampleSize != g.SampleSize || w.HitRate != g.HitRate ||
			w.EffectiveSampleSize != g.EffectiveSampleSize || w.HitRateCILow != g.HitRateCILow ||
			!sameFloat(w.BaseRate, g.BaseRate) || !sameFloat(w.PValueAdjusted, g.PValueAdjusted) {
			t.Errorf("record %d: merged %+v, one pass %+v", i, g, w)
		}
		approx(t, "correlation", g.Correlation, w.Correlation, 1e-9)
	}
}

func TestFactorStatJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(FactorStat{Factor: "RSI14", HorizonDays: 5, Source: SourceBacktest, HitRateCIHigh: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The contract's fields are plain numbers; only the additions are
	// null when nothing was tested.
	want := `{"factor":"RSI14","horizon_days":5,"sample_size":0,"effective_sample_size":0,"is_significant":false,"hit_rate":0,"hit_rate_ci_low":0,"hit_rate_ci_high":1,"correlation":0,"base_rate":null,"p_value":null,"p_value_adjusted":null,"source":"backtest"}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
}
