package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// TestAlertIndexNamedPlaces checks the alerts the copy finds naming each
// asset against the alerts it returns, gone through symbol by symbol (what
// an evaluation does when the alerts come from the table): the same
// alerts, as places in the list, ascending; a market's alerts never name
// another market's asset; an alert whose client may not receive it is in
// neither.
func TestAlertIndexNamedPlaces(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	ix := &alertIndex{byMarket: map[domain.Market]*marketAlerts{}}
	rank := 0 // id order
	add := func(m domain.Market, symbols []string, active bool) {
		ma := ix.byMarket[m]
		if ma == nil {
			ma = &marketAlerts{named: map[string][]*indexedAlert{}}
			ix.byMarket[m] = ma
		}
		n := rank
		rank++
		ia := &indexedAlert{rank: n, active: active, markets: []string{"crypto", "stocks"},
			alert: domain.Alert{ID: fmt.Sprintf("a%03d", n), Market: m, Symbols: symbols}}
		if symbols == nil {
			ma.whole = append(ma.whole, ia)
			return
		}
		for _, s := range symbols {
			ma.named[s] = append(ma.named[s], ia)
		}
	}
	add(domain.Crypto, nil, true)
	add(domain.Crypto, []string{"BTC_USDT", "ETH_USDT"}, true)
	add(domain.Stocks, []string{"BTC_USDT"}, true)  // another market, same symbol
	add(domain.Crypto, []string{"ETH_USDT"}, false) // its client suspended
	add(domain.Crypto, []string{"SOL_USDT", "BTC_USDT", "XRP_USDT"}, true)
	add(domain.Crypto, []string{"XRP_USDT"}, true) // not among the symbols looked up
	add(domain.Crypto, nil, false)
	add(domain.Crypto, []string{"ETH_USDT"}, true)

	symbols := []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"}
	out, _, _, named := ix.lookup([]string{"crypto", "stocks"}, symbols, now, nil)
	if len(out) != 5 {
		t.Fatalf("lookup returned %d alerts, want 5 (one on the whole crypto market, three crypto alerts and one stocks alert naming a symbol): %+v",
			len(out), out)
	}
	total := 0
	for _, m := range []domain.Market{domain.Crypto, domain.Stocks} {
		for _, s := range symbols {
			var want []int
			for i, a := range out {
				if a.Market == m && slices.Contains(a.Symbols, s) {
					want = append(want, i)
				}
			}
			got := named[assetKey{m, s}]
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: named places %v, want %v", m, s, got, want)
			}
			total += len(got)
		}
	}
	if total != 6 {
		t.Errorf("%d places in all, want 6 (crypto BTC 2, ETH 2, SOL 1; stocks BTC 1)", total)
	}
	if len(named) != len(symbols)+1 {
		t.Errorf("named holds %d assets, want %d: %v", len(named), len(symbols)+1, named)
	}
}
