package feeds

import (
	"slices"
	"testing"

	"github.com/marketscreener/market/domain"
)

// TestServesAgreesWithProviders: what the scheduler, the api and the CLI
// compute without providers is what the worker's providers support, for
// every feed and every combination of every region.
func TestServesAgreesWithProviders(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for _, name := range KnownNames() {
		cfg := tb.cfg
		cfg.Names = []string{name}
		reg, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := reg.Providers()[0]
		for _, region := range domain.Regions {
			for _, c := range domain.Catalogue(region) {
				if got, want := Serves(name, c), p.Supports(c); got != want {
					t.Errorf("Serves(%s, %s) = %v, provider supports it: %v", name, c, got, want)
				}
			}
		}
	}
	if Serves("bitstamp", binanceSpot) {
		t.Error("an unknown feed serves nothing")
	}
}

// TestServedSplitsTheCatalogue: with binance alone, the global region's
// stocks, forex and okx combinations are unserved; first match wins.
func TestServedSplitsTheCatalogue(t *testing.T) {
	t.Parallel()
	served, unserved := Served([]string{NameBinance}, "global")
	if want := []domain.Combination{binanceSpot, binancePerp, binanceFutures}; !slices.Equal(served, want) {
		t.Errorf("served %v, want %v", served, want)
	}
	if want := []domain.Combination{okxSpot, okxPerp, oandaMajor, oandaMinor, nasdaq, nyse, arca, amex, bats}; !slices.Equal(unserved, want) {
		t.Errorf("unserved %v, want %v", unserved, want)
	}
	if served, unserved := Served([]string{NameSynthetic}, "us"); len(unserved) != 0 || len(served) != len(domain.Catalogue("us")) {
		t.Errorf("synthetic in us: served %v, unserved %v; want every combination", served, unserved)
	}
	if name, ok := ServedBy([]string{NameOKX, NameSynthetic}, okxSpot); !ok || name != NameOKX {
		t.Errorf("okx before synthetic: okx/spot served by %q", name)
	}
}
