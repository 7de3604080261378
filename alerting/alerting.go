// Package alerting evaluates the alerts clients define: it compiles each
// condition once per process (package screen) and evaluates it on the
// assets a rescoring changed (store.SaveAnalyticsAlerting calls it inside
// the save's transaction).
package alerting

import (
	"sync"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/screen"
	"github.com/marketscreener/market/store"
)

// Matcher evaluates alerts with programs compiled once per process: one
// per distinct condition of a market (the alerts of many clients that
// share a condition share its program). It is safe for concurrent use.
type Matcher struct {
	mu    sync.Mutex
	cache map[programKey]compiled
}

type programKey struct {
	market     domain.Market
	expression string
}

type compiled struct {
	prog *screen.Program
	err  error
}

// maxPrograms bounds the cache: beyond it (deleted alerts' conditions
// pile up) it starts again empty.
const maxPrograms = 100_000

// Match evaluates a's condition on the asset (store.AlertMatcher).
func (m *Matcher) Match(a domain.Alert, asset *store.AlertAsset) (bool, error) {
	p, err := m.Program(a.Market, a.Expression)
	if err != nil {
		return false, err
	}
	return p.Match(Asset(asset))
}

// Read is the value of every variable a's condition reads on the asset.
func (m *Matcher) Read(a domain.Alert, asset *store.AlertAsset) map[string]any {
	p, err := m.Program(a.Market, a.Expression)
	if err != nil {
		return map[string]any{}
	}
	return p.Read(Asset(asset))
}

// Program is the compiled condition, from the cache.
func (m *Matcher) Program(market domain.Market, expression string) (*screen.Program, error) {
	k := programKey{market, expression}
	m.mu.Lock()
	c, ok := m.cache[k]
	m.mu.Unlock()
	if ok {
		return c.prog, c.err
	}
	// Compiled outside the lock; two savers racing compile twice, once.
	c.prog, c.err = screen.Compile(string(market), expression)
	m.mu.Lock()
	if m.cache == nil || len(m.cache) >= maxPrograms {
		m.cache = map[programKey]compiled{}
	}
	m.cache[k] = c
	m.mu.Unlock()
	return c.prog, c.err
}

// Compiled is how many programs the cache holds.
func (m *Matcher) Compiled() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cache)
}

// Asset is the screen form of a store asset, built once and kept on it.
func Asset(a *store.AlertAsset) *screen.Asset {
	if sa, ok := a.Prepared.(*screen.Asset); ok {
		return sa
	}
	reports := make(map[analytics.Style]*analytics.Result, len(a.Reports))
	var exchange, instrument string
	for st, r := range a.Reports {
		if r != nil && r.Result != nil {
			reports[st] = r.Result
			if st == analytics.DefaultStyle || exchange == "" {
				exchange, instrument = r.Exchange, r.Instrument
			}
		}
	}
	sa := screen.NewAsset(string(a.Market), a.Symbol, a.Ticker, reports)
	sa.Exchange, sa.Instrument = exchange, instrument
	a.Prepared = sa
	return sa
}
