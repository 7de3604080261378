package worker

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/store"
)

// candleSink batches pushed candles by series and open time (the newest
// state of each wins) and stores them every FlushEvery, or at once when a
// candle closes; a series whose only news is its open candle waits until
// OpenEvery has passed since its last write. A series is held (its pushes
// kept, the newest state per open time) until it is released, once its
// timeframe's REST catch-up is done.
type candleSink struct {
	s    *PushIngest
	kick chan struct{}

	mu       sync.Mutex
	pending  map[store.CandleKey]map[time.Time]domain.Candle
	closed   map[store.CandleKey]time.Time // pending holds closed candles: the newest one's open time
	openNext map[store.CandleKey]time.Time // when an open-candle-only write is due
	healthy  map[store.CandleKey]time.Time // per (market, exchange, timeframe): last feed-health record
	released map[store.CandleKey]bool
	// retry holds the closed candles whose write failed, until a write of
	// them succeeds (retryDue): at most retryKeep per series, the newest.
	retry      map[store.CandleKey]map[time.Time]domain.Candle
	retryAt    time.Time     // when the next retry is due
	retryDelay time.Duration // the back-off after the last failure
	retryMax   int           // retryKeep, or a test's
	// lost is, by series, the oldest closed candle dropped from retry past
	// its bound, and how many were: read again over REST (reload) once a
	// write succeeds, since neither REST nor the push feed would store them.
	lost      map[store.CandleKey]lostCandles
	reloading bool
	combos    map[store.CandleKey]domain.Combination // each series' combination, from its pushes
}

// lostCandles are the closed candles of a series dropped from the retries.
type lostCandles struct {
	since time.Time
	n     int
}

// retryKeep bounds the closed candles kept per series while their writes
// fail (two hours of the 1m series); older ones are dropped (counted in
// the warning) and read again over REST once a write succeeds (reload).
const retryKeep = 120

// retryMin and retryMax bound the back-off between retries of failed
// closed-candle writes.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
)

func newCandleSink(s *PushIngest) *candleSink {
	return &candleSink{s: s, kick: make(chan struct{}, 1), pending: map[store.CandleKey]map[time.Time]domain.Candle{},
		closed: map[store.CandleKey]time.Time{}, openNext: map[store.CandleKey]time.Time{}, healthy: map[store.CandleKey]time.Time{},
		released: map[store.CandleKey]bool{}, retry: map[store.CandleKey]map[time.Time]domain.Candle{},
		retryMax: retryKeep, lost: map[store.CandleKey]lostCandles{}, combos: map[store.CandleKey]domain.Combination{}}
}

// release lets series of c be stored and flushes what they hold.
func (k *candleSink) release(c domain.Combination, series []push.Series) {
	k.mu.Lock()
	for _, se := range series {
		k.released[store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: se.Symbol, Timeframe: se.Timeframe}] = true
	}
	k.mu.Unlock()
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *candleSink) add(u push.CandleUpdate) { k.addAll([]push.CandleUpdate{u}) }

// addAll takes several updates at once (an in-process read of every series
// of a timeframe): a closed candle among them starts one write of them all.
func (k *candleSink) addAll(us []push.CandleUpdate) {
	closed := false
	k.mu.Lock()
	for _, u := range us {
		if !u.Combination.HasCandles() {
			continue
		}
		key := store.CandleKey{Market: u.Combination.Market, Exchange: u.Combination.Exchange, Symbol: u.Symbol, Timeframe: u.Timeframe}
		if k.pending[key] == nil {
			k.pending[key] = map[time.Time]domain.Candle{}
			k.combos[key] = u.Combination
		}
		k.pending[key][u.Candle.Time] = u.Candle
		if u.Closed {
			if t, ok := k.closed[key]; !ok || u.Candle.Time.After(t) {
				k.closed[key] = u.Candle.Time
			}
			closed = true
		}
	}
	k.mu.Unlock()
	if closed {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
}

func (k *candleSink) run(ctx context.Context) {
	every := k.s.FlushEvery
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			k.flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
		case <-k.kick:
		}
		k.flush(ctx)
	}
}

