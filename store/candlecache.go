package store

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// CandleCache keeps, in a scoring worker, the newest candles of the series
// it read (CachedCandlesOf), with the series' version (migration 00023) at
// the read. A later read of the series asks Postgres, in one statement,
// for the version and only the candles from the kept newest one on: at a
// close that is the candle that closed and the one that opened, not 500.
//
// Nothing kept is ever served unless Postgres has the same candles: the
// kept older candles are used only when no change since the kept version
// touched them (a change of a series of a scored timeframe that touched a
// candle older than the series' newest is deep: it moves the version and
// is listed with the open times it touched; any other change is in the
// candles read from the kept newest on), and the version and the new
// candles are read in one snapshot. Otherwise the series is read in
// full, as without a cache. Several worker processes each keep their own;
// a process that dies loses only its cache.
//
// It holds at most a fixed number of series, dropping the least recently
// read; a series costs ≈ 48 bytes a candle (24 kB at 500), in arrays
// without pointers (nothing for the collector to scan). Safe for
// concurrent use.
type CandleCache struct {
	max int

	mu      sync.Mutex
	entries map[CandleKey]*list.Element // of *keptSeries
	order   list.List                   // most recently used first
}

// NewCandleCache returns a cache of at most series series (0: none kept).
func NewCandleCache(series int) *CandleCache {
	return &CandleCache{max: series, entries: map[CandleKey]*list.Element{}}
}

// Len is how many series are kept.
func (c *CandleCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// keptSeries is one series as read at a version: never changed once kept
// (a newer read replaces it), so a reader needs no lock to use it; its
// bars are the ones CachedCandlesOf hands out.
type keptSeries struct {
	key            CandleKey
	epoch, version int64
	limit          int
	bars           *domain.Bars
}

func (c *CandleCache) get(k CandleKey) *keptSeries {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*keptSeries)
	}
	return nil
}

func (c *CandleCache) put(s *keptSeries) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[s.key]; ok {
		e.Value = s
		c.order.MoveToFront(e)
		return
	}
	c.entries[s.key] = c.order.PushFront(s)
	for len(c.entries) > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*keptSeries).key)
	}
}

func (c *CandleCache) drop(k CandleKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.order.Remove(e)
		delete(c.entries, k)
	}
}

// versionedTimeframes are the timeframes whose series have versions: the
// timeframes of the scored styles (migration 00023 lists the same ones;
// a test checks that every scored timeframe is here).
var versionedTimeframes = []domain.Timeframe{domain.TF15m, domain.TF1h, domain.TF4h, domain.TF1d}

func candleVersioned(tf domain.Timeframe) bool { return slices.Contains(versionedTimeframes, tf) }

// seriesVersion is a series' version row as read with its candles, and
// the epoch: the candles table's relfilenode, which a TRUNCATE (the one
// change no row trigger sees) replaces. The statement reading it holds
// the table's ACCESS SHARE lock, so no TRUNCATE commits while it runs:
// the epoch and the candles are of one state of the table.
type seriesVersion struct {
	epoch, version, dropped int64
	deepVersions            []int64
	deepFrom, deepTo        []time.Time
}

// keep makes a series read at v a kept series.
func keep(k CandleKey, v seriesVersion, limit int, b *domain.Bars) *keptSeries {
	return &keptSeries{key: k, epoch: v.epoch, version: v.version, limit: limit, bars: b}
}

// since is the open time from which a read must bring the candles: the
// kept newest one.
func (s *keptSeries) since() time.Time { return s.bars.Time(s.bars.Len() - 1) }

