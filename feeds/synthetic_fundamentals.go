package feeds

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
)

// sectorPE is the synthetic median P/E of each stock sector.
func sectorPE(sector string) float64 {
	switch sector {
	case "Technology":
		return 30
	case "Communication":
		return 22
	case "Consumer":
		return 25
	case "Staples":
		return 22
	case "Health":
		return 20
	case "Financials":
		return 15
	case "Energy":
		return 12
	case "Utilities":
		return 18
	}
	return 21
}

// Fundamentals implements FundamentalsProvider with inputs that follow the
// synthetic prices: crypto funding and open interest lean with the recent
// trend, a stock's P/E moves with its price against quarterly earnings,
// forex differentials drift month by month around each currency's level.
func (s *Synthetic) Fundamentals(_ context.Context, m domain.Market, symbol string) (FundamentalInputs, error) {
	in, ok := s.byMarket[m][symbol]
	if !ok {
		return nil, domain.Errorf(domain.ENOTFOUND, "feeds: synthetic: unknown %s symbol %q", m, symbol)
	}
	now := s.now().UTC()
	e := in.evaluator(s.factors[m])
	nowNs := now.UnixNano()
	lpNow := e.logPrice(nowNs, 0)
	ret := func(d time.Duration) float64 { return lpNow - e.logPrice(nowNs-int64(d), 0) }
	day := uint64(now.Unix() / 86400)
	noise := func(salt string, period uint64) float64 {
		return gaussian(mix64(s.seed ^ hashString(salt, symbol) + day/period))
	}
	switch m {
	case domain.Crypto:
		price := math.Exp(lpNow)
		mcap := 1.9e12 * math.Pow(float64(in.rank), -1.3)
		mcap *= price / math.Exp(in.logBase) // supply is fixed, so the cap follows the price
		return FundamentalInputs{
			FundamentalFundingRate:     round4(clamp(0.01+0.25*ret(72*time.Hour)+0.004*noise("funding", 1), -0.1, 0.2)),
			FundamentalOpenInterestChg: round4(clamp(60*ret(24*time.Hour)+3*noise("oi", 1), -40, 60)),
			FundamentalMarketCap:       math.Round(mcap),
			FundamentalVolumeToMcap:    round4(in.dayVolume / mcap),
		}, nil
	case domain.Stocks:
		h := mix64(s.seed ^ hashString("fundamentals", symbol))
		sector := sectorPE(in.sector)
		pe0 := sector * math.Exp(0.35*gaussian(h))
		eps := math.Exp(in.logBase) / pe0 * (1 + 0.04*noise("eps", 91))
		return FundamentalInputs{
			FundamentalPE:            round4(math.Exp(lpNow) / eps),
			FundamentalSectorPE:      sector,
			FundamentalRevenueGrowth: round4(6 + 9*gaussian(mix64(h+1)) + 2*noise("revenue", 91)),
			FundamentalEPSGrowth:     round4(8 + 14*gaussian(mix64(h+2)) + 4*noise("epsg", 91)),
			FundamentalNetMargin:     round4(clamp(14+8*gaussian(mix64(h+3)), -20, 55)),
			FundamentalDebtToEquity:  round4(0.2 + 2.2*unit(mix64(h+4))),
		}, nil
	case domain.Forex:
		base, quote, _ := strings.Cut(symbol, "_")
		rates := s.currencyLevels()
		b, q := rates[base], rates[quote]
		return FundamentalInputs{
			FundamentalRateDiff:      round4(b.rate - q.rate + 0.25*noise("rates", 30)),
			FundamentalInflationDiff: round4(b.cpi - q.cpi + 0.3*noise("cpi", 30)),
		}, nil
	}
	return nil, domain.Errorf(domain.ENOTFOUND, "feeds: synthetic: no fundamentals for %s", m)
}

func (s *Synthetic) currencyLevels() map[string]asset {
	out := map[string]asset{}
	for _, a := range parseAssets(syntheticCurrencies) {
		out[a.name] = a
	}
	return out
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
