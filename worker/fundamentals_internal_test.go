package worker

import (
	"testing"

	"github.com/marketscreener/market/feeds"
)

// TestAddLiquidity: a market cap from the feed (Binance's circulating
// supply) and the ticker's quote volume give the liquidity input; a feed's
// own liquidity wins, and nothing is made up without a market cap.
func TestAddLiquidity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     map[string]float64
		volume float64
		want   float64
		has    bool
	}{
		{"derived", map[string]float64{feeds.FundamentalMarketCap: 2e9}, 5e7, 0.025, true},
		{"feed's own", map[string]float64{feeds.FundamentalMarketCap: 2e9, feeds.FundamentalVolumeToMcap: 0.5}, 5e7, 0.5, true},
		{"no market cap", map[string]float64{feeds.FundamentalFundingRate: 0.01}, 5e7, 0, false},
		{"no volume", map[string]float64{feeds.FundamentalMarketCap: 2e9}, 0, 0, false},
	} {
		addLiquidity(tc.in, tc.volume)
		got, has := tc.in[feeds.FundamentalVolumeToMcap]
		if has != tc.has || got != tc.want {
			t.Errorf("%s: volume_to_market_cap = %v (present %v), want %v (present %v)", tc.name, got, has, tc.want, tc.has)
		}
	}
}
