package store

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// alertIndex is this process's copy of every alert and of what their
// clients may receive, for the saves that evaluate alerts: at a close a
// few hundred saves each need the alerts of their assets, and reading
// them from the table each time cost more than the close itself. The copy
// is used only while it is the table's: a save reads alert_generation (a
// counter every change of an alert or a client moves) in its transaction
// and compares. A stale copy is reloaded, at most once a second; between
// reloads the saves read their alerts from the table (liveAlertsSQL), so
// a client that creates and deletes alerts in a loop costs the others a
// reload a second, not one a save.
type alertIndex struct {
	mu       sync.Mutex
	gen      int64
	loaded   bool
	loadedAt time.Time
	byMarket map[domain.Market]*marketAlerts
}

type marketAlerts struct {
	whole []*indexedAlert            // alerts on the whole market
	named map[string][]*indexedAlert // by symbol
}

type indexedAlert struct {
	alert domain.Alert
	rank  int // its place in id order
	// What the client may receive: active, its contract's end, markets.
	active  bool
	expires *time.Time
	markets []string
	// The alert's condition as matcher resolved it: resolved once per
	// copy of the index rather than once a save (a close's saves each
	// evaluate a thousand alerts or more). Set under alertIndex.mu.
	matcher AlertMatcher
	cond    AlertCondition
}

func (a *indexedAlert) live(now time.Time) bool {
	return a.active && (a.expires == nil || a.expires.After(now)) && slices.Contains(a.markets, string(a.alert.Market))
}

// maxIndexedAlerts bounds the copy; beyond it every save reads the table.
const maxIndexedAlerts = 500_000

// reloadEvery is the least time between two reloads of a stale copy.
const reloadEvery = time.Second

// liveAlerts are the alerts on the markets that watch one of symbols (or
// the whole market) and whose client may receive them now (active,
// contract running, the market in its tier), ordered by id, with their
// conditions as m resolves them (nil when read from the table: the caller
// resolves them), and, from the copy, the alerts that name each asset
// (their places in the alerts returned, ascending; nil when read from the
// table). gen is alert_generation as the transaction reads it.
func (db *DB) liveAlerts(ctx context.Context, tx pgx.Tx, gen int64, markets, symbols []string, m AlertMatcher) ([]domain.Alert, []AlertCondition,
	map[assetKey][]int, error) {
	ix := &db.alerts
	ix.mu.Lock()
	if ix.loaded && ix.gen == gen {
		out, conds, found, named := ix.lookupLocked(ix, markets, symbols, m)
		return out, ix.resolve(m, out, conds, found), named, nil
	}
	load := gen > ix.gen || !ix.loaded
	load = load && time.Since(ix.loadedAt) >= reloadEvery
	if load {
		ix.loadedAt = time.Now() // one saver reloads; the others read the table meanwhile
	}
	ix.mu.Unlock()
	if !load {
		out, err := liveAlertsSQL(ctx, tx, markets, symbols)
		return out, nil, nil, err
	}
	byMarket, n, err := loadAlertIndex(ctx, tx)
	if err != nil {
		return nil, nil, nil, err
	}
	if n > maxIndexedAlerts {
		out, err := liveAlertsSQL(ctx, tx, markets, symbols)
		return out, nil, nil, err
	}
	ix.mu.Lock()
	if gen >= ix.gen {
		ix.gen, ix.loaded, ix.byMarket = gen, true, byMarket
	}
	out, conds, found, named := ix.lookupLocked(&alertIndex{byMarket: byMarket}, markets, symbols, m)
	return out, ix.resolve(m, out, conds, found), named, nil
}

// lookupLocked is from.lookup with ix.mu held (taken by the caller) and
// released on return.
func (ix *alertIndex) lookupLocked(from *alertIndex, markets, symbols []string, m AlertMatcher) ([]domain.Alert, []AlertCondition, []*indexedAlert,
	map[assetKey][]int) {
	defer ix.mu.Unlock()
	return from.lookup(markets, symbols, time.Now(), m)
}

// lookup is liveAlerts on the copy (ix.mu held), with the conditions m
// resolved before (nil for the others, to resolve: resolve), the alerts
// found and those that name each asset (their places in out). Only a
// matcher that is a pointer has its conditions kept (it is compared with
// ==, which another kind of value may refuse with a panic): for any
// other, conds is nil and the caller resolves them.
func (ix *alertIndex) lookup(markets, symbols []string, now time.Time, m AlertMatcher) ([]domain.Alert, []AlertCondition, []*indexedAlert,
	map[assetKey][]int) {
	var found []*indexedAlert
	for _, mk := range markets {
		ma := ix.byMarket[domain.Market(mk)]
		if ma == nil {
			continue
		}
		found = append(found, ma.whole...)
		for _, s := range symbols {
			found = append(found, ma.named[s]...)
		}
	}
	// Id order, each once (an alert may name several of the symbols).
	slices.SortFunc(found, func(a, b *indexedAlert) int { return a.rank - b.rank })
	found = slices.Compact(found)
	keep := m != nil && reflect.TypeOf(m).Kind() == reflect.Pointer
	out := make([]domain.Alert, 0, len(found))
	live := found[:0]
	var conds []AlertCondition
	if keep {
		conds = make([]AlertCondition, 0, len(found))
	}
	for _, a := range found {
		if !a.live(now) {
			continue
		}
		out = append(out, a.alert)
		live = append(live, a)
		if keep {
			var c AlertCondition
			if a.matcher == m {
				c = a.cond
			}
			conds = append(conds, c)
		}
	}
	// The alerts naming each asset, as places in out (live is in rank
	// order, and so is each symbol's list): an evaluation finds an
	// asset's alerts without going through every symbol of every alert.
	named := map[assetKey][]int{}
	for _, mk := range markets {
		ma := ix.byMarket[domain.Market(mk)]
		if ma == nil {
			continue
		}
		for _, s := range symbols {
			var places []int
			for _, a := range ma.named[s] {
				if k, ok := slices.BinarySearchFunc(live, a.rank, func(x *indexedAlert, rank int) int { return x.rank - rank }); ok {
					places = append(places, k)
				}
			}
			if len(places) > 0 {
				named[assetKey{domain.Market(mk), s}] = places
			}
		}
	}
	return out, conds, live, named
}

