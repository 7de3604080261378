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
	out, _, _, named := ix.lookup([]string{"crypto"}, symbols, now, nil)
	if len(out) != 4 {
		t.Fatalf("lookup returned %d alerts, want 4 (one on the whole market, three naming a symbol): %+v", len(out), out)
	}
	total := 0
	for _, s := range symbols {
		var want []int
		for i, a := range out {
			if a.Market == domain.Crypto && slices.Contains(a.Symbols, s) {
				want = append(want, i)
			}
		}
		got := named[assetKey{domain.Crypto, s}]
		if !slices.Equal(got, want) {
			t.Errorf("%s: named places %v, want %v", s, got, want)
		}
		total += len(got)
	}
	if total != 5 {
		t.Errorf("%d places in all, want 5 (BTC 2, ETH 2, SOL 1)", total)
	}
	if len(named) != len(symbols) {
		t.Errorf("named holds %d assets, want %d: %v", len(named), len(symbols), named)
	}
	if l := named[assetKey{domain.Stocks, "BTC_USDT"}]; l != nil {
		t.Errorf("a stocks asset was not looked up, yet has places %v", l)
	}
}
