package feeds

import (
	"net/url"
	"testing"
)

// TestBinanceWeights: each request is booked with the weight Binance
// documents for it (binance-spot-api-docs rest-api.md, "Exchange
// information", "Kline/Candlestick data", "24hr ticker price change
// statistics"; developers.binance.com USDⓈ-M "Kline Candlestick Data",
// "24hr Ticker Price Change Statistics", "Mark Price", "Open Interest
// Statistics").
func TestBinanceWeights(t *testing.T) {
	t.Parallel()
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, c := range []struct {
		weigh func(string, url.Values) int
		path  string
		q     url.Values
		want  int
	}{
		{binanceSpotWeightOf, "/api/v3/exchangeInfo", nil, 20},
		{binanceSpotWeightOf, "/api/v3/klines", q("symbol", "BTCUSDT", "limit", "1000"), 2},
		{binanceSpotWeightOf, "/api/v3/ticker/24hr", q("symbol", "BTCUSDT"), 2},
		{binanceSpotWeightOf, "/api/v3/ticker/24hr", nil, 80},
		{binanceSpotWeightOf, "/api/v3/ticker/24hr", q("symbols", `["BTCUSDT","BNBUSDT"]`), 2},
		{binanceSpotWeightOf, "/api/v3/ticker/24hr", q("symbols", `["A1","A2","A3","A4","A5","A6","A7","A8","A9","A10","A11","A12","A13","A14","A15","A16","A17","A18","A19","A20","A21"]`), 40},
		{binanceFuturesWeightOf, "/fapi/v1/exchangeInfo", nil, 1},
		{binanceFuturesWeightOf, "/fapi/v1/klines", q("limit", "99"), 1},
		{binanceFuturesWeightOf, "/fapi/v1/klines", q("limit", "100"), 2},
		{binanceFuturesWeightOf, "/fapi/v1/klines", q("limit", "499"), 2},
		{binanceFuturesWeightOf, "/fapi/v1/klines", q("limit", "500"), 5},
		{binanceFuturesWeightOf, "/fapi/v1/klines", nil, 5}, // default limit 500
		{binanceFuturesWeightOf, "/fapi/v1/continuousKlines", q("limit", "1000"), 5},
		{binanceFuturesWeightOf, "/fapi/v1/continuousKlines", q("limit", "1500"), 10},
		{binanceFuturesWeightOf, "/fapi/v1/ticker/24hr", nil, 40},
		{binanceFuturesWeightOf, "/fapi/v1/ticker/24hr", q("symbol", "BTCUSDT"), 1},
		{binanceFuturesWeightOf, "/fapi/v1/premiumIndex", q("symbol", "BTCUSDT"), 1},
		// Every symbol's (what the fundamentals fetch): "带symbol 1, 不带symbol
		// 10", developers.binance.com/docs/zh-CN/derivatives/usds-margined-futures/market-data/rest-api/Mark-Price.
		{binanceFuturesWeightOf, "/fapi/v1/premiumIndex", nil, 10},
		{binanceFuturesWeightOf, "/futures/data/openInterestHist", q("symbol", "BTCUSDT"), 0},
	} {
		if got := c.weigh(c.path, c.q); got != c.want {
			t.Errorf("%s?%s: weight %d, want %d", c.path, c.q.Encode(), got, c.want)
		}
	}
}
