package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
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

// styleMatcher resolves a condition to the styles its expression lists
// (comma-separated): enough for AlertDensity, which asks only Reads.
type styleMatcher struct{}

type styleCondition map[analytics.Style]bool

func (m *styleMatcher) Condition(a domain.Alert) AlertCondition {
	c := styleCondition{}
	for s := range strings.SplitSeq(a.Expression, ",") {
		c[analytics.Style(s)] = true
	}
	return c
}

func (c styleCondition) Match(*AlertAsset) (bool, error)  { return false, nil }
func (c styleCondition) Read(*AlertAsset) map[string]any  { return nil }
func (c styleCondition) Reads(style analytics.Style) bool { return c[style] }

// TestAlertDensity counts the alert evaluations per asset of a rescoring
// in a style: an alert on the whole market once per asset, one naming
// assets once per asset it names among those rescored, only those whose
// condition reads the style and whose client may receive them, the
// market's alone; conditions kept with the copy and those resolved
// afresh alike; 0 before the copy is loaded.
func TestAlertDensity(t *testing.T) {
	m := &styleMatcher{}
	db := &DB{}
	symbols := []string{"BTC_USDT", "ETH_USDT", "SOL_USDT", "XRP_USDT"}
	if d, alerted := db.AlertDensity(domain.Crypto, analytics.Swing, symbols, m); d != 0 || alerted {
		t.Fatalf("density %v, alerted %v before the copy is loaded, want 0, false", d, alerted)
	}
	ix := &db.alerts
	ix.loaded, ix.byMarket = true, map[domain.Market]*marketAlerts{}
	rank := 0
	add := func(mk domain.Market, styles string, syms []string, active bool) *indexedAlert {
		ma := ix.byMarket[mk]
		if ma == nil {
			ma = &marketAlerts{named: map[string][]*indexedAlert{}}
			ix.byMarket[mk] = ma
		}
		ia := &indexedAlert{rank: rank, active: active, markets: []string{"crypto", "stocks"},
			alert: domain.Alert{ID: fmt.Sprintf("a%03d", rank), Market: mk, Symbols: syms, Expression: styles}}
		rank++
		if syms == nil {
			ma.whole = append(ma.whole, ia)
		}
		for _, s := range syms {
			ma.named[s] = append(ma.named[s], ia)
		}
		return ia
	}
	// Resolved by an earlier save with m: its kept condition counts (it
	// reads swing), not its expression resolved again (intraday).
	kept := add(domain.Crypto, "intraday", nil, true)
	kept.matcher, kept.cond = m, styleCondition{analytics.Swing: true}
	add(domain.Crypto, "swing,scalp", nil, true)
	add(domain.Crypto, "swing", []string{"BTC_USDT", "ETH_USDT", "DOGE_USDT"}, true) // two of the symbols
	add(domain.Crypto, "scalp", []string{"SOL_USDT"}, true)
	add(domain.Crypto, "swing", []string{"SOL_USDT"}, false) // its client suspended
	add(domain.Crypto, "position", nil, false)
	add(domain.Stocks, "swing", nil, true) // another market
	for _, tc := range []struct {
		style analytics.Style
		want  float64
	}{
		{analytics.Swing, 2 + 2.0/4}, // two on the whole market, one naming two of the four
		{analytics.Scalp, 1 + 1.0/4},
		{analytics.Position, 0},
		{analytics.Intraday, 0}, // the kept condition, not the expression
	} {
		if d, alerted := db.AlertDensity(domain.Crypto, tc.style, symbols, m); d != tc.want || !alerted {
			t.Errorf("%s: density %v, alerted %v, want %v, true", tc.style, d, alerted, tc.want)
		}
	}
	if d, alerted := db.AlertDensity(domain.Crypto, analytics.Swing, nil, m); d != 0 || !alerted {
		t.Errorf("without symbols: density %v, alerted %v, want 0, true", d, alerted)
	}
	if d, alerted := db.AlertDensity(domain.Forex, analytics.Swing, symbols, m); d != 0 || alerted {
		t.Errorf("a market without alerts: density %v, alerted %v, want 0, false", d, alerted)
	}
	// A market whose only alert's client may not receive it: none live.
	add(domain.Forex, "swing", nil, false)
	if d, alerted := db.AlertDensity(domain.Forex, analytics.Swing, symbols, m); d != 0 || alerted {
		t.Errorf("a market without live alerts: density %v, alerted %v, want 0, false", d, alerted)
	}
	// The conditions resolved here are kept with their alerts.
	for _, a := range ix.byMarket[domain.Crypto].whole {
		if a.live(time.Now()) && (a.matcher != AlertMatcher(m) || a.cond == nil) {
			t.Errorf("alert %s: condition not kept", a.alert.ID)
		}
	}
}
