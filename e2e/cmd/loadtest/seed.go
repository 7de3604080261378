package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
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

// seedScreen grows the crypto market to n scored assets (POST
// /screener/query's market): copies of the seeded swing reports under new
// symbols, their scores, verdicts and RSI readings spread over the whole
// range, with a screener row each.
func seedScreen(ctx context.Context, databaseURL string, n int) error {
	db, err := store.Open(ctx, databaseURL, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	base, err := db.AnalyticsResults(ctx, domain.Crypto, time.Time{})
	if err != nil || len(base) == 0 {
		return fmt.Errorf("seed screen: no seeded report to copy (%d): %w", len(base), err)
	}
	combo := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	rows, err := db.Tickers(ctx, combo)
	if err != nil {
		return fmt.Errorf("seed screen: %w", err)
	}
	now := time.Now().UTC()
	var batch []store.AnalyticsRecord
	for i := len(base); i < n; i++ {
		rec := base[i%len(base)]
		res := *rec.Result
		res.Factors = append([]analytics.Factor(nil), res.Factors...)
		res.OverallScore = i*37%201 - 100
		res.Verdict = analytics.VerdictNeutral
		if res.OverallScore >= 20 {
			res.Verdict = analytics.VerdictGrowth
		} else if res.OverallScore <= -20 {
			res.Verdict = analytics.VerdictDecline
		}
		for j := range res.Factors {
			if res.Factors[j].Name == "rsi_14" {
				res.Factors[j].Value = strconv.FormatFloat(float64(i*13%100), 'f', 2, 64)
			}
		}
		rec.Symbol = fmt.Sprintf("S%05d_USDT", i)
		rec.Result, rec.OverallScore, rec.Verdict, rec.UpdatedAt = &res, res.OverallScore, res.Verdict, now
		batch = append(batch, rec)
		rows = append(rows, domain.Ticker{Symbol: rec.Symbol, Price: 1 + float64(i%1000), ChangePct: float64(i%21) - 10, Volume: float64(i) * 1e4, UpdatedAt: now})
		if len(batch) == 1000 || i == n-1 {
			if _, err := db.SaveAnalytics(ctx, batch, nil); err != nil {
				return fmt.Errorf("seed screen: %w", err)
			}
			batch = batch[:0]
		}
	}
	if err := db.ReplaceTickers(ctx, combo, rows); err != nil {
		return fmt.Errorf("seed screen tickers: %w", err)
	}
	return nil
}
