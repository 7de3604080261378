package api

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/screen"
	"github.com/marketscreener/market/store"
)

// The screen snapshot is a market's assets as package screen reads them:
// every style's latest result and the screener row, in memory, so a query
// evaluates over a slice and never scans the database.
//
// It is stale once the market's analytics scope or one of its screener
// rows' scopes is invalidated (the worker's announcements, readcache), or
// after screenMaxAge when an announcement was lost. A stale
// snapshot keeps answering while one rebuild per market runs in the
// background, so no query waits for a reload; only the first query of a
// market waits for its first build. A rebuild reads the results scored
// since the newest it holds (with a margin for transactions that commit
// late), skipping those it holds at the same updated_at, and takes the
// screener rows from the read cache; every screenFullReload it checks
// every report it holds against the table's list of (symbol, style,
// updated_at): it drops those no longer listed and reads again those
// written since (a transaction that committed past the margin), without
// reading the whole market's results again.

const (
	screenFullReload = 5 * time.Minute
	// screenMaxAge rebuilds a snapshot that saw no invalidation, in case
	// an announcement was lost.
	screenMaxAge = time.Minute
	// screenSinceMargin: a rebuild reads again the results scored up to
	// this long before the newest it holds, which a longer transaction
	// may have committed after the last read.
	screenSinceMargin = time.Minute
	// screenBuildTimeout bounds one build: a whole market's results
	// (13,000 assets: tens of MB of JSON) take seconds on a loaded host.
	screenBuildTimeout = time.Minute
)

// screenSnapshot is one build of a market's assets.
type screenSnapshot struct {
	// assets, by symbol; each read-only once published.
	assets []*screen.Asset
	// newest is the newest report's updated_at (the answers'
	// Last-Modified); fullAt when the whole market was last read; builtAt
	// when this build was made.
	newest, fullAt, builtAt time.Time
	// gens are the generations of the scopes it was built from.
	scopes []readcache.Scope
	gens   []uint64
	// stamps are the updated_at of each report held.
	stamps map[reportKey]time.Time
	// tab lays the assets out by variable for the queries (made on first
	// use; its columns are filled as queries read them).
	tab struct {
		once sync.Once
		t    *screen.Table
	}
}

type reportKey struct {
	symbol string
	style  analytics.Style
}

// table is the snapshot's assets as a screen.Table.
func (s *screenSnapshot) table() *screen.Table {
	s.tab.once.Do(func() { s.tab.t = screen.NewTable(s.assets) })
	return s.tab.t
}

// screenSnapshots holds each market's current snapshot.
type screenSnapshots struct {
	mu      sync.Mutex
	markets map[domain.Market]*screenHolder
}

type screenHolder struct {
	cur        atomic.Pointer[screenSnapshot]
	mu         sync.Mutex
	first      *screenBuild // the first build under way
	refreshing atomic.Bool
}

// screenBuild is a first build that the queries arriving meanwhile wait for.
type screenBuild struct {
	done chan struct{}
	err  error
}

func (ss *screenSnapshots) holder(m domain.Market) *screenHolder {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.markets == nil {
		ss.markets = make(map[domain.Market]*screenHolder)
	}
	h := ss.markets[m]
	if h == nil {
		h = &screenHolder{}
		ss.markets[m] = h
	}
	return h
}

// get is m's current snapshot: built now when there is none, else the
// one held, with a rebuild started when it is stale.
func (ss *screenSnapshots) get(ctx context.Context, s *Server, m domain.Market) (*screenSnapshot, error) {
	h := ss.holder(m)
	snap := h.cur.Load()
	if snap == nil {
		return ss.first(ctx, s, m, h)
	}
	if s.screenStale(snap) && h.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer h.refreshing.Store(false)
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), screenBuildTimeout)
			defer cancel()
			next, err := s.buildScreenSnapshot(bctx, m, h.cur.Load())
			if err != nil {
				s.cfg.Logger.Warn("screen snapshot: rebuild failed; serving the previous one", "market", m, "err", err)
				return
			}
			h.cur.Store(next)
		}()
	}
	return snap, nil
}

