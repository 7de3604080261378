package analytics

import (
	"testing"

	"github.com/marketscreener/market/domain/indicator"
)

func TestClusterPivots(t *testing.T) {
	t.Parallel()
	ps := []indicator.Pivot{{Price: 100}, {Price: 110}, {Price: 100.4}, {Price: 99.8}, {Price: 121}, {Price: 110.3}}
	got := clusterPivots(ps, 0.5)
	want := []level{{price: (99.8 + 100 + 100.4) / 3, touches: 3}, {price: 110.15, touches: 2}, {price: 121, touches: 1}}
	if len(got) != len(want) {
		t.Fatalf("levels %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].touches != want[i].touches || !closeTo(got[i].price, want[i].price) {
			t.Errorf("level %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func closeTo(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestScenarioBracketsTheClose(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 30; seed++ {
		s := indicator.FromCandles(walk(300, seed, float64(int(seed%3)-1)*0.003, 0.01))
		atr := indicator.Last(indicator.ATR(s.High, s.Low, s.Close, 14), 0)
		for _, v := range []Verdict{VerdictGrowth, VerdictDecline, VerdictNeutral} {
			sc := scenario(s, atr, v)
			if !(sc.Support < sc.LastClose && sc.LastClose < sc.Resistance) || sc.Support < 0 {
				t.Fatalf("seed %d: support %v, close %v, resistance %v", seed, sc.Support, sc.LastClose, sc.Resistance)
			}
			if sc.Text.Key != "scenario."+string(v) || sc.Invalidation.Key != "invalidation."+string(v) {
				t.Errorf("verdict %s: keys %s %s", v, sc.Text.Key, sc.Invalidation.Key)
			}
		}
	}
}

// A price at its highest has no pivot above it: resistance falls back to
// close + 2 ATR.
func TestScenarioFallbackAtNewHigh(t *testing.T) {
	t.Parallel()
	cs := walk(100, 1, 0.02, 0.001)
	s := indicator.FromCandles(cs)
	sc := scenario(s, 1, VerdictGrowth)
	if want := roundPrice(s.Close[s.Len()-1] + 2); !closeTo(sc.Resistance, want) {
		t.Errorf("resistance %v, want close + 2 ATR = %v", sc.Resistance, want)
	}
}

func TestScenarioLevelsMatchTheirText(t *testing.T) {
	t.Parallel()
	s := indicator.FromCandles(walk(300, 4, 0, 0.01))
	sc := scenario(s, indicator.Last(indicator.ATR(s.High, s.Low, s.Close, 14), 0), VerdictNeutral)
	if sc.Text.Args.Value("support") != fmtPrice(sc.Support) || sc.Text.Args.Value("resistance") != fmtPrice(sc.Resistance) ||
		sc.Support != roundPrice(sc.Support) {
		t.Errorf("levels %v/%v vs text %v", sc.Support, sc.Resistance, sc.Text.Args)
	}
}
