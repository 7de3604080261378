// Package alerting evaluates the alerts clients define: it compiles each
// condition once per process and evaluates it on the assets a rescoring
// changed (store.SaveAnalyticsAlerting calls it inside the save's
// transaction).
package alerting

import (
	"sync"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// Program is a compiled condition.
type Program interface {
	// Eval reports whether the condition holds on the asset, with the
	// value of every variable it read.
	Eval(asset *store.AlertAsset) (matched bool, read map[string]any, err error)
}

// Compiler compiles a condition of a market.
type Compiler func(m domain.Market, expression string) (Program, error)

// Matcher evaluates alerts with programs compiled once per process: one
// per distinct condition of a market (the alerts of many clients that
// share a condition share its program). It is safe for concurrent use.
type Matcher struct {
	Compile Compiler

	mu    sync.Mutex
	cache map[programKey]compiled
}

type programKey struct {
	market     domain.Market
	expression string
}

type compiled struct {
	prog Program
	err  error
}

// maxPrograms bounds the cache: beyond it (deleted alerts' conditions
// pile up) it starts again empty.
const maxPrograms = 100_000

// Match evaluates a's condition on the asset (store.AlertMatcher).
func (m *Matcher) Match(a domain.Alert, asset *store.AlertAsset) (bool, map[string]any, error) {
	p, err := m.program(a.Market, a.Expression)
	if err != nil {
		return false, nil, err
	}
	return p.Eval(asset)
}

func (m *Matcher) program(market domain.Market, expression string) (Program, error) {
	k := programKey{market, expression}
	m.mu.Lock()
	c, ok := m.cache[k]
	m.mu.Unlock()
	if ok {
		return c.prog, c.err
	}
	// Compiled outside the lock; two workers racing compile twice, once.
	c.prog, c.err = m.Compile(market, expression)
	m.mu.Lock()
	if m.cache == nil || len(m.cache) >= maxPrograms {
		m.cache = map[programKey]compiled{}
	}
	m.cache[k] = c
	m.mu.Unlock()
	return c.prog, c.err
}

// Compiled is how many programs the cache holds (tests, metrics).
func (m *Matcher) Compiled() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cache)
}