// first waits for m's first build, starting it when none is under way.
// The build runs detached from the request (bounded by
// screenBuildTimeout): a query whose budget ends first gets its context's
// error, and the next query finds the build finished or still running.
func (ss *screenSnapshots) first(ctx context.Context, s *Server, m domain.Market, h *screenHolder) (*screenSnapshot, error) {
	h.mu.Lock()
	b := h.first
	if b == nil {
		if snap := h.cur.Load(); snap != nil {
			h.mu.Unlock()
			return snap, nil
		}
		b = &screenBuild{done: make(chan struct{})}
		h.first = b
		go func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), screenBuildTimeout)
			defer cancel()
			snap, err := s.buildScreenSnapshot(bctx, m, nil)
			h.mu.Lock()
			if err == nil {
				h.cur.Store(snap)
			}
			b.err = err
			h.first = nil
			h.mu.Unlock()
			close(b.done)
		}()
	}
	h.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	return h.cur.Load(), nil
}

func (s *Server) screenStale(snap *screenSnapshot) bool {
	if s.cfg.Now().Sub(snap.builtAt) > screenMaxAge {
		return true
	}
	for i, sc := range snap.scopes {
		if s.cache.Generation(sc) != snap.gens[i] {
			return true
		}
	}
	return false
}

// buildScreenSnapshot builds m's snapshot, from prev's when given and not
// due for a full reload.
func (s *Server) buildScreenSnapshot(ctx context.Context, m domain.Market, prev *screenSnapshot) (*screenSnapshot, error) {
	now := s.cfg.Now()
	next := &screenSnapshot{builtAt: now}
	// The generations are read before the data: an invalidation that
	// lands during the build leaves the snapshot stale, not wrongly fresh.
	next.scopes = append(next.scopes, readcache.Analytics(m))
	next.gens = append(next.gens, s.cache.Generation(readcache.Analytics(m)))
	bySymbol := map[string]*screen.Asset{}
	next.stamps = map[reportKey]time.Time{}
	var recs []store.AnalyticsRecord
	var err error
	switch {
	case prev == nil:
		next.fullAt = now
		recs, err = s.analytics.AnalyticsResults(ctx, m, time.Time{})
	case now.Sub(prev.fullAt) < screenFullReload:
		next.fullAt, next.newest = prev.fullAt, prev.newest
		copyHeld(prev, next, bySymbol)
		recs, err = s.readChanged(ctx, m, next, bySymbol, prev.newest.Add(-screenSinceMargin))
	default:
		next.fullAt, next.newest = now, prev.newest
		copyHeld(prev, next, bySymbol)
		recs, err = s.readChanged(ctx, m, next, bySymbol, time.Time{})
	}
	if err != nil {
		return nil, err
	}
	instrument := s.sourceInstrument(m)
	for _, r := range recs {
		a := bySymbol[r.Symbol]
		if a == nil {
			a = &screen.Asset{Market: m, Symbol: r.Symbol, Exchange: r.Exchange, Instrument: r.Instrument}
			bySymbol[r.Symbol] = a
		}
		if r.Style == analytics.DefaultStyle || a.Exchange == "" {
			a.Exchange, a.Instrument = r.Exchange, r.Instrument
		}
		if a.Instrument == "" {
			a.Instrument = instrument
		}
		a.SetReport(r.Style, slimResult(r.Result))
		next.stamps[reportKey{r.Symbol, r.Style}] = r.UpdatedAt
		if r.UpdatedAt.After(next.newest) {
			next.newest = r.UpdatedAt
		}
	}
	if err := s.attachScreenerRows(ctx, m, bySymbol, next); err != nil {
		return nil, err
	}
	next.assets = make([]*screen.Asset, 0, len(bySymbol))
	for _, a := range bySymbol {
		a.Index()
		next.assets = append(next.assets, a)
	}
	slices.SortFunc(next.assets, func(a, b *screen.Asset) int { return strings.Compare(a.Symbol, b.Symbol) })
	if domain.Scored(s.cfg.Region, m, s.cfg.Served) && len(next.assets) == 0 {
		return nil, domain.Errorf(domain.EUNAVAILABLE, "the %s analytics are warming up: no asset scored yet since the start; "+
			"scoring starts as soon as its candles are stored (seconds); retry shortly", m)
	}
	return next, nil
}

