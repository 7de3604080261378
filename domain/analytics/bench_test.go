package analytics

import (
	"testing"

	"github.com/marketscreener/market/domain"
)

// BenchmarkScoreAsset is one asset's scoring run as the worker does it:
// 500 candles, every factor, the scenario, and the texts in one language.
func BenchmarkScoreAsset(b *testing.B) {
	in := Input{Market: domain.Crypto, Symbol: "BTC_USDT", Candles: walk(500, 42, 0.0005, 0.01),
		Fundamentals: &Fundamentals{FundingRate: ptr(0.0001), OpenInterestChange: ptr(0.03), VolumeToMarketCap: ptr(0.05)}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Score(in)
		if err != nil {
			b.Fatal(err)
		}
		_ = res.Localize("ru")
	}
}
