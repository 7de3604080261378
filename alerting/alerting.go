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
	// styles are the styles whose reports the condition reads; every
	// style when it reads the screener row or the asset's own fields.
	styles map[analytics.Style]bool
}

// maxPrograms bounds the cache: beyond it (deleted alerts' conditions
// pile up) it starts again empty.
const maxPrograms = 100_000

// Condition is a's condition (store.AlertMatcher): the program from the
// cache, resolved once for many evaluations.
func (m *Matcher) Condition(a domain.Alert) store.AlertCondition {
	return &condition{c: m.compiled(a.Market, a.Expression)}
}

type condition struct{ c compiled }

// Match evaluates the condition on the asset.

func (c *condition) Match(asset *store.AlertAsset) (bool, error) {
	if c.c.err != nil {
		return false, c.c.err
	}
	return c.c.prog.Match(Asset(asset))
}

// Read is the value of every variable the condition reads on the asset.
func (c *condition) Read(asset *store.AlertAsset) map[string]any {
	if c.c.err != nil {
		return map[string]any{}
	}
	return c.c.prog.Read(Asset(asset))
}

// Reads reports whether the condition reads the report of style (or
// fields of the asset that any rescoring may come with): a rescoring in a
// style the condition does not read cannot change its value.
func (c *condition) Reads(style analytics.Style) bool {
	return c.c.err != nil || c.c.styles == nil || c.c.styles[style]
}

// Program is the compiled condition, from the cache.
func (m *Matcher) Program(market domain.Market, expression string) (*screen.Program, error) {
	c := m.compiled(market, expression)
	return c.prog, c.err
}

func (m *Matcher) compiled(market domain.Market, expression string) compiled {
	k := programKey{market, expression}
	m.mu.Lock()
	c, ok := m.cache[k]
	m.mu.Unlock()
	if ok {
		return c
	}
	// Compiled outside the lock; two savers racing compile twice, once.
	c.prog, c.err = screen.Compile(string(market), expression)
	if c.err == nil {
		c.styles = stylesRead(market, c.prog)
	}
	m.mu.Lock()
	if m.cache == nil || len(m.cache) >= maxPrograms {
		m.cache = map[programKey]compiled{}
	}
	m.cache[k] = c
	m.mu.Unlock()
	return c
}

// stylesRead are the styles whose reports p reads; nil (every style) when
// it reads an asset field (price, volume, ...: not a report's).
func stylesRead(market domain.Market, p *screen.Program) map[analytics.Style]bool {
	vars := map[string]screen.Variable{}
	for _, v := range screen.Variables(string(market)) {
		vars[v.Name] = v
	}
	out := map[analytics.Style]bool{}
	for _, name := range p.Variables() {
		v, ok := vars[name]
		if !ok || v.AssetField {
			return nil
		}
		st := v.Style
		if st == "" {
			st = p.Style()
		}
		out[st] = true
	}
	return out
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
