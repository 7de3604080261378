package domain

import (
	"slices"
	"strings"
)

// Combination is one (market, exchange, instrument) the service serves.
type Combination struct {
	Market     Market `json:"market"`
	Exchange   string `json:"exchange"`
	Instrument string `json:"instrument"`
}

// String renders the combination as market/exchange/instrument.
func (c Combination) String() string {
	return string(c.Market) + "/" + c.Exchange + "/" + c.Instrument
}

// Regions are the deployment regions with a catalogue. "global" is the default.
var Regions = []string{"global", "eu", "us"}

// DefaultRegion is the region used when MARKET_REGION is not set.
const DefaultRegion = "global"

// catalogue is the one place saying which combinations exist where. Binance
// does not serve the US, so the US region uses Coinbase for crypto spot;
// every region has a crypto spot exchange. Stocks are the US national
// exchanges that list equities and ETFs: Nasdaq, NYSE, NYSE Arca (most
// ETFs), NYSE American ("amex") and Cboe BZX ("bats"); OTC securities are
// not exchange-listed and are not served.
var catalogue = map[string][]Combination{
	"global": {
		{Crypto, "binance", "spot"}, {Crypto, "binance", "perpetual"}, {Crypto, "binance", "futures"},
		{Crypto, "okx", "spot"}, {Crypto, "okx", "perpetual"},
		{Forex, "oanda", "major"}, {Forex, "oanda", "minor"},
		{Stocks, "nasdaq", "stock"}, {Stocks, "nyse", "stock"}, {Stocks, "arca", "stock"}, {Stocks, "amex", "stock"}, {Stocks, "bats", "stock"},
	},
	"eu": {
		{Crypto, "binance", "spot"}, {Crypto, "binance", "perpetual"},
		{Crypto, "okx", "spot"},
		{Forex, "oanda", "major"}, {Forex, "oanda", "minor"},
		{Stocks, "nasdaq", "stock"}, {Stocks, "nyse", "stock"}, {Stocks, "arca", "stock"}, {Stocks, "amex", "stock"}, {Stocks, "bats", "stock"},
	},
	"us": {
		{Crypto, "coinbase", "spot"},
		{Forex, "oanda", "major"}, {Forex, "oanda", "minor"},
		{Stocks, "nasdaq", "stock"}, {Stocks, "nyse", "stock"}, {Stocks, "arca", "stock"}, {Stocks, "amex", "stock"}, {Stocks, "bats", "stock"},
	},
}

// ValidRegion reports whether a region has a catalogue.
func ValidRegion(r string) bool { _, ok := catalogue[r]; return ok }

// Catalogue returns the combinations of a region (a copy), in a stable order.
func Catalogue(region string) []Combination {
	return slices.Clone(catalogue[region])
}

// LookupCombination finds a combination of the region.
func LookupCombination(region string, m Market, exchange, instrument string) (Combination, bool) {
	for _, c := range catalogue[region] {
		if c.Market == m && c.Exchange == exchange && c.Instrument == instrument {
			return c, true
		}
	}
	return Combination{}, false
}

// Served reports whether a feed the deployment is configured with serves
// a combination. The nil Served serves every combination of the catalogue
// (what the synthetic feed does).
type Served func(Combination) bool

// Has reports whether s serves c.
func (s Served) Has(c Combination) bool { return s == nil || s(c) }

// DescribeAvailable lists the served combinations of a market in a region,
// for 404 details.
func DescribeAvailable(region string, m Market, served Served) string {
	var parts []string
	for _, c := range catalogue[region] {
		if c.Market == m && served.Has(c) {
			parts = append(parts, c.Exchange+"/"+c.Instrument)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// CandleInstrument stands for "the exchange's candles" where a combination
// key is needed (feed health): candles are stored per exchange and symbol.
const CandleInstrument = "candles"

// HasCandles reports whether candles are ingested for a combination: crypto
// spot (perpetual and futures serve the screener only) and every forex and
// stocks combination.
func (c Combination) HasCandles() bool {
	return c.Market != Crypto || c.Instrument == "spot"
}
