package stats

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestVerdictAccumulatorResults(t *testing.T) {
	t.Parallel()
	var a VerdictAccumulator
	// Horizon 5 (blocks of 10 days), median move 2: growth wins twice of
	// three, one neutral bar loses at the boundary, one bar had no verdict.
	mustAdd(t, &a, 0, VerdictGrowth, 5, 3, 2)
	mustAdd(t, &a, 0, VerdictGrowth, 5, 1, 2)
	mustAdd(t, &a, 10, VerdictGrowth, 5, 0, 2) // flat loses
	mustAdd(t, &a, 10, VerdictNeutral, 5, -2, 2)
	if err := a.AddBase(11, 5, -1, 2); err != nil {
		t.Fatal(err)
	}

	got := a.Results(SourceBacktest)
	if len(got) != len(Verdicts)*len(VerdictHorizons) {
		t.Fatalf("got %d records, want %d", len(got), len(Verdicts)*len(VerdictHorizons))
	}
	for i, s := range got {
		wantV, wantH := Verdicts[i/len(VerdictHorizons)], VerdictHorizons[i%len(VerdictHorizons)]
		if s.Verdict != wantV || s.HorizonDays != wantH || s.Source != SourceBacktest {
			t.Errorf("record %d is %s/%d/%s, want %s/%d/backtest", i, s.Verdict, s.HorizonDays, s.Source, wantV, wantH)
		}
	}

	growth5 := find(t, got, VerdictGrowth, 5)
	if growth5.SampleSize != 3 || growth5.IsSignificant {
		t.Errorf("growth/5 sample %d significant %v, want 3 false", growth5.SampleSize, growth5.IsSignificant)
	}
	approx(t, "growth/5 win rate", *growth5.WinRate, 2.0/3, 1e-12)
	approx(t, "growth/5 avg return", growth5.AvgReturnPct, 4.0/3, 1e-12)
	// Five bars at horizon 5 with returns 3, 1, 0, -2, -1 and median 2.
	approx(t, "growth/5 base rate", *growth5.BaseRate, 2.0/5, 1e-12)
	approx(t, "decline/5 base rate", *find(t, got, VerdictDecline, 5).BaseRate, 2.0/5, 1e-12)
	approx(t, "neutral/5 base rate", *find(t, got, VerdictNeutral, 5).BaseRate, 3.0/5, 1e-12)
	// Days 0, 10 and 11 are trading days 0, 1 and 2: all in the first block
	// of 10, so nothing measures the dependence and the block counts once.
	low, high := wilsonInterval(2.0/3, 1, tCritical95(0))
	if growth5.EffectiveSampleSize != 1 || growth5.WinRateCILow != low || growth5.WinRateCIHigh != high || low != 0 || high != 1 {
		t.Errorf("growth/5 n_eff %d interval %v..%v, want 1 and 0..1", growth5.EffectiveSampleSize, growth5.WinRateCILow, growth5.WinRateCIHigh)
	}
	if growth5.PValue == nil || *growth5.PValue != 1 {
		t.Errorf("growth/5 p-value %v, want 1 (no variance estimate)", growth5.PValue)
	}

	neutral5 := find(t, got, VerdictNeutral, 5)
	approx(t, "neutral/5 win rate", *neutral5.WinRate, 0, 0)

	decline5 := find(t, got, VerdictDecline, 5)
	if decline5.SampleSize != 0 || decline5.EffectiveSampleSize != 0 || decline5.WinRate != nil || decline5.AvgReturnPct != 0 ||
		decline5.WinRateCILow != 0 || decline5.WinRateCIHigh != 1 || decline5.PValue != nil {
		t.Errorf("empty decline/5 = %+v, want n 0, null win rate, 0 avg, 0..1, no p-value", decline5)
	}
	if g1 := find(t, got, VerdictGrowth, 1); g1.BaseRate != nil || g1.PValue != nil {
		t.Errorf("growth/1 base rate %v p-value %v with no bars, want nil", g1.BaseRate, g1.PValue)
	}
}

