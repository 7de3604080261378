package analytics

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/marketscreener/market/domain"
)

// walk returns n deterministic candles: a random walk with drift (per-bar
// log drift) and volatility vol, hourly from a fixed date.
func walk(n int, seed uint64, drift, vol float64) []domain.Candle {
	r := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]domain.Candle, n)
	price := 100.0
	for i := range out {
		open := price
		price *= math.Exp(drift + r.NormFloat64()*vol)
		hi := math.Max(open, price) * (1 + r.Float64()*vol/2)
		lo := math.Min(open, price) * (1 - r.Float64()*vol/2)
		out[i] = domain.Candle{Time: t0.Add(time.Duration(i) * time.Hour), Open: open, High: hi, Low: lo,
			Close: price, Volume: 1000 + r.Float64()*1000}
	}
	return out
}

func ptr(v float64) *float64 { return &v }