// flush stores what is pending, the closed candles first and in a write
// of their own: at a minute close every series of an exchange may be due,
// and the closed candles are the ones readers wait for. A failed write of
// closed candles is kept and retried with back-off (retry), in a write of
// its own so that a statement failing again does not take the next
// close's candles with it: while a series streams, REST does not load it,
// and nothing else would store its final state. A failed write of open
// candles is dropped: the next push of the same candle replaces it.
func (k *candleSink) flush(ctx context.Context) {
	closed, open := k.due()
	stored := false
	if err := k.write(ctx, closed, true); err != nil {
		k.keep(closed, err)
	} else {
		k.forget(closed)
		stored = len(closed) > 0
	}
	k.write(ctx, open, false)
	if retry := k.retryDue(); len(retry) > 0 {
		if err := k.write(ctx, retry, true); err != nil {
			k.keep(retry, err)
		} else {
			stored = true
			k.mu.Lock()
			k.retryDelay = 0
			k.mu.Unlock()
			k.s.logger().Info("push: stored closed candles after failed writes", "series", len(retry))
		}
	}
	k.mu.Lock()
	n := 0
	for _, kept := range k.retry {
		n += len(kept)
	}
	k.mu.Unlock()
	obs.PushRetryCandles(n)
	if stored {
		k.reload(ctx)
	}
}

// reload reads again over REST, in the background, the closed candles
// dropped from the retries (lost), from the oldest of each series on:
// writes succeed again, and nothing else would store them.
func (k *candleSink) reload(ctx context.Context) {
	k.mu.Lock()
	if k.reloading || len(k.lost) == 0 {
		k.mu.Unlock()
		return
	}
	lost := k.lost
	k.lost = map[store.CandleKey]lostCandles{}
	k.reloading = true
	type seriesOf struct {
		c  domain.Combination
		tf domain.Timeframe
	}
	groups := map[seriesOf]map[string]time.Time{}
	for key, l := range lost {
		g := seriesOf{k.combos[key], key.Timeframe}
		if groups[g] == nil {
			groups[g] = map[string]time.Time{}
		}
		groups[g][key.Symbol] = l.since
	}
	k.mu.Unlock()
	go func() {
		for g, from := range groups {
			_, err := k.s.In.IngestCandlesFrom(ctx, g.c, g.tf, slices.Collect(maps.Keys(from)), from)
			k.mu.Lock()
			if err != nil {
				for sym, since := range from {
					key := store.CandleKey{Market: g.c.Market, Exchange: g.c.Exchange, Symbol: sym, Timeframe: g.tf}
					k.lose(key, since, lost[key].n)
				}
			}
			k.mu.Unlock()
			if err != nil {
				k.s.logger().Warn("push: reloading dropped closed candles failed; retried after the next stored write",
					"combination", g.c.String(), "timeframe", string(g.tf), "series", len(from), "err", err)
				continue
			}
			n := 0
			for sym := range from {
				n += lost[store.CandleKey{Market: g.c.Market, Exchange: g.c.Exchange, Symbol: sym, Timeframe: g.tf}].n
			}
			obs.PushCandlesReloaded(n)
			k.s.logger().Info("push: reloaded closed candles dropped while writes failed",
				"combination", g.c.String(), "timeframe", string(g.tf), "series", len(from), "candles", n)
		}
		k.mu.Lock()
		k.reloading = false
		k.mu.Unlock()
	}()
}

// lose records n closed candles of key from since on as dropped (k.mu held).
func (k *candleSink) lose(key store.CandleKey, since time.Time, n int) {
	l, ok := k.lost[key]
	if !ok || since.Before(l.since) {
		l.since = since
	}
	l.n += n
	k.lost[key] = l
}

