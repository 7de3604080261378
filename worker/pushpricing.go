package worker

import (
	"context"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
)

// pricePushes returns the runs of the price push feeds of plans (feeds
// implementing feeds.PricePusher, OANDA's), one per feed: OANDA counts
// streams per IP, and one connection carries every pair of the account.
// Their screener rows go to onTickers, the ticker sink every other push feed
// feeds.
func (s *PushIngest) pricePushes(plans []push.Plan, onTickers func(domain.Combination, []domain.Ticker)) []func(context.Context) {
	byFeed := map[string][]push.Plan{}
	pushers := map[string]feeds.PricePusher{}
	var order []string
	for _, p := range plans {
		prov, ok := s.In.Feeds.For(p.Combination)
		ps, pushes := prov.(feeds.PricePusher)
		if !ok || !pushes {
			continue
		}
		if _, seen := pushers[prov.Name()]; !seen {
			order = append(order, prov.Name())
		}
		pushers[prov.Name()] = ps
		byFeed[prov.Name()] = append(byFeed[prov.Name()], p)
	}
	runs := make([]func(context.Context), 0, len(order))
	for _, name := range order {
		ps, feedPlans := pushers[name], byFeed[name]
		src := push.NewOandaPricing(push.OandaPricingConfig{
			Open:      ps.OpenPriceStream,
			Tickers:   quoteTickers(ps),
			OnTickers: onTickers,
			Metrics:   s.Push.Metrics,
			Logger:    s.logger(),
			// The reconnect bounds of the exchanges' push feeds (tests shorten them).
			MinBackoff: s.Push.MinBackoff,
			MaxBackoff: s.Push.MaxBackoff,
		})
		runs = append(runs, func(ctx context.Context) { _ = src.Run(ctx, feedPlans) })
	}
	return runs
}

// quoteTickers adapts a feed's QuoteTickers to the push feed's prices.
func quoteTickers(ps feeds.PricePusher) func(context.Context, domain.Combination, []push.Price) ([]domain.Ticker, error) {
	return func(ctx context.Context, c domain.Combination, prices []push.Price) ([]domain.Ticker, error) {
		quotes := make([]feeds.Quote, len(prices))
		for i, p := range prices {
			quotes[i] = feeds.Quote{Symbol: p.Symbol, Price: p.Price, Time: p.Time}
		}
		return ps.QuoteTickers(ctx, c, quotes)
	}
}