// TestVerdictAccumulatorSignificance: 200 days at 1 day, decline winning 4
// days of 5 where bars fall on about half of the days (base rate 0.50), is
// significant; growth winning half of the time against a base rate of 0.44
// is not; and 30 wins of one day are 30 observations but not 30
// independent ones.
func TestVerdictAccumulatorSignificance(t *testing.T) {
	t.Parallel()
	var a VerdictAccumulator
	for day := range 200 {
		down := -1.0
		if day%5 == 4 {
			down = 1
		}
		mustAdd(t, &a, day, VerdictDecline, 1, down, 0.5)
		up := 1.0
		if day%2 == 0 {
			up = -1
		}
		mustAdd(t, &a, day, VerdictGrowth, 1, up, 0.5)
		for range 3 { // bars without a verdict: the base rate
			if err := a.AddBase(day, 1, float64(day%2)*2-1, 0.5); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := a.Results(SourceLive)
	decline := find(t, got, VerdictDecline, 1)
	if !decline.IsSignificant || decline.EffectiveSampleSize < SignificantSampleSize || decline.EffectiveSampleSize > 200 ||
		decline.PValue == nil || *decline.PValue >= 0.05 || decline.WinRateCILow <= *decline.BaseRate {
		t.Errorf("decline/1 = %+v, want significant above its base rate", decline)
	}
	if growth := find(t, got, VerdictGrowth, 1); growth.IsSignificant || *growth.PValue < 0.05 {
		t.Errorf("growth/1 = %+v, want a win rate at its base rate, not significant", growth)
	}

	var one VerdictAccumulator
	for range 30 {
		mustAdd(t, &one, 7, VerdictDecline, 21, -1, 1)
	}
	s := find(t, one.Results(SourceLive), VerdictDecline, 21)
	if s.IsSignificant || s.SampleSize != 30 || s.EffectiveSampleSize != 1 {
		t.Errorf("30 observations of one day = %+v, want 30 observations worth 1, not significant", s)
	}
}

func TestVerdictAccumulatorExtraHorizon(t *testing.T) {
	t.Parallel()
	var a VerdictAccumulator
	mustAdd(t, &a, 0, VerdictGrowth, 2, 1, 1)
	got := a.Results(SourceBacktest)
	if len(got) != 3*5 || got[1].HorizonDays != 2 {
		t.Errorf("want horizons 1,2,5,21,30 for each verdict, got %d records, second horizon %d", len(got), got[1].HorizonDays)
	}
}

func TestVerdictAccumulatorRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		verdict string
		h       int
		ret     float64
		median  float64
	}{
		{"unknown verdict", "sideways", 1, 1, 1},
		{"zero horizon", VerdictGrowth, 0, 1, 1},
		{"NaN return", VerdictGrowth, 1, nan(), 1},
		{"infinite return", VerdictGrowth, 1, inf(), 1},
		{"negative median", VerdictNeutral, 1, 1, -1},
		{"NaN median", VerdictNeutral, 1, 1, nan()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var a VerdictAccumulator
			err := a.Add(0, tt.verdict, tt.h, tt.ret, tt.median)
			if domain.ErrorCode(err) != domain.EINVALID {
				t.Fatalf("err = %v, want EINVALID", err)
			}
			var e *domain.Error
			if !errors.As(err, &e) || !strings.HasPrefix(e.Message, "stats: ") {
				t.Errorf("err = %v, want a stats: prefix", err)
			}
			for _, s := range a.Results(SourceBacktest) {
				if s.SampleSize != 0 || s.BaseRate != nil {
					t.Fatalf("rejected observation was counted: %+v", s)
				}
			}
		})
	}
}

// TestVerdictAccumulatorMerge splits observations over workers running
// concurrently, as the replay worker does, and checks the merged result
// equals one pass.
func TestVerdictAccumulatorMerge(t *testing.T) {
	t.Parallel()
	type obs struct {
		day     int
		verdict string
		h       int
		ret     float64
	}
	var all []obs
	for i := range 400 {
		all = append(all, obs{i / 5, Verdicts[i%3], VerdictHorizons[i%4], float64(i%17) - 8.5})
	}
	const median = 3

	var one VerdictAccumulator
	for _, o := range all {
		mustAdd(t, &one, o.day, o.verdict, o.h, o.ret, median)
	}

	const workers = 4
	parts := make([]VerdictAccumulator, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(all); i += workers {
				o := all[i]
				if err := parts[w].Add(o.day, o.verdict, o.h, o.ret, median); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var merged VerdictAccumulator
	for w := range parts {
		merged.Merge(&parts[w])
	}
	merged.Merge(nil)

	want, got := one.Results(SourceBacktest), merged.Results(SourceBacktest)
	for i := range want {
		w, g := want[i], got[i]
		if w.SampleSize != g.SampleSize || *w.WinRate != *g.WinRate || *w.BaseRate != *g.BaseRate ||
			w.EffectiveSampleSize != g.EffectiveSampleSize || w.WinRateCILow != g.WinRateCILow || !sameFloat(w.PValue, g.PValue) {
			t.Errorf("record %d: merged %+v, one pass %+v", i, g, w)
		}
		approx(t, "avg return", g.AvgReturnPct, w.AvgReturnPct, 1e-9)
	}
}

func TestVerdictStatJSON(t *testing.T) {
	t.Parallel()
	var a VerdictAccumulator
	mustAdd(t, &a, 0, VerdictGrowth, 1, 2, 1)
	b, err := json.Marshal(a.Results(SourceBacktest)[:2])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"verdict":"growth","horizon_days":1,"sample_size":1,"effective_sample_size":1,"is_significant":false,"win_rate":1,`,
		`"horizon_days":5,"sample_size":0,"effective_sample_size":0,"is_significant":false,"win_rate":null,"win_rate_ci_low":0,"win_rate_ci_high":1,"avg_return_pct":0,"base_rate":null,"p_value":null,"source":"backtest"`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s\nlacks %s", b, want)
		}
	}
}

func mustAdd(t *testing.T, a *VerdictAccumulator, day int, verdict string, h int, ret, median float64) {
	t.Helper()
	if err := a.Add(day, verdict, h, ret, median); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, stats []VerdictStat, verdict string, h int) VerdictStat {
	t.Helper()
	for _, s := range stats {
		if s.Verdict == verdict && s.HorizonDays == h {
			return s
		}
	}
	t.Fatalf("no record for %s/%d", verdict, h)
	return VerdictStat{}
}
