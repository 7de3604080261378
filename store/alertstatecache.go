package store

import (
	"sync"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// alertStateCache keeps, per asset, the alert states the last save of the
// asset in this process left, so that the next save does not read them
// again: at a close each asset is saved once per style, and each save
// needs every state of the asset's alerts that read the style saved.
//
// An asset's states are written only by a save that stores one of its
// reports, holding the locks of all of them (SaveAnalyticsAlerting), so
// any write of its states changes the xmin of one of its report rows. An
// entry is therefore valid while the rows' versions (style → xmin, every
// style the asset has a report in) are the ones the entry was made with,
// and the alerts' generation has not moved (an alert deleted or changed;
// its states go with it). It is consulted with those rows locked. An
// entry is put just before its save commits, with the save's transaction
// id as the version of the reports it stored: a save that does not commit
// leaves the rows' versions as they were, which the entry never matches.
type alertStateCache struct {
	mu sync.Mutex
	m  map[assetKey]*assetStates
}

type assetStates struct {
	gen      int64
	versions map[analytics.Style]uint32
	states   map[string]domain.AlertState // by alert id
}

// maxCachedAssets bounds the cache (an entry is an asset's states, a few
// kilobytes at most); beyond it, the cache starts again empty.
const maxCachedAssets = 50_000

// take returns the asset's states if the entry matches the rows' versions
// (versions of the asset's styles, as locked) and gen, and removes the
// entry: the caller, which holds the asset's rows, changes the states and
// puts them back before its commit (a save that fails puts nothing, and
// the next save reads the table). nil when the entry is absent or stale.
func (c *alertStateCache) take(k assetKey, gen int64, styles map[analytics.Style]*AnalyticsRecord, versions map[reportKey]uint32) map[string]domain.AlertState {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[k]
	if e == nil || e.gen != gen || len(e.versions) != len(styles) {
		return nil
	}
	for st := range styles {
		v, ok := e.versions[st]
		if !ok || v != versions[reportKey{k.market, st, k.symbol}] {
			return nil
		}
	}
	delete(c.m, k)
	return e.states
}

func (c *alertStateCache) put(k assetKey, e *assetStates) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedAssets {
		c.m = make(map[assetKey]*assetStates, 1024)
	}
	c.m[k] = e
}