// extend returns the newest limit candles of the series at v, from the
// kept ones and tail (the series' candles from s.since() on, oldest first,
// read with v in one snapshot), as new bars (the kept ones are shared and
// stay as they are); ok is false when the kept candles cannot be trusted
// at v (a full read is needed): another epoch, a version older than the
// kept one, a deep change since it that touched the kept candles before
// the tail (or one no longer listed), or fewer candles than a full series
// has.
func (s *keptSeries) extend(v seriesVersion, tail []domain.Candle, limit int) (*domain.Bars, bool) {
	kept := s.bars
	if v.epoch != s.epoch || v.version < s.version || v.dropped > s.version || limit != s.limit || kept.Len() == 0 {
		return nil, false
	}
	from, oldest := s.since(), kept.Time(0)
	full := kept.Len() == s.limit
	for i, dv := range v.deepVersions {
		if dv <= s.version {
			continue
		}
		// A change from the kept newest candle on is in the tail; one
		// wholly before the kept oldest cannot change the newest limit
		// candles of a full series.
		if !v.deepFrom[i].Before(from) || full && v.deepTo[i].Before(oldest) {
			continue
		}
		return nil, false
	}
	keptN := kept.Len() - 1 // every kept candle before the newest
	n := keptN + len(tail)
	if full && n < limit {
		return nil, false // candles of the tail were deleted: the series reaches further back
	}
	// The newest limit of the kept candles before the newest, then of the
	// tail: each column copied once, into one allocation for the prices.
	skip := max(n-limit, 0)
	k0 := min(skip, keptN)
	t0 := skip - k0
	m := n - skip
	buf := make([]float64, 0, 5*m)
	col := func(kc []float64, f func(domain.Candle) float64) []float64 {
		start := len(buf)
		buf = append(buf, kc[k0:keptN]...)
		for _, c := range tail[t0:] {
			buf = append(buf, f(c))
		}
		return buf[start:len(buf):len(buf)]
	}
	out := &domain.Bars{Times: make([]int64, 0, m)}
	out.Times = append(out.Times, kept.Times[k0:keptN]...)
	for _, c := range tail[t0:] {
		out.Times = append(out.Times, c.Time.UnixMicro())
	}
	out.Open = col(kept.Open, func(c domain.Candle) float64 { return c.Open })
	out.High = col(kept.High, func(c domain.Candle) float64 { return c.High })
	out.Low = col(kept.Low, func(c domain.Candle) float64 { return c.Low })
	out.Close = col(kept.Close, func(c domain.Candle) float64 { return c.Close })
	out.Volume = col(kept.Volume, func(c domain.Candle) float64 { return c.Volume })
	return out, true
}

// CandleReads counts how a CachedCandlesOf read was served.
type CandleReads struct {
	// Extended series were served from the cache and the candles from its
	// newest kept one on; Full series were read in full (not kept, or not
	// trusted).
	Extended, Full int
}

// CachedCandlesOf is CandlesOf through a CandleCache, by column: a series
// kept in the cache is read from its newest kept candle on, with its
// version, and served from the cache when the version says the older kept
// candles are still Postgres's; any other is read in full (in a second
// statement for those the version refused) and kept. A nil cache, or a
// timeframe without versions, reads as CandlesOf does. The bars are
// shared with the cache: the caller must not write into them.
func (db *DB) CachedCandlesOf(ctx context.Context, cache *CandleCache, m domain.Market, exchange string, tf domain.Timeframe,
	symbols []string, limit int) (map[string]*domain.Bars, CandleReads, error) {
	if cache == nil || cache.max <= 0 || !candleVersioned(tf) {
		cs, err := db.CandlesOf(ctx, m, exchange, tf, symbols, limit)
		out := make(map[string]*domain.Bars, len(cs))
		for sym, c := range cs {
			out[sym] = domain.BarsOf(c)
		}
		return out, CandleReads{Full: len(symbols)}, err
	}
	out := make(map[string]*domain.Bars, len(symbols))
	var reads CandleReads
	kept := make(map[string]*keptSeries, len(symbols))
	since := make([]*time.Time, len(symbols))
	for i, sym := range symbols {
		if s := cache.get(CandleKey{Market: m, Exchange: exchange, Symbol: sym, Timeframe: tf}); s != nil {
			kept[sym] = s
			t := s.since()
			since[i] = &t
		}
	}
	var refused []string
	err := db.versionedCandles(ctx, m, exchange, tf, symbols, since, limit, func(sym string, v seriesVersion, cs []domain.Candle) {
		k := CandleKey{Market: m, Exchange: exchange, Symbol: sym, Timeframe: tf}
		var b *domain.Bars
		if s := kept[sym]; s != nil {
			got, ok := s.extend(v, cs, limit)
			if !ok {
				cache.drop(k)
				refused = append(refused, sym)
				return
			}
			b = got
			reads.Extended++
		} else {
			reads.Full++
			b = domain.BarsOf(cs)
		}
		if b.Len() > 0 {
			out[sym] = b
			cache.put(keep(k, v, limit, b))
		}
	})
	if err != nil || len(refused) == 0 {
		return out, reads, err
	}
	reads.Full += len(refused)
	err = db.versionedCandles(ctx, m, exchange, tf, refused, make([]*time.Time, len(refused)), limit,
		func(sym string, v seriesVersion, cs []domain.Candle) {
			if len(cs) > 0 {
				b := domain.BarsOf(cs)
				out[sym] = b
				cache.put(keep(CandleKey{Market: m, Exchange: exchange, Symbol: sym, Timeframe: tf}, v, limit, b))
			}
		})
	return out, reads, err
}

