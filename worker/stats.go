package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// TypeStats computes the verdict and factor statistics of a market.
const TypeStats = "stats"

// StatsPayload names a statistics task's market and tick.
type StatsPayload struct {
	Market domain.Market `json:"market"`
	Tick   time.Time     `json:"tick"`
}

// NewStatsTask builds the task that computes a market's statistics.
func NewStatsTask(m domain.Market, tick time.Time) *asynq.Task {
	return newTask(TypeStats, StatsPayload{Market: m, Tick: tick.UTC()})
}

// StatsStore is what the statistics job reads and writes.
type StatsStore interface {
	CandleSymbols(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe) ([]string, error)
	Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error)
	Candles(ctx context.Context, k store.CandleKey, limit int) ([]domain.Candle, error)
	CandleSeriesVersions(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, symbols []string) (map[string]store.SeriesVersion, error)
	SnapshotVerdictsSince(ctx context.Context, m domain.Market, style analytics.Style, since time.Time) (map[string][]store.AnalyticsSnapshot, error)
	StatsStateOf(ctx context.Context, m domain.Market) (store.StatsState, error)
	StatsDaysOf(ctx context.Context, m domain.Market, source string, days []int) ([]store.StatsDay, error)
	EachStatsDaySinceTotal(ctx context.Context, m domain.Market, source string, total func(store.StatsTotal) error, fn func(store.StatsDay) error) (int64, error)
	SaveStatsTotal(ctx context.Context, m domain.Market, t store.StatsTotal, generation int64) (bool, error)
	SaveStatsState(ctx context.Context, m domain.Market, u store.StatsUpdate) error
	SaveStats(ctx context.Context, m domain.Market, source string, verdicts []stats.VerdictStat, factors []stats.FactorStat, assets int, at time.Time) error
}

// StatsJob computes the statistics of DESIGN §3 from every stored daily
// candle of the market's analytics sources, of every asset with candles,
// delisted ones included up to their last day:
//
//   - backtest: the scorer is replayed over each asset's daily history (the
//     verdict of every bar, with hysteresis, from the 300 candles up to it),
//     and each bar's verdict and factors are judged against the forward
//     returns 1, 5, 21 and 30 days later;
//   - live: the verdicts the service published (the default style's
//     snapshots; a day's verdict is the last one published by its close)
//     are judged the same way. Days without a published verdict only feed
//     the base rate.
//
// Each observation is filed under its bar's day, so that the intervals and
// significance account for the overlap of forward returns and for assets
// moving together (see domain/stats, effective.go). The two sources stay
// separate records.
//
// The job is incremental (statshist.go): the observations of each day are
// kept in Postgres, and a run reads only the candles closed since the last
// one, with the few hundred before them that the scorer and the median
// move need. A corrected older candle (a deep change of its series)
// invalidates the days from 30 bars before it on, which are judged again.
// The records are the merge of every stored day, equal to one pass over
// the whole history.
type StatsJob struct {
	Store  StatsStore
	Region string
	// Served is what the deployment's feeds serve (nil: every combination
	// of the region's catalogue); it picks the analytics source.
	Served domain.Served
	Logger *slog.Logger
	Now    func() time.Time
	Notify func(ctx context.Context, s readcache.Scope)
	// Workers is how many assets are judged at once (0: one).
	Workers int
	// Chunk is how many assets are saved at a time (0: 100).
	Chunk int
}

// Register adds the statistics handler to a worker.
func (j *StatsJob) Register(w *Worker) {
	w.Handle(TypeStats, asynq.HandlerFunc(j.HandleStats))
}

// HandleStats computes and stores one market's statistics. It replaces the
// stored records, so running it twice leaves the same rows.
func (j *StatsJob) HandleStats(ctx context.Context, t *asynq.Task) error {
	var p StatsPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("worker: %s: bad payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	if _, ok := domain.ParseMarket(string(p.Market)); !ok {
		return fmt.Errorf("worker: %s: bad market %q: %w", t.Type(), p.Market, asynq.SkipRetry)
	}
	assets, err := j.Compute(ctx, p.Market)
	if err != nil {
		return err
	}
	if domain.Scored(j.Region, p.Market, j.Served) && assets == 0 {
		// Right after a start the daily candles are still being ingested:
		// let asynq retry in a few seconds rather than wait for the next tick.
		return fmt.Errorf("worker: statistics of %s: no daily candles yet; retrying", p.Market)
	}
	return nil
}
