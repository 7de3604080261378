package push

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// Source delivers the updates of a set of plans: the exchanges' websockets
// (Manager) or a feed computed in process (Local).
type Source interface {
	// Run follows the plans until ctx ends.
	Run(ctx context.Context, plans []Plan) error
	// Live reports whether every series of the combination is being
	// delivered, so a caller can fall back to REST polling while it is not.
	Live(c domain.Combination) bool
}

var (
	_ Source = (*Manager)(nil)
	_ Source = (*Local)(nil)
)

// CandleReader reads the candles of an in-process feed: the Candles method
// of feeds.Provider.
type CandleReader interface {
	Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error)
}

// LocalConfig configures a Local.
type LocalConfig struct {
	// Feed is read for every followed series.
	Feed CandleReader
	// OnCandles receives the updates of one timeframe's series, every
	// series of the plans read at one close, in one call: a sink then
	// stores the minute's closed 1m candles in one write, right after
	// they are read, instead of starting on the first series alone.
	OnCandles func([]CandleUpdate)
	// Now is the clock the feed's candles follow; nil means time.Now.
	Now func() time.Time
	// Ticks, when set, drives the reads: one per value received (tests);
	// nil means a read at every minute close of Now (UTC).
	Ticks <-chan time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Local follows the candle series of a feed computed in process (the
// synthetic one) as a websocket would push them. At every minute close it
// reads each series from the candle that was open at the previous read:
// the candles that closed since are delivered with Closed set, then the
// open one. Series go shortest timeframe first, each timeframe's updates
// handed over together, so the minute's closed 1m candles reach OnCandles
// within milliseconds of the close. Reading costs
// no request, so there are no connections, limits or gaps: the plans are
// live from the start and Config.Repair has nothing to do.
//
// Every series is read once a minute, as the scheduled REST ingest reads
// it: the open candles of the longer timeframes move as often as the REST
// poll moved them, and no more is computed or written.
type Local struct {
	cfg LocalConfig

	mu   sync.Mutex
	live map[domain.Combination]bool
}

// NewLocal returns a Local; Run starts it.
func NewLocal(cfg LocalConfig) *Local {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OnCandles == nil {
		cfg.OnCandles = func([]CandleUpdate) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Local{cfg: cfg, live: map[domain.Combination]bool{}}
}

// Run reads the plans' series at once and then at every tick, until ctx
// ends. Tickers are not delivered: the feed's scheduled ticker refresh
// costs no request either.
func (l *Local) Run(ctx context.Context, plans []Plan) error {
	byTF := map[domain.Timeframe][]localSeries{}
	for _, p := range plans {
		for _, s := range p.Series {
			if s.Timeframe.Duration() <= 0 {
				continue
			}
			byTF[s.Timeframe] = append(byTF[s.Timeframe], localSeries{p.Combination, s})
		}
	}
	l.mu.Lock()
	clear(l.live)
	for _, p := range plans {
		l.live[p.Combination] = true
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		clear(l.live)
		l.mu.Unlock()
	}()
	var prev time.Time
	var us []CandleUpdate
	for {
		now := l.cfg.Now().UTC()
		start := time.Now()
		for _, tf := range domain.Timeframes {
			us = us[:0]
			for _, s := range byTF[tf] {
				if ctx.Err() != nil {
					return nil
				}
				us = l.read(ctx, s, prev, now, us)
			}
			if len(us) > 0 {
				l.cfg.OnCandles(slices.Clone(us))
			}
			if tf == domain.TF1m {
				l.cfg.Logger.Debug("push: in-process 1m candles read", "series", len(byTF[tf]),
					"at_into_minute", now.Sub(now.Truncate(time.Minute)), "took", time.Since(start))
			}
		}
		l.cfg.Logger.Debug("push: in-process feed read", "at_into_minute", now.Sub(now.Truncate(time.Minute)), "took", time.Since(start))
		prev = now
		if !l.wait(ctx) {
			return nil
		}
	}
}

// Live implements Source: every combination of the running plans.
func (l *Local) Live(c domain.Combination) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live[c]
}

type localSeries struct {
	c domain.Combination
	Series
}

// read appends to us one series' candles from the one open at prev (on
// the first read, the last closed one) up to the one open at now.
func (l *Local) read(ctx context.Context, s localSeries, prev, now time.Time, us []CandleUpdate) []CandleUpdate {
	dur := s.Timeframe.Duration()
	since := s.Timeframe.Truncate(prev)
	if prev.IsZero() {
		since = s.Timeframe.Truncate(now).Add(-dur)
	}
	limit := min(int(now.Sub(since)/dur)+2, 1000)
	cs, err := l.cfg.Feed.Candles(ctx, s.c, s.Symbol, s.Timeframe, since, limit)
	if err != nil {
		l.cfg.Logger.Warn("push: reading the in-process feed failed", "combination", s.c.String(), "symbol", s.Symbol, "timeframe", string(s.Timeframe), "err", err)
		return us
	}
	for _, c := range cs {
		// A candle ended by now is final: the feed built it at its own
		// clock, read after now.
		closed := !c.Time.Add(dur).After(now)
		us = append(us, CandleUpdate{Combination: s.c, Symbol: s.Symbol, Timeframe: s.Timeframe, Candle: c, Closed: closed})
	}
	return us
}

// wait blocks until the next tick; false when ctx ended first.
func (l *Local) wait(ctx context.Context) bool {
	if l.cfg.Ticks != nil {
		select {
		case <-ctx.Done():
			return false
		case <-l.cfg.Ticks:
			return true
		}
	}
	now := l.cfg.Now()
	t := time.NewTimer(now.Truncate(time.Minute).Add(time.Minute).Sub(now))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