// versionedCandles reads, in one statement (one snapshot), each symbol's
// series version and its newest limit candles from since on (nil: all),
// and hands them to each, oldest first. The version is looked up by its
// whole key (a lateral subquery kept apart by OFFSET 0): a join on market,
// exchange and timeframe was planned as a scan of every series of the
// exchange per statement.
func (db *DB) versionedCandles(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string,
	since []*time.Time, limit int, each func(sym string, v seriesVersion, cs []domain.Candle)) error {
	rows, err := db.Pool.Query(ctx, `SELECT s.symbol, pg_relation_filenode('candles')::bigint, coalesce(v.version, 0), coalesce(v.deep_dropped, 0),
			coalesce(v.deep_versions, '{}'), coalesce(v.deep_from, '{}'), coalesce(v.deep_to, '{}'), c.*, blk.packed
		FROM unnest($3::text[], $6::timestamptz[]) s(symbol, since)
		LEFT JOIN LATERAL (SELECT * FROM candle_series_versions
			WHERE market = $1 AND exchange = $2 AND symbol = s.symbol AND timeframe = $4 OFFSET 0) v ON true
		CROSS JOIN LATERAL (SELECT `+candleArraysSelect+`
			FROM (SELECT open_time, open, high, low, close, volume FROM candles
				WHERE market = $1 AND exchange = $2 AND symbol = s.symbol AND timeframe = $4
					AND open_time >= coalesce(s.since, '-infinity')
				ORDER BY open_time DESC LIMIT $5) newest) c
		CROSS JOIN LATERAL `+candleBlocksLateral("s.symbol", "s.since"),
		string(m), exchange, symbols, string(tf), limit, since)
	if err != nil {
		return translate(err, "candles")
	}
	defer rows.Close()
	from := make(map[string]time.Time, len(symbols))
	for i, t := range since {
		if t != nil {
			from[symbols[i]] = *t
		}
	}
	for rows.Next() {
		var sym string
		var v seriesVersion
		var a candleArrays
		if err := rows.Scan(append([]any{&sym, &v.epoch, &v.version, &v.dropped, &v.deepVersions, &v.deepFrom, &v.deepTo}, a.dest()...)...); err != nil {
			return translate(err, "candles")
		}
		if len(v.deepVersions) != len(v.deepFrom) || len(v.deepFrom) != len(v.deepTo) {
			return fmt.Errorf("store: candles of %s: version lists of different lengths", sym)
		}
		cs, err := a.candles(sym, limit)
		if err != nil {
			return err
		}
		if t, ok := from[sym]; ok && len(a.blocks) > 0 {
			// a block holds candles older than since too
			cs = cs[sort.Search(len(cs), func(i int) bool { return !cs[i].Time.Before(t) }):]
		}
		each(sym, v, cs)
	}
	return translate(rows.Err(), "candles")
}