// resolve completes lookup's conditions: those m had not resolved are
// resolved now, outside the index's lock (a condition seen for the first
// time compiles), and kept with their alerts.
func (ix *alertIndex) resolve(m AlertMatcher, alerts []domain.Alert, conds []AlertCondition, found []*indexedAlert) []AlertCondition {
	var missing []int
	for k, c := range conds {
		if c == nil {
			conds[k] = m.Condition(alerts[k])
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		ix.mu.Lock()
		for _, k := range missing {
			found[k].matcher, found[k].cond = m, conds[k]
		}
		ix.mu.Unlock()
	}
	return conds
}

// loadAlertIndex reads every alert with its client's standing.
func loadAlertIndex(ctx context.Context, tx pgx.Tx) (map[domain.Market]*marketAlerts, int, error) {
	rows, err := tx.Query(ctx, `SELECT `+alertColumns+`, c.status = 'active', c.contract_expires_at, c.markets
		FROM alerts a JOIN clients c ON c.id = a.client_id ORDER BY a.id`)
	if err != nil {
		return nil, 0, translate(err, "alerts")
	}
	defer rows.Close()
	out := map[domain.Market]*marketAlerts{}
	n := 0
	for rows.Next() {
		ia := &indexedAlert{rank: n}
		a := &ia.alert
		var market string
		if err := rows.Scan(&a.ID, &a.ClientID, &a.Name, &market, &a.Expression, &a.Symbols, &a.CooldownSeconds, &a.CreatedAt,
			&ia.active, &ia.expires, &ia.markets); err != nil {
			return nil, 0, translate(err, "alerts")
		}
		a.Market, a.CreatedAt = domain.Market(market), a.CreatedAt.UTC()
		ma := out[a.Market]
		if ma == nil {
			ma = &marketAlerts{named: map[string][]*indexedAlert{}}
			out[a.Market] = ma
		}
		if a.Symbols == nil {
			ma.whole = append(ma.whole, ia)
		} else {
			for _, s := range a.Symbols {
				if l := ma.named[s]; len(l) == 0 || l[len(l)-1] != ia {
					ma.named[s] = append(l, ia)
				}
			}
		}
		n++
	}
	return out, n, translate(rows.Err(), "alerts")
}

// AlertDensity is how many alert evaluations a rescoring of style on
// symbols of market makes per asset, from this process's copy of the
// alerts: the live alerts whose condition reads the style, one on the
// whole market once per symbol, one naming symbols once per symbol of
// them; and whether the market has a live alert at all (whatever its
// style and symbols). Both are 0 and false until a save has loaded the
// copy; the density is 0 without symbols. The worker orders the runs that
// score at once by it (a hint: a copy a little behind the table will do).
func (db *DB) AlertDensity(market domain.Market, style analytics.Style, symbols []string, m AlertMatcher) (density float64, alerted bool) {
	if m == nil {
		return 0, false
	}
	// Conditions a save resolved with m are kept with their alerts (m a
	// pointer: see lookup); the others are resolved after the lock, and
	// kept.
	keep := reflect.TypeOf(m).Kind() == reflect.Pointer
	now := time.Now()
	n := 0
	unresolved := map[*indexedAlert]int{}
	count := func(a *indexedAlert, k int) {
		switch {
		case !a.live(now):
		case keep && a.matcher == m:
			if a.cond.Reads(style) {
				n += k
			}
		default:
			unresolved[a] += k
		}
	}
	ix := &db.alerts
	ix.mu.Lock()
	if ma := ix.byMarket[market]; ix.loaded && ma != nil {
		alerted = ma.anyLive(now)
		for _, a := range ma.whole {
			count(a, len(symbols))
		}
		for _, s := range symbols {
			for _, a := range ma.named[s] {
				count(a, 1)
			}
		}
	}
	ix.mu.Unlock()
	if len(unresolved) > 0 {
		conds := make(map[*indexedAlert]AlertCondition, len(unresolved))
		for a, k := range unresolved {
			c := m.Condition(a.alert)
			conds[a] = c
			if c.Reads(style) {
				n += k
			}
		}
		if keep {
			ix.mu.Lock()
			for a, c := range conds {
				a.matcher, a.cond = m, c
			}
			ix.mu.Unlock()
		}
	}
	if len(symbols) == 0 {
		return 0, alerted
	}
	return float64(n) / float64(len(symbols)), alerted
}

// anyLive reports whether one of the market's alerts is live now.
func (ma *marketAlerts) anyLive(now time.Time) bool {
	for _, a := range ma.whole {
		if a.live(now) {
			return true
		}
	}
	for _, l := range ma.named {
		for _, a := range l {
			if a.live(now) {
				return true
			}
		}
	}
	return false
}
