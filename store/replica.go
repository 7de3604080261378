package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// ReadRouter sends the api's market-data and analytics reads to a
// streaming replica while it is at most MaxLag behind the primary, and
// to the primary otherwise. Everything else (keys, quota, webhooks,
// every write) is the primary's and never goes through it.
//
// The lag is measured, not trusted from the replica's clock: every
// probe reads the primary's WAL position (pg_current_wal_lsn) and the
// replica's replayed position (pg_last_wal_replay_lsn); the replica is
// as fresh as the newest primary position it has replayed, so its lag
// is the age of that reading. An idle primary therefore shows no lag
// (its position does not move), and a replica whose replay stalls shows
// it growing at once. While the primary does not answer (a failover),
// the replica keeps serving at its last measured lag: nothing newer
// exists to be behind, and its answers carry their own as_of and age.
// A replica that was promoted (not in recovery) is a primary: no lag.
type ReadRouter struct {
	Primary, Replica *DB
	MaxLag           time.Duration
	// Every is the probe's period (500 ms when 0).
	Every time.Duration

	lagNanos  atomic.Int64 // math.MaxInt64: unknown or unreachable
	onReplica atomic.Bool
	routed    [2]atomic.Int64 // reads sent to the primary [0] and the replica [1]

	mu      sync.Mutex
	samples []lsnSample // the primary's positions, oldest first
}

type lsnSample struct {
	at  time.Time
	lsn uint64
}

// NewReadRouter returns a router that sends reads to the primary until
// its first probe.
func NewReadRouter(primary, replica *DB, maxLag time.Duration) *ReadRouter {
	r := &ReadRouter{Primary: primary, Replica: replica, MaxLag: maxLag}
	r.lagNanos.Store(math.MaxInt64)
	return r
}

// Run probes the lag until ctx ends.
func (r *ReadRouter) Run(ctx context.Context) error {
	every := r.Every
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r.Probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Probe measures the replica's lag once and routes the reads after it.
func (r *ReadRouter) Probe(ctx context.Context) {
	now := time.Now()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var primaryLSN string
	primaryUp := r.Primary.Pool.QueryRow(pctx, `SELECT pg_current_wal_lsn()::text`).Scan(&primaryLSN) == nil
	if primaryUp {
		if lsn, err := parseLSN(primaryLSN); err == nil {
			r.mu.Lock()
			r.samples = append(r.samples, lsnSample{now, lsn})
			// Keep what can still name a lag within twice the bound.
			cut := 0
			for cut < len(r.samples)-1 && now.Sub(r.samples[cut+1].at) > 2*r.MaxLag {
				cut++
			}
			r.samples = r.samples[cut:]
			r.mu.Unlock()
		}
	}
	var replayed *string
	var recovering bool
	if err := r.Replica.Pool.QueryRow(pctx, `SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text`).Scan(&recovering, &replayed); err != nil {
		r.setLag(math.MaxInt64) // the replica does not answer: the primary serves
		return
	}
	switch {
	case !recovering: // promoted: a primary of its own
		r.setLag(0)
	case replayed == nil:
		r.setLag(math.MaxInt64)
	case !primaryUp:
		// Keep the last measured lag: the primary writes nothing newer.
		r.setLag(r.lagNanos.Load())
	default:
		lsn, err := parseLSN(*replayed)
		if err != nil {
			r.setLag(math.MaxInt64)
			return
		}
		r.setLag(r.lagAt(now, lsn))
	}
}

// lagAt is how far behind a replica that replayed up to lsn is at now:
// the age of the newest primary reading it has reached.
func (r *ReadRouter) lagAt(now time.Time, lsn uint64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.samples) - 1; i >= 0; i-- {
		if r.samples[i].lsn <= lsn {
			if i == len(r.samples)-1 {
				return 0 // at the primary's position as just read
			}
			return int64(now.Sub(r.samples[i+1].at)) // it has not reached the next reading
		}
	}
	return math.MaxInt64 // behind every reading kept
}

func (r *ReadRouter) setLag(n int64) {
	r.lagNanos.Store(n)
	r.onReplica.Store(n <= int64(r.MaxLag))
}

