package stats

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestFactorAccumulatorResults(t *testing.T) {
	t.Parallel()
	var a FactorAccumulator
	add := func(factor string, h, sign int, contribution, ret float64) {
		t.Helper()
		if err := a.Add(factor, h, sign, contribution, ret); err != nil {
			t.Fatal(err)
		}
	}
	add("RSI14", 1, 1, 0.2, 1)    // hit
	add("RSI14", 1, -1, -0.1, -2) // hit
	add("RSI14", 1, 1, 0.3, 0)    // zero return misses
	add("RSI14", 1, 0, 0, 5)      // neutral: not counted
	add("MACD", 5, 0, 0, 1)       // only ever neutral: listed, n 0

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
	low, high := Wilson(2, 3)
	approx(t, "ci low", rsi1.HitRateCILow, low, 0)
	approx(t, "ci high", rsi1.HitRateCIHigh, high, 0)

	macd5 := got[1]
	if macd5.SampleSize != 0 || macd5.HitRate != 0 || macd5.HitRateCILow != 0 || macd5.HitRateCIHigh != 1 || macd5.Correlation != 0 {
		t.Errorf("neutral-only MACD/5 = %+v, want n 0, rate 0, 0..1, r 0", macd5)
	}
}

func TestFactorAccumulatorRejects(t *testing.T) {
	t.Parallel()
	var a FactorAccumulator
	for name, err := range map[string]error{
		"empty name":       a.Add("", 1, 1, 1, 1),
		"zero horizon":     a.Add("RSI14", 0, 1, 1, 1),
		"NaN return":       a.Add("RSI14", 1, 1, 1, nan()),
		"inf contribution": a.Add("RSI14", 1, 1, inf(), 1),
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
			if err := acc.Add(factor, FactorHorizons[i%3], sign, contribution, ret); err != nil {
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
		if w.Factor != g.Factor || w.SampleSize != g.SampleSize || w.HitRate != g.HitRate {
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
	want := `{"factor":"RSI14","horizon_days":5,"sample_size":0,"is_significant":false,"hit_rate":0,"hit_rate_ci_low":0,"hit_rate_ci_high":1,"correlation":0,"source":"backtest"}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	if strings.Contains(string(b), "null") {
		t.Error("factor record has a null")
	}
}
