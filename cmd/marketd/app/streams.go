package app

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/streams"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/worker"
)

// streamJob is the worker job that streams the exchanges' websockets into
// ingest (worker.StreamIngest), or nil when no combination of the region is
// served by a feed with streams (the synthetic feed has none). baseURLs
// overrides the stream hosts by name (streams.Name*: the names
// MARKET_FEED_URLS uses); nil keeps the documented defaults.
func streamJob(cfg Config, reg *feeds.Registry, in *worker.Ingester, rdb redis.UniversalClient, baseURLs map[string]string, logger *slog.Logger) func(context.Context) error {
	streamed := false
	for _, c := range domain.Catalogue(cfg.Region) {
		if p, ok := reg.For(c); ok && p.Name() == c.Exchange && streams.Supports(c) {
			streamed = true
		}
	}
	if !streamed {
		return nil
	}
	s := &worker.StreamIngest{In: in, Region: cfg.Region, Redis: rdb, Logger: logger,
		Streams: streams.Config{BaseURLs: baseURLs, Metrics: obs.Streams{}, Logger: logger}}
	in.Streamed = worker.StreamedCandles(rdb, "")
	return s.Run
}
