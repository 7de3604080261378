package app

import (
	"slices"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
)

// served reports whether a feed of MARKET_FEEDS serves a combination of
// the region: the scheduler schedules only those, the api answers 404 for
// the others, and each market's analytics source is the first served one
// (domain.AnalyticsSource), the same in every role.
func (c Config) served() domain.Served {
	set := map[domain.Combination]bool{}
	served, _ := feeds.Served(c.Feeds, c.Region)
	for _, comb := range served {
		set[comb] = true
	}
	return func(comb domain.Combination) bool { return set[comb] }
}

// dataFeed names the market-data feed serving a combination
// (feeds.DataFeed), for the reports' data quality.
func (c Config) dataFeed(comb domain.Combination) string {
	return feeds.DataFeed(c.Feeds, c.AlpacaFeed, comb)
}

// servedFor lists the combinations of the region a feed of MARKET_FEEDS
// serves, in catalogue order, keeping those of markets (nil: every market).
func (c Config) servedFor(markets []domain.Market) []servedCombination {
	var out []servedCombination
	for _, comb := range domain.Catalogue(c.Region) {
		feed, ok := feeds.ServedBy(c.Feeds, comb)
		if ok && (markets == nil || slices.Contains(markets, comb.Market)) {
			out = append(out, servedCombination{Combination: comb, Feed: feed})
		}
	}
	return out
}

// servedCombination is a combination this deployment serves and the feed
// serving it.
type servedCombination struct {
	domain.Combination
	Feed string `json:"feed"`
}

func combinationNames(cs []domain.Combination) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// coverage is what /readyz says of the region's catalogue: each served
// combination with its feed, and the unserved ones.
func (c Config) coverage() (served map[string]string, unserved []string) {
	served = map[string]string{}
	for _, sc := range c.servedFor(nil) {
		served[sc.String()] = sc.Feed
	}
	_, rest := feeds.Served(c.Feeds, c.Region)
	return served, combinationNames(rest)
}
