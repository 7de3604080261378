package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// seed fills the schema with what the market-data paths read: one ingest
// of the synthetic feed for binance spot (screener rows of ≈200 symbols and
// 300 hourly candles each), exactly as the worker would.
func seed(ctx context.Context, databaseURL string) error {
	db, err := store.Open(ctx, databaseURL, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	reg, err := feeds.New(feeds.Config{Names: []string{feeds.NameSynthetic}, Seed: 1})
	if err != nil {
		return err
	}
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: slog.New(slog.DiscardHandler), Now: time.Now}
	c := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	now := time.Now()
	if err := in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(c, now)); err != nil {
		return fmt.Errorf("seed tickers: %w", err)
	}
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(c, domain.TF1h, now)); err != nil {
		return fmt.Errorf("seed candles: %w", err)
	}
	// Analytics of the default style (swing: 4h candles) with fundamentals,
	// for -path /analytics/crypto/BTC_USDT and friends.
	if err := in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(c, domain.TF4h, now)); err != nil {
		return fmt.Errorf("seed 4h candles: %w", err)
	}
	if err := in.HandleIngestFundamentals(ctx, worker.NewIngestFundamentalsTask(c, now)); err != nil {
		return fmt.Errorf("seed fundamentals: %w", err)
	}
	sc := &worker.Scorer{Store: db, Region: domain.DefaultRegion, Logger: slog.New(slog.DiscardHandler), Now: time.Now}
	if _, _, err := sc.Score(ctx, domain.Crypto, analytics.DefaultStyle); err != nil {
		return fmt.Errorf("seed analytics: %w", err)
	}
	return nil
}
