package stats_test

import (
	"fmt"

	"github.com/marketscreener/market/domain/stats"
)

// A replay worker computes each bar's forward return, feeds it with the
// bar's day and verdict into an accumulator and reads the records at the
// end. Eight days of one asset are far too few to say anything: the
// intervals are wide and nothing is significant.
func ExampleVerdictAccumulator() {
	closes := []float64{100, 102, 101, 104, 103, 107, 106, 110}
	verdicts := []string{"growth", "neutral", "growth", "decline", "growth", "neutral", "growth", "growth"}

	var acc stats.VerdictAccumulator
	med, _ := stats.MedianAbsMove(closes, 1)
	for i, v := range verdicts {
		r, ok := stats.ForwardReturn(closes, i, 1)
		if !ok {
			continue // the newest bar has no future yet
		}
		day := 20000 + i // stats.DayNumber of the bar's open time
		if err := acc.Add(day, v, 1, r, med); err != nil {
			panic(err)
		}
	}
	for _, s := range acc.Results(stats.SourceBacktest) {
		if s.HorizonDays == 1 {
			fmt.Printf("%s: n=%d n_eff=%d win=%.2f base=%.2f ci=%.2f..%.2f significant=%v\n",
				s.Verdict, s.SampleSize, s.EffectiveSampleSize, *s.WinRate, *s.BaseRate, s.WinRateCILow, s.WinRateCIHigh, s.IsSignificant)
		}
	}
	// Output:
	// growth: n=4 n_eff=4 win=1.00 base=0.57 ci=0.28..1.00 significant=false
	// decline: n=1 n_eff=1 win=1.00 base=0.43 ci=0.00..1.00 significant=false
	// neutral: n=2 n_eff=2 win=1.00 base=0.43 ci=0.01..1.00 significant=false
}
