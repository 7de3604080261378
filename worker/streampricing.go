package worker

import (
	"context"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/streams"
)

// priceStreams returns the runs of the price streams of plans (feeds
// implementing feeds.PriceStreamer, OANDA's), one per feed: OANDA counts
// streams per IP, and one connection carries every pair of the account.
// Their screener rows go to onTickers, the ticker sink every other stream
// feeds.
func (s *StreamIngest) priceStreams(plans []streams.Plan, onTickers func(domain.Combination, []domain.Ticker)) []func(context.Context) {
	byFeed := map[string][]streams.Plan{}
	streamers := map[string]feeds.PriceStreamer{}
	var order []string
	for _, p := range plans {
		prov, ok := s.In.Feeds.For(p.Combination)
		ps, pushes := prov.(feeds.PriceStreamer)
		if !ok || !pushes {
			continue
		}
		if _, seen := streamers[prov.Name()]; !seen {
			order = append(order, prov.Name())
		}
		streamers[prov.Name()] = ps
		byFeed[prov.Name()] = append(byFeed[prov.Name()], p)
	}
	runs := make([]func(context.Context), 0, len(order))
	for _, name := range order {
		ps, feedPlans := streamers[name], byFeed[name]
		src := streams.NewOandaPricing(streams.OandaPricingConfig{
			Open:      ps.OpenPriceStream,
			Tickers:   quoteTickers(ps),
			OnTickers: onTickers,
			Metrics:   s.Streams.Metrics,
			Logger:    s.logger(),
			// The reconnect bounds of the exchanges' streams (tests shorten them).
			MinBackoff: s.Streams.MinBackoff,
			MaxBackoff: s.Streams.MaxBackoff,
		})
		runs = append(runs, func(ctx context.Context) { _ = src.Run(ctx, feedPlans) })
	}
	return runs
}

// quoteTickers adapts a feed's QuoteTickers to the stream's prices.
func quoteTickers(ps feeds.PriceStreamer) func(context.Context, domain.Combination, []streams.Price) ([]domain.Ticker, error) {
	return func(ctx context.Context, c domain.Combination, prices []streams.Price) ([]domain.Ticker, error) {
		quotes := make([]feeds.Quote, len(prices))
		for i, p := range prices {
			quotes[i] = feeds.Quote{Symbol: p.Symbol, Price: p.Price, Time: p.Time}
		}
		return ps.QuoteTickers(ctx, c, quotes)
	}
}
