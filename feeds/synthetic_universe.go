package feeds

import (
	"math"
	"strconv"
	"strings"

	"github.com/marketscreener/market/domain"
)

// asset is one row of a universe table.
type asset struct {
	name   string
	price  float64 // USD level (crypto, stocks) or USD value (currencies)
	sector string  // stocks only
	rate   float64 // currencies only: policy rate, percent
	cpi    float64 // currencies only: inflation, percent
	rank   int     // 1 = most liquid
}

// parseAssets reads a universe table: comma-separated rows of
// space-separated fields "NAME PRICE [SECTOR | RATE CPI]".
func parseAssets(table string) []asset {
	var out []asset
	for _, row := range strings.Split(table, ",") {
		f := strings.Fields(row)
		if len(f) < 2 {
			continue
		}
		a := asset{name: f[0], rank: len(out) + 1}
		a.price, _ = strconv.ParseFloat(f[1], 64)
		switch len(f) {
		case 3:
			a.sector = f[2]
		case 4:
			a.rate, _ = strconv.ParseFloat(f[2], 64)
			a.cpi, _ = strconv.ParseFloat(f[3], 64)
		}
		out = append(out, a)
	}
	return out
}

// volumeUnit says what a candle's volume counts.
type volumeUnit int

const (
	unitBase   volumeUnit = iota // base-asset units, as crypto exchanges report
	unitShares                   // whole shares
	unitTicks                    // price updates, as OANDA reports for forex
)

// leg is one idiosyncratic path of an instrument, added or subtracted.
type leg struct {
	p    *path
	sign float64
}

// instrument is one synthetic symbol of one combination.
type instrument struct {
	symbol    string
	market    domain.Market
	logBase   float64 // log of the price level
	basis     float64 // log premium of derivatives over spot
	beta      float64 // coefficient on the market factor
	legs      []leg
	sigmaDay  float64 // daily log volatility, for wicks and volume activity
	dayVolume float64 // quote-currency volume per day (ticks for forex)
	unit      volumeUnit
	scale     float64 // prices are rounded to 1/scale
	volScale  float64 // base volumes are rounded to 1/volScale
	salt      uint64  // per (combination, symbol): candle noise
	baseAsset string  // crypto: base asset; stocks: ticker; forex: base currency
	quote     string  // crypto and forex: quote asset
	sector    string
	rank      int // liquidity rank of the base asset, 1 = most liquid
}

// universe is the instrument list of one combination, in rank order.
type universe struct {
	symbols  []string
	bySymbol map[string]*instrument
}

func (u *universe) add(in *instrument) {
	if _, dup := u.bySymbol[in.symbol]; dup {
		return
	}
	u.symbols = append(u.symbols, in.symbol)
	u.bySymbol[in.symbol] = in
}

// priceScale rounds prices to six significant digits of their level, or
// to cents for stocks.
func priceScale(m domain.Market, level float64) float64 {
	if m == domain.Stocks {
		return 100
	}
	return math.Pow(10, 5-math.Floor(math.Log10(level)))
}

// cryptoShape says which pairs a crypto combination lists.
type cryptoShape struct {
	quote      string  // main quote asset
	count      int     // how many bases against the main quote
	btcCrosses int     // X_BTC pairs of the top bases
	usdc       int     // X_USDC pairs of the top bases
	volScale   float64 // exchange/instrument volume relative to Binance spot
	basis      float64 // derivatives premium (log), before per-symbol noise
}

func cryptoShapeOf(c domain.Combination) cryptoShape {
	switch c.Exchange + "/" + c.Instrument {
	case "binance/spot":
		return cryptoShape{quote: "USDT", count: 192, btcCrosses: 10, usdc: 6, volScale: 1}
	case "binance/perpetual":
		return cryptoShape{quote: "USDT", count: 150, volScale: 2.5, basis: 0.0003}
	case "binance/futures":
		return cryptoShape{quote: "USDT", count: 12, volScale: 0.12, basis: 0.008}
	case "okx/spot":
		return cryptoShape{quote: "USDT", count: 160, usdc: 5, volScale: 0.45}
	case "okx/perpetual":
		return cryptoShape{quote: "USDT", count: 120, volScale: 1.2, basis: 0.0003}
	case "coinbase/spot":
		return cryptoShape{quote: "USD", count: 130, btcCrosses: 4, volScale: 0.35}
	}
	return cryptoShape{quote: "USDT", count: 100, volScale: 0.3}
}
