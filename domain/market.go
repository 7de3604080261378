package domain

import (
	"slices"
	"strings"
)

// Market is one of the three markets the service covers.
type Market string

// The markets, in their canonical order.
const (
	Crypto Market = "crypto"
	Forex  Market = "forex"
	Stocks Market = "stocks"
)

// Markets lists every market in canonical order.
var Markets = []Market{Crypto, Forex, Stocks}

// ParseMarket parses a market name exactly as written on the wire (lower-case).
func ParseMarket(s string) (Market, bool) {
	m := Market(s)
	return m, slices.Contains(Markets, m)
}

// ParseMarkets parses a comma-separated list of markets, without duplicates.
func ParseMarkets(s string) ([]Market, error) {
	var out []Market
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		m, ok := ParseMarket(part)
		if !ok {
			return nil, Errorf(EINVALID, "unknown market %q (allowed: crypto, forex, stocks)", part)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	SortMarkets(out)
	return out, nil
}

// SortMarkets sorts markets in canonical order.
func SortMarkets(ms []Market) {
	slices.SortFunc(ms, func(a, b Market) int { return slices.Index(Markets, a) - slices.Index(Markets, b) })
}

// MarketNames renders markets as strings.
func MarketNames(ms []Market) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	return out
}