// copyHeld copies prev's assets (each one's struct: its reports are
// shared, read-only) and stamps into next.
func copyHeld(prev, next *screenSnapshot, bySymbol map[string]*screen.Asset) {
	for _, a := range prev.assets {
		c := *a
		bySymbol[a.Symbol] = &c
	}
	for k, t := range prev.stamps {
		next.stamps[k] = t
	}
}

// readChanged compares the reports held in bySymbol with the market's
// reports written at since or later, and returns the results of the
// assets with one of those held at another version or not held at all
// (re-reading a result costs its JSON decoding: a minute's margin covers
// every report of a close). With the zero since, the list is every report
// of the market, and it also drops those no longer listed (the asset with
// its last one).
func (s *Server) readChanged(ctx context.Context, m domain.Market, next *screenSnapshot, bySymbol map[string]*screen.Asset, since time.Time) ([]store.AnalyticsRecord, error) {
	listed, err := s.analytics.AnalyticsStamps(ctx, m, since)
	if err != nil {
		return nil, err
	}
	seen := make(map[reportKey]bool, len(listed))
	var changed []string
	for _, l := range listed {
		k := reportKey{l.Symbol, l.Style}
		seen[k] = true
		if held, ok := next.stamps[k]; !ok || !held.Equal(l.UpdatedAt) {
			changed = append(changed, l.Symbol)
		}
	}
	for k := range next.stamps {
		if seen[k] || !since.IsZero() {
			continue
		}
		delete(next.stamps, k)
		if a := bySymbol[k.symbol]; a != nil {
			a.SetReport(k.style, nil)
			if !scoredInAny(a) {
				delete(bySymbol, k.symbol)
			}
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	slices.Sort(changed)
	return s.analytics.AnalyticsResultsOf(ctx, m, slices.Compact(changed))
}

func scoredInAny(a *screen.Asset) bool {
	for _, st := range analytics.Styles {
		if a.Report(st) != nil {
			return true
		}
	}
	return false
}

// attachScreenerRows sets each asset's screener row from the cached
// screener snapshot of its exchange's analytics combination.
func (s *Server) attachScreenerRows(ctx context.Context, m domain.Market, bySymbol map[string]*screen.Asset, next *screenSnapshot) error {
	combos := map[domain.Combination]map[string]*domain.Ticker{}
	for _, a := range bySymbol {
		a.Row = nil
		c := domain.Combination{Market: m, Exchange: a.Exchange, Instrument: a.Instrument}
		rows, seen := combos[c]
		if !seen {
			combos[c] = nil
			if _, ok := domain.LookupCombination(s.cfg.Region, m, c.Exchange, c.Instrument); !ok || !s.cfg.Served.Has(c) {
				continue
			}
			next.scopes = append(next.scopes, readcache.Tickers(c))
			next.gens = append(next.gens, s.cache.Generation(readcache.Tickers(c)))
			snap, err := readcache.Load(ctx, s.cache, readcache.TickerSnapshot(c), func(ctx context.Context) (tickerSnapshot, error) {
				return s.loadTickers(ctx, c)
			})
			if err != nil {
				if store.Unavailable(err) {
					return err
				}
				continue // no rows yet: the row fields are null
			}
			rows = make(map[string]*domain.Ticker, len(snap.rows))
			for i := range snap.rows {
				rows[snap.rows[i].Symbol] = &snap.rows[i]
			}
			combos[c] = rows
		}
		a.Row = rows[a.Symbol]
	}
	return nil
}

// slimResult is r without its texts (summary, explanations, scenario),
// which no expression reads: a market's snapshot holds every style's
// result of every asset.
func slimResult(r *analytics.Result) *analytics.Result {
	if r == nil {
		return nil
	}
	c := *r
	c.Summary = analytics.Message{}
	c.Scenario.Text, c.Scenario.Invalidation = analytics.Message{}, analytics.Message{}
	c.Factors = make([]analytics.Factor, len(r.Factors))
	for i, f := range r.Factors {
		f.Text = analytics.Message{}
		c.Factors[i] = f
	}
	return &c
}
