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

// statsCandles is how many daily candles of an asset the backtest replays.
const statsCandles = 400

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
	SnapshotVerdicts(ctx context.Context, m domain.Market, style analytics.Style) (map[string][]store.AnalyticsSnapshot, error)
	SaveStats(ctx context.Context, m domain.Market, source string, verdicts []stats.VerdictStat, factors []stats.FactorStat, assets int, at time.Time) error
}

// StatsJob computes the statistics of DESIGN §3 from the daily candles of
// the market's analytics source:
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
type StatsJob struct {
	Store  StatsStore
	Region string
	// Served is what the deployment's feeds serve (nil: every combination
	// of the region's catalogue); it picks the analytics source.
	Served domain.Served
	Logger *slog.Logger
	Now    func() time.Time
	Notify func(ctx context.Context, s readcache.Scope)
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

// Compute computes and stores a market's statistics and returns how many
// assets they cover (0 when there is no daily history yet: nothing is
// stored then).
func (j *StatsJob) Compute(ctx context.Context, m domain.Market) (int, error) {
	srcs := domain.AnalyticsSources(j.Region, m, j.Served)
	if len(srcs) == 0 {
		return 0, nil
	}
	started := time.Now()
	// Each asset once, from the source that lists it first (the scorer's
	// rule): the sources of a market split its assets between them.
	var assetsOf []store.CandleKey
	seen := map[string]bool{}
	for _, src := range srcs {
		symbols, _, err := sourceSymbols(ctx, j.Store, src, domain.TF1d)
		if err != nil {
			return 0, err
		}
		for _, sym := range symbols {
			if !seen[sym] {
				seen[sym] = true
				assetsOf = append(assetsOf, store.CandleKey{Market: m, Exchange: src.Exchange, Symbol: sym, Timeframe: domain.TF1d})
			}
		}
	}
	published, err := j.Store.SnapshotVerdicts(ctx, m, analytics.DefaultStyle)
	if err != nil {
		return 0, err
	}
	var backVerdicts, liveVerdicts stats.VerdictAccumulator
	var backFactors stats.FactorAccumulator
	assets := 0
	for _, key := range assetsOf {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		sym := key.Symbol
		cs, err := j.Store.Candles(ctx, key, statsCandles)
		if err != nil {
			return 0, err
		}
		if len(cs) < analytics.MinCandles+1 {
			continue
		}
		assets++
		if err := replay(m, sym, cs, &backVerdicts, &backFactors); err != nil {
			return 0, err
		}
		if err := judgeLive(cs, published[sym], &liveVerdicts); err != nil {
			return 0, err
		}
	}
	if assets == 0 {
		return 0, nil
	}
	now := j.Now().UTC()
	if err := j.Store.SaveStats(ctx, m, stats.SourceBacktest, backVerdicts.Results(stats.SourceBacktest), backFactors.Results(stats.SourceBacktest), assets, now); err != nil {
		return 0, err
	}
	if err := j.Store.SaveStats(ctx, m, stats.SourceLive, liveVerdicts.Results(stats.SourceLive), nil, assets, now); err != nil {
		return 0, err
	}
	if j.Notify != nil {
		j.Notify(ctx, readcache.Analytics(m))
	}
	if j.Logger != nil {
		j.Logger.Info("statistics computed", "market", m, "assets", assets, "took", time.Since(started).Round(time.Millisecond).String())
	}
	return assets, nil
}

// medianMoves is the asset's median absolute move per verdict horizon.
func medianMoves(closes []float64) map[int]float64 {
	out := map[int]float64{}
	for _, h := range stats.VerdictHorizons {
		if v, ok := stats.MedianAbsMove(closes, h); ok {
			out[h] = v
		}
	}
	return out
}

func closesOf(cs []domain.Candle) []float64 {
	out := make([]float64, len(cs))
	for i, c := range cs {
		out[i] = c.Close
	}
	return out
}

// replay scores every bar of cs that has MinCandles of history and feeds
// its verdict and factors, with their forward returns, to the accumulators.
func replay(m domain.Market, sym string, cs []domain.Candle, va *stats.VerdictAccumulator, fa *stats.FactorAccumulator) error {
	closes := closesOf(cs)
	med := medianMoves(closes)
	var prev analytics.Verdict
	for i := range cs {
		var res *analytics.Result
		if i+1 >= analytics.MinCandles {
			r, err := analytics.Score(analytics.Input{Market: m, Symbol: sym,
				Candles: cs[max(0, i+1-analytics.RecommendedCandles) : i+1], PrevVerdict: prev})
			if err == nil {
				res, prev = &r, r.Verdict
			}
		}
		var verdict analytics.Verdict
		if res != nil {
			verdict = res.Verdict
		}
		day := stats.DayNumber(cs[i].Time)
		if err := addVerdictBar(va, closes, med, i, day, verdict); err != nil {
			return err
		}
		if res == nil {
			continue
		}
		for _, h := range stats.FactorHorizons {
			ret, ok := stats.ForwardReturn(closes, i, h)
			if !ok {
				continue
			}
			if err := fa.AddMove(day, h, ret); err != nil {
				return err
			}
			for _, f := range res.Factors {
				if err := fa.Add(day, f.Name, h, stats.SentimentSign(string(f.Sentiment)), f.Contribution, ret); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// liveMaxAge is how old the last published verdict may be at a day's close
// to count as that day's verdict (the service may have been down).
const liveMaxAge = 48 * time.Hour

// judgeLive feeds the published verdicts of one asset: a daily bar's
// verdict is the last snapshot at or before its close, if recent.
func judgeLive(cs []domain.Candle, snaps []store.AnalyticsSnapshot, va *stats.VerdictAccumulator) error {
	closes := closesOf(cs)
	med := medianMoves(closes)
	k := -1
	for i, c := range cs {
		closeAt := c.Time.Add(domain.TF1d.Duration())
		for k+1 < len(snaps) && !snaps[k+1].At.After(closeAt) {
			k++
		}
		var verdict analytics.Verdict
		if k >= 0 && closeAt.Sub(snaps[k].At) <= liveMaxAge {
			verdict = snaps[k].Verdict
		}
		if err := addVerdictBar(va, closes, med, i, stats.DayNumber(c.Time), verdict); err != nil {
			return err
		}
	}
	return nil
}

// addVerdictBar feeds bar i of day, with the verdict it carried ("" for
// none: the base rate only), to va at every verdict horizon with a forward
// return.
func addVerdictBar(va *stats.VerdictAccumulator, closes []float64, med map[int]float64, i, day int, verdict analytics.Verdict) error {
	for _, h := range stats.VerdictHorizons {
		ret, ok := stats.ForwardReturn(closes, i, h)
		mv, okMed := med[h]
		if !ok || !okMed {
			continue
		}
		var err error
		if verdict != "" {
			err = va.Add(day, string(verdict), h, ret, mv)
		} else {
			err = va.AddBase(day, h, ret, mv)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
