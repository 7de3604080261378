package app

import (
	"testing"

	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/worker"
)

// TestPushJobOnlyForFeedsWithPush: a deployment on feeds without
// push feeds has no push job; one on binance, okx or alpaca does, and so
// does one on the synthetic feed (its candles read in process at every
// minute close).
func TestPushJobOnlyForFeedsWithPush(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		feeds  []string
		region string
		want   bool
	}{
		{[]string{"synthetic"}, "global", true},
		{[]string{"coinbase"}, "us", false},
		{[]string{"binance"}, "global", true},
		{[]string{"okx"}, "eu", true},
		{[]string{"synthetic", "binance"}, "global", true}, // synthetic serves binance's combinations first, in process
		{[]string{"alpaca"}, "us", true},                   // the stock exchanges' bars
	} {
		reg, err := feeds.New(feeds.Config{Names: tc.feeds, OandaToken: "t", AlpacaKeyID: "k", AlpacaSecret: "s"})
		if err != nil {
			t.Fatal(err)
		}
		job := pushJob(Config{Region: tc.region}, reg, &worker.Ingester{Feeds: reg}, nil, nil, nil)
		if got := job != nil; got != tc.want {
			t.Errorf("feeds %v in %s: pushing %v, want %v", tc.feeds, tc.region, got, tc.want)
		}
	}
}