// Lag is the replica's last measured lag (ok false: unknown, or the
// replica does not answer).
func (r *ReadRouter) Lag() (time.Duration, bool) {
	n := r.lagNanos.Load()
	return time.Duration(n), n != math.MaxInt64
}

// Routed counts the reads sent to the primary and to the replica.
func (r *ReadRouter) Routed() (primary, replica int64) {
	return r.routed[0].Load(), r.routed[1].Load()
}

func (r *ReadRouter) db() *DB {
	if r.onReplica.Load() {
		r.routed[1].Add(1)
		return r.Replica
	}
	r.routed[0].Add(1)
	return r.Primary
}

// parseLSN reads a pg_lsn's text form ("16/B374D848").
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("store: bad lsn %q", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("store: bad lsn %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("store: bad lsn %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// The api's market-data reads.

func (r *ReadRouter) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	return r.db().Tickers(ctx, c)
}

func (r *ReadRouter) Candles(ctx context.Context, k CandleKey, limit int) ([]domain.Candle, error) {
	return r.db().Candles(ctx, k, limit)
}

func (r *ReadRouter) CandleSymbols(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe) ([]string, error) {
	return r.db().CandleSymbols(ctx, m, exchange, tf)
}

func (r *ReadRouter) FeedHealthOf(ctx context.Context, c domain.Combination, kind string) (FeedHealth, error) {
	return r.db().FeedHealthOf(ctx, c, kind)
}

// The api's analytics reads.

func (r *ReadRouter) AnalyticsList(ctx context.Context, m domain.Market, style analytics.Style) ([]AnalyticsRecord, error) {
	return r.db().AnalyticsList(ctx, m, style)
}

func (r *ReadRouter) AnalyticsResults(ctx context.Context, m domain.Market, since time.Time) ([]AnalyticsRecord, error) {
	return r.db().AnalyticsResults(ctx, m, since)
}

func (r *ReadRouter) AnalyticsStamps(ctx context.Context, m domain.Market, since time.Time) ([]AnalyticsStamp, error) {
	return r.db().AnalyticsStamps(ctx, m, since)
}

func (r *ReadRouter) AnalyticsResultsOf(ctx context.Context, m domain.Market, symbols []string) ([]AnalyticsRecord, error) {
	return r.db().AnalyticsResultsOf(ctx, m, symbols)
}

func (r *ReadRouter) AnalyticsReport(ctx context.Context, m domain.Market, symbol string, style analytics.Style) (AnalyticsRecord, error) {
	return r.db().AnalyticsReport(ctx, m, symbol, style)
}

func (r *ReadRouter) TopSetups(ctx context.Context, markets []domain.Market, verdict analytics.Verdict, style analytics.Style, limit int) ([]AnalyticsRecord, error) {
	return r.db().TopSetups(ctx, markets, verdict, style, limit)
}

func (r *ReadRouter) AnalyticsHistory(ctx context.Context, m domain.Market, symbol string, style analytics.Style, limit int) ([]AnalyticsSnapshot, error) {
	return r.db().AnalyticsHistory(ctx, m, symbol, style, limit)
}

func (r *ReadRouter) AnalyticsHistoryRange(ctx context.Context, q HistoryRange) ([]AnalyticsSnapshot, error) {
	return r.db().AnalyticsHistoryRange(ctx, q)
}

func (r *ReadRouter) Stats(ctx context.Context, m domain.Market) (MarketStats, error) {
	return r.db().Stats(ctx, m)
}

func (r *ReadRouter) AnalyticsReportAsOf(ctx context.Context, m domain.Market, symbol string, style analytics.Style, at time.Time) (AnalyticsRecord, error) {
	return r.db().AnalyticsReportAsOf(ctx, m, symbol, style, at)
}

func (r *ReadRouter) ArchiveStart(ctx context.Context, m domain.Market, symbol string, style analytics.Style) (time.Time, bool, error) {
	return r.db().ArchiveStart(ctx, m, symbol, style)
}

func (r *ReadRouter) StatsAsOf(ctx context.Context, m domain.Market, at time.Time) (MarketStats, error) {
	return r.db().StatsAsOf(ctx, m, at)
}
