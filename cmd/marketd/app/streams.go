package app

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/streams"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/worker"
)

// streamJob is the worker job that streams the exchanges' websockets
// (Alpaca's for stocks), OANDA's pricing stream, and the candles of the
// synthetic feed read at every minute close, into ingest
// (worker.StreamIngest), or nil when no combination of the region is
// streamed (feeds without streams, or a second exchange's fallback).
// baseURLs overrides the stream hosts by name (streams.Name*: the names
// MARKET_FEED_URLS uses); nil keeps the documented defaults.
func streamJob(cfg Config, reg *feeds.Registry, in *worker.Ingester, rdb redis.UniversalClient, baseURLs map[string]string, logger *slog.Logger) func(context.Context) error {
	if !worker.Streams(reg, cfg.Region) {
		return nil
	}
	s := &worker.StreamIngest{In: in, Region: cfg.Region, Redis: rdb, Logger: logger,
		Streams: streams.Config{BaseURLs: baseURLs, Metrics: obs.Streams{}, Logger: logger,
			// The feed sets the plan's limits: iex is the free plan's (30
			// symbols), sip a paid plan's (no symbol limit).
			Alpaca: streams.AlpacaConfig{KeyID: cfg.AlpacaKeyID, Secret: cfg.AlpacaSecret, Feed: cfg.AlpacaFeed}}}
	in.Streamed = worker.StreamedCandles(rdb, "")
	return s.Run
}
