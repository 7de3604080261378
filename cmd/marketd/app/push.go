package app

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/worker"
)

// pushJob is the worker job that follows the exchanges' websockets
// (Alpaca's for stocks), OANDA's pricing stream, and the candles of the
// synthetic feed read at every minute close, into ingest
// (worker.PushIngest), or nil when no combination of the region is
// pushed (feeds without push feeds, or a second exchange's fallback).
// baseURLs overrides the push hosts by name (push.Name*: the names
// MARKET_FEED_URLS uses); nil keeps the documented defaults.
func pushJob(cfg Config, reg *feeds.Registry, in *worker.Ingester, rdb redis.UniversalClient, baseURLs map[string]string, logger *slog.Logger) func(context.Context) error {
	if !worker.HasPushFeeds(reg, cfg.Region) {
		return nil
	}
	s := &worker.PushIngest{In: in, Region: cfg.Region, Redis: rdb, Logger: logger,
		Push: push.Config{BaseURLs: baseURLs, Metrics: obs.Push{}, Logger: logger,
			// The feed sets the plan's limits: iex is the free plan's (30
			// symbols), sip a paid plan's (no symbol limit).
			Alpaca: push.AlpacaConfig{KeyID: cfg.AlpacaKeyID, Secret: cfg.AlpacaSecret, Feed: cfg.AlpacaFeed}}}
	in.Pushed = worker.PushedCandles(rdb, "")
	return s.Run
}