// keep holds closed candles whose write failed for a retry, and pushes
// the next retry back.
func (k *candleSink) keep(failed map[store.CandleKey]map[time.Time]domain.Candle, err error) {
	if len(failed) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	dropped := 0
	for key, byTime := range failed {
		kept := k.retry[key]
		if kept == nil {
			kept = map[time.Time]domain.Candle{}
			k.retry[key] = kept
		}
		for t, c := range byTime {
			kept[t] = c
		}
		for len(kept) > k.retryMax {
			oldest := slices.MinFunc(slices.Collect(maps.Keys(kept)), time.Time.Compare)
			delete(kept, oldest)
			k.lose(key, oldest, 1)
			dropped++
		}
	}
	k.retryDelay = min(max(2*k.retryDelay, retryMin), retryMax)
	k.retryAt = time.Now().Add(k.retryDelay)
	k.s.logger().Warn("push: storing closed candles failed; kept for a retry", "series", len(failed),
		"retry_in", k.retryDelay, "dropped_oldest", dropped, "err", err)
}

// forget drops from the retries the candles a write has just stored.
func (k *candleSink) forget(written map[store.CandleKey]map[time.Time]domain.Candle) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, byTime := range written {
		kept := k.retry[key]
		if kept == nil {
			continue
		}
		for t := range byTime {
			delete(kept, t)
		}
		if len(kept) == 0 {
			delete(k.retry, key)
		}
	}
}

// retryDue takes the closed candles kept for a retry once it is due.
func (k *candleSink) retryDue() map[store.CandleKey]map[time.Time]domain.Candle {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.retry) == 0 || time.Now().Before(k.retryAt) {
		return nil
	}
	out := k.retry
	k.retry = map[store.CandleKey]map[time.Time]domain.Candle{}
	return out
}

// write stores pending series through ingest's one path for candles
// (candleWrite: the api caches dropped right after each commit, the score
// trigger told at once) and, once stored, records the feeds' health: a
// feed whose pushes cannot be stored gets no success recorded, so its
// health turns stale instead of reading current.
func (k *candleSink) write(ctx context.Context, pending map[store.CandleKey]map[time.Time]domain.Candle, closed bool) error {
	if len(pending) == 0 {
		return nil
	}
	start := time.Now()
	series := make(map[store.CandleKey][]domain.Candle, len(pending))
	for key, byTime := range pending {
		series[key] = slices.SortedFunc(maps.Values(byTime), func(a, b domain.Candle) int { return a.Time.Compare(b.Time) })
	}
	// A write of closed candles holds, per series, the ones up to its
	// newest closing push: final (store.UpsertChangedCandles). An open
	// write holds none, not even a candle that has ended since its last
	// push (its closing push is on its way).
	var final map[store.CandleKey]time.Time
	if closed {
		final = make(map[store.CandleKey]time.Time, len(series))
		for key, cs := range series {
			final[key] = cs[len(cs)-1].Time
		}
	}
	write := k.s.In.newCandleWrite()
	write.step = func(step string, n int) { k.logWrite(start, step, n, closed) }
	err := write.store(ctx, series, final)
	write.announce(ctx)
	if err != nil {
		if !closed {
			k.s.logger().Warn("push: storing open candles failed", "series", len(series), "err", err)
		}
		return err
	}
	k.recordHealth(ctx, pending)
	k.logWrite(start, "written", len(pending), closed)
	return nil
}

// logWrite logs the steps of a write at debug level with the time into
// the minute, so the way from a minute close to the stored closed candles
// can be followed in a deployment's log.
func (k *candleSink) logWrite(start time.Time, step string, series int, closed bool) {
	now := time.Now()
	k.s.logger().Debug("push: candles "+step, "series", series, "with_closed", closed,
		"began_into_minute", start.Sub(start.Truncate(time.Minute)), "took", now.Sub(start))
}

