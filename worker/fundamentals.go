package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
)

// TypeIngestFundamentals stores the fundamental inputs of a market's assets.
const TypeIngestFundamentals = "ingest:fundamentals"

// NewIngestFundamentalsTask returns the task that refreshes the fundamental
// inputs of the assets of a market's analytics source.
func NewIngestFundamentalsTask(c domain.Combination, tick time.Time) *asynq.Task {
	return newTask(TypeIngestFundamentals, IngestPayload{Market: c.Market, Exchange: c.Exchange, Instrument: c.Instrument, Tick: tick.UTC()})
}

// HandleIngestFundamentals asks the combination's feed for the fundamental
// inputs of each of its symbols and stores them. A feed without
// fundamentals stores nothing (the assets' fundamental score stays
// unavailable, which the reports say); a symbol the feed cannot answer
// for is skipped (logged as a warning unless the feed simply has no data
// for it).
func (in *Ingester) HandleIngestFundamentals(ctx context.Context, t *asynq.Task) error {
	_, c, err := decodeIngest(t)
	if err != nil {
		return err
	}
	p, ok := in.Feeds.For(c)
	if !ok {
		return fmt.Errorf("worker: no configured feed serves %s: %w", c, asynq.SkipRetry)
	}
	fp, ok := p.(feeds.FundamentalsProvider)
	if !ok {
		return nil
	}
	tickers, err := in.Store.Tickers(ctx, c)
	err = ours(err)
	if err == nil && len(tickers) == 0 {
		tickers, err = p.Tickers(ctx, c)
	}
	if err == nil && len(tickers) == 0 {
		err = errors.New("no symbols known yet")
	}
	if err != nil {
		in.recordError(c, store.FeedKindFundamentals, err)
		return fmt.Errorf("worker: ingest fundamentals %s: %w", c, err)
	}
	rows := make(map[string]map[string]float64, len(tickers))
	for _, tk := range tickers {
		inputs, err := fp.Fundamentals(ctx, c.Market, tk.Symbol)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			level := slog.LevelWarn
			if domain.ErrorCode(err) == domain.ENOTFOUND {
				level = slog.LevelDebug // e.g. a spot pair without a perpetual: nothing to report
			}
			in.logger().Log(ctx, level, "fundamentals unavailable", "combination", c.String(), "symbol", tk.Symbol, "err", err)
			continue
		}
		clean := make(map[string]float64, len(inputs))
		for k, v := range inputs {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				clean[k] = v
			}
		}
		addLiquidity(clean, tk.Volume)
		rows[tk.Symbol] = clean
	}
	if err := in.Store.UpsertFundamentals(ctx, c.Market, rows, in.Now()); err != nil {
		in.recordError(c, store.FeedKindFundamentals, ours(err))
		return fmt.Errorf("worker: ingest fundamentals %s: %w", c, err)
	}
	observeRows(c, store.FeedKindFundamentals, len(rows))
	_ = in.Store.RecordFeedSuccess(ctx, c, store.FeedKindFundamentals, in.Now())
	if in.Changes != nil {
		symbols := make([]string, 0, len(rows))
		for sym := range rows {
			symbols = append(symbols, sym)
		}
		in.Changes.FundamentalsChanged(ctx, c.Market, symbols)
	}
	in.logger().Debug("ingested fundamentals", "combination", c.String(), "assets", len(rows))
	return nil
}

// addLiquidity derives the 24 h volume over market cap from the ticker's
// quote volume when the feed gave a market cap but no liquidity of its own.
func addLiquidity(in map[string]float64, volume float64) {
	mcap, ok := in[feeds.FundamentalMarketCap]
	if _, has := in[feeds.FundamentalVolumeToMcap]; has || !ok || mcap <= 0 || volume <= 0 {
		return
	}
	in[feeds.FundamentalVolumeToMcap] = volume / mcap
}

// analyticsFundamentals maps stored inputs (feeds' units: percentages in
// percent) onto the scorer's (fractions, except the forex differentials in
// percentage points); nil when nothing is known.
func analyticsFundamentals(in map[string]float64) *analytics.Fundamentals {
	if len(in) == 0 {
		return nil
	}
	get := func(key string, scale float64) *float64 {
		v, ok := in[key]
		if !ok {
			return nil
		}
		v *= scale
		return &v
	}
	return &analytics.Fundamentals{
		FundingRate:        get(feeds.FundamentalFundingRate, 0.01),
		OpenInterestChange: get(feeds.FundamentalOpenInterestChg, 0.01),
		VolumeToMarketCap:  get(feeds.FundamentalVolumeToMcap, 1),
		PE:                 get(feeds.FundamentalPE, 1),
		SectorPE:           get(feeds.FundamentalSectorPE, 1),
		RevenueGrowth:      get(feeds.FundamentalRevenueGrowth, 0.01),
		NetMargin:          get(feeds.FundamentalNetMargin, 0.01),
		DebtToEquity:       get(feeds.FundamentalDebtToEquity, 1),
		PolicyRateDiff:     get(feeds.FundamentalRateDiff, 1),
		InflationDiff:      get(feeds.FundamentalInflationDiff, 1),
	}
}
