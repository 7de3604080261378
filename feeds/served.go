package feeds

import (
	"slices"

	"github.com/marketscreener/market/domain"
)

// Serves reports whether feed name serves c. It needs no provider (no
// credentials, no client), so the scheduler, the api and the CLI, which
// build none, agree with the worker's Registry on what is served.
func Serves(name string, c domain.Combination) bool {
	switch name {
	case NameSynthetic:
		return syntheticServes(c)
	case NameBinance:
		return binanceServes(c)
	case NameOKX:
		return okxServes(c)
	case NameCoinbase:
		return coinbaseServes(c)
	case NameOanda:
		return oandaServes(c)
	case NameAlpaca:
		return alpacaServes(c)
	}
	return false
}

// ServedBy returns the first of the feeds names (in priority order, as
// MARKET_FEEDS lists them) that serves c.
func ServedBy(names []string, c domain.Combination) (string, bool) {
	for _, n := range names {
		if Serves(n, c) {
			return n, true
		}
	}
	return "", false
}

// DataFeed names the market-data feed of names (in priority order) that
// serves c, as the reports' data quality shows it: the feed's name, and
// for alpaca the market-data feed of the plan (alpacaFeed: "iex" or
// "sip"), since IEX carries a few percent of US volume. "" when none
// serves c.
func DataFeed(names []string, alpacaFeed string, c domain.Combination) string {
	name, ok := ServedBy(names, c)
	switch {
	case !ok:
		return ""
	case name == NameAlpaca:
		if alpacaFeed == "" {
			alpacaFeed = AlpacaIEX
		}
		return name + "/" + alpacaFeed
	}
	return name
}

// Served splits a region's catalogue into the combinations the feeds
// names serve and the others, each in catalogue order.
func Served(names []string, region string) (served, unserved []domain.Combination) {
	for _, c := range domain.Catalogue(region) {
		if _, ok := ServedBy(names, c); ok {
			served = append(served, c)
		} else {
			unserved = append(unserved, c)
		}
	}
	return served, unserved
}

// syntheticServes: the synthetic feed has a universe for every
// combination of every region's catalogue.
func syntheticServes(c domain.Combination) bool {
	for _, r := range domain.Regions {
		if slices.Contains(domain.Catalogue(r), c) {
			return true
		}
	}
	return false
}

func binanceServes(c domain.Combination) bool {
	return c.Market == domain.Crypto && c.Exchange == NameBinance &&
		(c.Instrument == "spot" || c.Instrument == "perpetual" || c.Instrument == "futures")
}

func okxServes(c domain.Combination) bool {
	return c.Market == domain.Crypto && c.Exchange == NameOKX && (c.Instrument == "spot" || c.Instrument == "perpetual")
}

func coinbaseServes(c domain.Combination) bool {
	return c == domain.Combination{Market: domain.Crypto, Exchange: NameCoinbase, Instrument: "spot"}
}

func oandaServes(c domain.Combination) bool {
	return c.Market == domain.Forex && c.Exchange == NameOanda && (c.Instrument == "major" || c.Instrument == "minor")
}

// alpacaServes: Alpaca's stocks by listing exchange (alpacaExchangeOf).
func alpacaServes(c domain.Combination) bool {
	if c.Market != domain.Stocks || c.Instrument != "stock" {
		return false
	}
	for _, ex := range alpacaExchangeOf {
		if ex == c.Exchange {
			return true
		}
	}
	return false
}
