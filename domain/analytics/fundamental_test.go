package analytics

import (
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestFundamentalRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		market domain.Market
		f      Fundamentals
		price  float64 // recent price change
		want   Sentiment
		key    string
	}{
		{"funding high", domain.Crypto, Fundamentals{FundingRate: ptr(0.0005)}, 0, Bearish, "funding.bear"},
		{"funding just below high", domain.Crypto, Fundamentals{FundingRate: ptr(0.00049)}, 0, Neutral, "funding.neutral"},
		{"funding negative", domain.Crypto, Fundamentals{FundingRate: ptr(-0.0001)}, 0, Bullish, "funding.bull"},
		{"OI up, price up", domain.Crypto, Fundamentals{OpenInterestChange: ptr(0.02)}, 5, Bullish, "oi.bull"},
		{"OI up, price down", domain.Crypto, Fundamentals{OpenInterestChange: ptr(0.02)}, -5, Bearish, "oi.bear"},
		{"OI barely up", domain.Crypto, Fundamentals{OpenInterestChange: ptr(0.019)}, 5, Neutral, "oi.neutral"},
		{"OI down", domain.Crypto, Fundamentals{OpenInterestChange: ptr(-0.1)}, 5, Neutral, "oi.neutral"},
		{"turnover high", domain.Crypto, Fundamentals{VolumeToMarketCap: ptr(0.10)}, 0, Bullish, "liquidity.bull"},
		{"turnover thin", domain.Crypto, Fundamentals{VolumeToMarketCap: ptr(0.009)}, 0, Bearish, "liquidity.bear"},
		{"cheap vs sector", domain.Stocks, Fundamentals{PE: ptr(15), SectorPE: ptr(20)}, 0, Bullish, "valuation.bull"},
		{"at 80% of sector is fair", domain.Stocks, Fundamentals{PE: ptr(16), SectorPE: ptr(20)}, 0, Neutral, "valuation.neutral"},
		{"expensive vs sector", domain.Stocks, Fundamentals{PE: ptr(25), SectorPE: ptr(20)}, 0, Bearish, "valuation.bear"},
		{"no sector: market P/E", domain.Stocks, Fundamentals{PE: ptr(30)}, 0, Bearish, "valuation_market.bear"},
		{"loss-making", domain.Stocks, Fundamentals{PE: ptr(-3), SectorPE: ptr(20)}, 0, Bearish, "valuation.loss"},
		{"growth strong", domain.Stocks, Fundamentals{RevenueGrowth: ptr(0.10)}, 0, Bullish, "growth.bull"},
		{"growth zero", domain.Stocks, Fundamentals{RevenueGrowth: ptr(0)}, 0, Neutral, "growth.neutral"},
		{"shrinking", domain.Stocks, Fundamentals{RevenueGrowth: ptr(-0.01)}, 0, Bearish, "growth.bear"},
		{"margin high", domain.Stocks, Fundamentals{NetMargin: ptr(0.15)}, 0, Bullish, "margin.bull"},
		{"margin negative", domain.Stocks, Fundamentals{NetMargin: ptr(-0.01)}, 0, Bearish, "margin.bear"},
		{"low leverage", domain.Stocks, Fundamentals{DebtToEquity: ptr(0.3)}, 0, Bullish, "leverage.bull"},
		{"high leverage", domain.Stocks, Fundamentals{DebtToEquity: ptr(2)}, 0, Bearish, "leverage.bear"},
		{"negative equity", domain.Stocks, Fundamentals{DebtToEquity: ptr(-1)}, 0, Bearish, "leverage.bear"},
		{"rate advantage", domain.Forex, Fundamentals{PolicyRateDiff: ptr(0.5)}, 0, Bullish, "rate_diff.bull"},
		{"rate disadvantage", domain.Forex, Fundamentals{PolicyRateDiff: ptr(-0.75)}, 0, Bearish, "rate_diff.bear"},
		{"higher inflation", domain.Forex, Fundamentals{InflationDiff: ptr(1)}, 0, Bearish, "inflation_diff.bear"},
		{"lower inflation", domain.Forex, Fundamentals{InflationDiff: ptr(-1.5)}, 0, Bullish, "inflation_diff.bull"},
	}
	for _, tt := range tests {
		fs := fundamental(tt.market, &tt.f, tt.price)
		if len(fs) != 1 {
			t.Errorf("%s: %d factors, want 1", tt.name, len(fs))
			continue
		}
		if fs[0].Sentiment != tt.want || fs[0].Text.Key != tt.key || fs[0].Weight != 1 {
			t.Errorf("%s: %s %s weight %v, want %s %s weight 1", tt.name, fs[0].Sentiment, fs[0].Text.Key, fs[0].Weight, tt.want, tt.key)
		}
	}
}

func TestFundamentalsMissing(t *testing.T) {
	t.Parallel()
	nan := na
	cases := []struct {
		name string
		m    domain.Market
		f    *Fundamentals
	}{
		{"nil", domain.Crypto, nil},
		{"empty", domain.Stocks, &Fundamentals{}},
		{"non-finite", domain.Crypto, &Fundamentals{FundingRate: &nan}},
		{"other market's fields", domain.Forex, &Fundamentals{PE: ptr(10), FundingRate: ptr(0.01)}},
	}
	for _, c := range cases {
		if fs := fundamental(c.m, c.f, 1); len(fs) != 0 {
			t.Errorf("%s: %d factors, want none", c.name, len(fs))
		}
	}
	res, err := Score(Input{Market: domain.Forex, Symbol: "EUR_USD", Candles: walk(100, 1, 0, 0.003), Fundamentals: &Fundamentals{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.FundamentalScore != nil || res.OverallScore != res.TechnicalScore || res.Summary.Args.Value("fundamental") != "@fundamental.unavailable" {
		t.Errorf("no inputs: fundamental %v, overall %d vs %d, summary arg %q", res.FundamentalScore,
			res.OverallScore, res.TechnicalScore, res.Summary.Args.Value("fundamental"))
	}
}

// Missing inputs drop out and the others are renormalised.
func TestFundamentalWeightsRenormalise(t *testing.T) {
	t.Parallel()
	fs := fundamental(domain.Stocks, &Fundamentals{RevenueGrowth: ptr(0.2), DebtToEquity: ptr(3)}, 0)
	if len(fs) != 2 || fs[0].Weight != 0.6 || fs[1].Weight != 0.4 {
		t.Fatalf("factors %+v, want growth 0.6 and leverage 0.4", fs)
	}
	if got := scoreOf(fs); got != 20 {
		t.Errorf("score %d, want 100·(0.6 − 0.4) = 20", got)
	}
}
