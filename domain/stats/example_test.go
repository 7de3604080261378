package stats_test

import (
	"fmt"

	"github.com/marketscreener/market/domain/stats"
)

// A replay worker computes each bar's forward return, feeds it with the
// bar's verdict into an accumulator and reads the records at the end.
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
		if err := acc.Add(v, 1, r, med); err != nil {
			panic(err)
		}
	}
	for _, s := range acc.Results(stats.SourceBacktest) {
		if s.HorizonDays == 1 {
			fmt.Printf("%s: n=%d win=%.2f base=%.2f ci=%.2f..%.2f\n",
				s.Verdict, s.SampleSize, *s.WinRate, *s.BaseRate, s.WinRateCILow, s.WinRateCIHigh)
		}
	}
	// Output:
	// growth: n=4 win=1.00 base=0.57 ci=0.51..1.00
	// decline: n=1 win=1.00 base=0.43 ci=0.21..1.00
	// neutral: n=2 win=1.00 base=0.43 ci=0.34..1.00
}
