package worker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
)

// The four crypto styles' runs over one list start a quarter of it apart,
// each still scoring every asset once, and the caller's list is left as it
// was; a market scored in one style keeps its order.
func TestStaggeredStartsEachStyleAQuarterApart(t *testing.T) {
	var cands []store.RescoreCandidate
	for i := range 10 {
		cands = append(cands, store.RescoreCandidate{Symbol: fmt.Sprintf("S%02d", i)})
	}
	work := []sourceWork{{cands: cands}, {cands: cands[:4]}}
	symbols := func(cs []store.RescoreCandidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Symbol)
		}
		return out
	}
	all := symbols(cands)
	firsts := map[string]bool{}
	for k, style := range analytics.Styles {
		got := staggered(work, domain.Crypto, style)
		if len(got) != 2 {
			t.Fatalf("%s: %d sources, want 2", style, len(got))
		}
		order := symbols(got[0].cands)
		if want := fmt.Sprintf("S%02d", 10*k/4); order[0] != want {
			t.Errorf("%s starts at %s, want %s", style, order[0], want)
		}
		firsts[order[0]] = true
		sorted := slices.Sorted(slices.Values(order))
		if !slices.Equal(sorted, all) {
			t.Errorf("%s scores %v, want each of %v once", style, order, all)
		}
		if n := len(got[1].cands); n != 4 {
			t.Errorf("%s: second source has %d assets, want 4", style, n)
		}
	}
	if len(firsts) != len(analytics.Styles) {
		t.Errorf("the styles start at %v: want each at its own asset", firsts)
	}
	if got := staggered(work, domain.Stocks, analytics.DefaultStyle); symbols(got[0].cands)[0] != "S00" {
		t.Errorf("stocks (one style) start at %s, want the list's first", symbols(got[0].cands)[0])
	}
	if !slices.Equal(symbols(cands), all) || symbols(cands)[0] != "S00" {
		t.Errorf("the caller's list was changed: %v", symbols(cands))
	}
}