// due takes the pending series to write now: the closed candles, and
// the open ones of the series with a closed candle or whose open-candle
// write is due. The open candle that follows a closed one goes with the
// open candles: at a minute close it is a new row in every series, and
// the closed candles' write is the one readers wait for.
func (k *candleSink) due() (closed, open map[store.CandleKey]map[time.Time]domain.Candle) {
	openEvery := k.s.OpenEvery
	if openEvery <= 0 {
		openEvery = 10 * time.Second
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	closed, open = map[store.CandleKey]map[time.Time]domain.Candle{}, map[store.CandleKey]map[time.Time]domain.Candle{}
	for key, byTime := range k.pending {
		last, hasClosed := k.closed[key]
		if !k.released[key] || !hasClosed && now.Before(k.openNext[key]) {
			continue
		}
		for t, c := range byTime {
			to := open
			if hasClosed && !t.After(last) {
				to = closed
			}
			if to[key] == nil {
				to[key] = map[time.Time]domain.Candle{}
			}
			to[key][t] = c
		}
		delete(k.pending, key)
		delete(k.closed, key)
		k.openNext[key] = now.Add(openEvery)
	}
	return closed, open
}

// recordHealth marks the candle feeds of the series written healthy
// (recordCandleHealth), at most once a minute per timeframe, unless
// closed candles of the timeframe wait for a retry of a failed write.
func (k *candleSink) recordHealth(ctx context.Context, written map[store.CandleKey]map[time.Time]domain.Candle) {
	now := k.s.In.Now()
	seen := map[store.CandleKey]bool{}
	k.mu.Lock()
	for key := range k.retry {
		seen[store.CandleKey{Market: key.Market, Exchange: key.Exchange, Timeframe: key.Timeframe}] = true
	}
	k.mu.Unlock()
	for key := range written {
		h := store.CandleKey{Market: key.Market, Exchange: key.Exchange, Timeframe: key.Timeframe}
		if seen[h] {
			continue
		}
		seen[h] = true
		if now.Sub(k.healthy[h]) < time.Minute {
			continue
		}
		k.healthy[h] = now
		k.s.In.recordCandleHealth(ctx, key.Market, key.Exchange, key.Timeframe, nil)
	}
}

// tickerSink keeps the newest row of every symbol per combination (the
// all-market streams send only the rows that changed) and replaces the
// stored screener rows with them every TickerFlushEvery.
type tickerSink struct {
	s *PushIngest

	mu    sync.Mutex
	rows  map[domain.Combination]map[string]domain.Ticker
	dirty map[domain.Combination]bool
}

func newTickerSink(s *PushIngest) *tickerSink {
	return &tickerSink{s: s, rows: map[domain.Combination]map[string]domain.Ticker{}, dirty: map[domain.Combination]bool{}}
}

func (k *tickerSink) add(c domain.Combination, ts []domain.Ticker) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rows[c] == nil {
		k.rows[c] = map[string]domain.Ticker{}
	}
	for _, t := range ts {
		k.rows[c][t.Symbol] = t
	}
	k.dirty[c] = true
}

func (k *tickerSink) run(ctx context.Context) {
	every := k.s.TickerFlushEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.flush(ctx)
	}
}

// flush replaces the rows of every combination that changed. The rows the
// push feed has not pushed yet are taken from the store (the REST snapshot),
// so a quiet symbol does not drop out of the screener.
func (k *tickerSink) flush(ctx context.Context) {
	k.mu.Lock()
	var todo []domain.Combination
	for c := range k.dirty {
		todo = append(todo, c)
	}
	clear(k.dirty)
	k.mu.Unlock()
	in := k.s.In
	for _, c := range todo {
		stored, err := in.Store.Tickers(ctx, c)
		if err != nil {
			k.s.logger().Warn("push: reading tickers failed", "combination", c.String(), "err", err)
			continue
		}
		merged := make(map[string]domain.Ticker, len(stored))
		for _, t := range stored {
			merged[t.Symbol] = t
		}
		k.mu.Lock()
		for sym, t := range k.rows[c] {
			if old, ok := merged[sym]; !ok || t.UpdatedAt.After(old.UpdatedAt) {
				merged[sym] = t
			}
		}
		k.mu.Unlock()
		if err := in.storeTickers(ctx, c, slices.Collect(maps.Values(merged))); err != nil {
			k.s.logger().Warn("push: storing tickers failed", "combination", c.String(), "err", err)
		}
	}
}
