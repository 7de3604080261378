package feeds

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Host names: every upstream host a feed uses, by the name an operator
// overrides it with (MARKET_FEED_URLS, Config.BaseURLs). Stream hosts are
// read by the streaming client; the REST adapters read the others.
const (
	HostBinance              = "binance"                // spot REST
	HostBinanceFutures       = "binance-futures"        // USDⓈ-M futures REST
	HostBinanceStream        = "binance-stream"         // spot market streams
	HostBinanceFuturesStream = "binance-futures-stream" // USDⓈ-M market streams
	HostOKX                  = "okx"                    // v5 REST
	HostOKXStream            = "okx-stream"             // v5 public websocket
	HostCoinbase             = "coinbase"               // Exchange REST (products, candles)
	HostCoinbaseAdvanced     = "coinbase-advanced"      // Advanced Trade REST (bulk tickers)
	HostOanda                = "oanda"                  // v20 REST
	HostOandaStream          = "oanda-stream"           // v20 pricing stream (streaming HTTP, not a websocket)
	HostAlpaca               = "alpaca"                 // trading API (paper or live)
	HostAlpacaData           = "alpaca-data"            // market data v2
	HostAlpacaStream         = "alpaca-stream"          // market-data websocket (stocks)
	HostBinanceArchive       = "binance-archive"        // public data archive (marketd import)
)

// OANDA's REST and streaming hosts: practice (demo) accounts have their
// own hosts and tokens do not work across them (v20 development guide,
// "API URLs": https://developer.oanda.com/rest-live-v20/development-guide/).
const (
	oandaLiveURL           = "https://api-fxtrade.oanda.com"
	oandaPracticeURL       = "https://api-fxpractice.oanda.com"
	oandaStreamLiveURL     = "https://stream-fxtrade.oanda.com"
	oandaStreamPracticeURL = "https://stream-fxpractice.oanda.com"
)

// OANDA environments accepted in Config.OandaEnvironment.
const (
	OandaLive     = "live"
	OandaPractice = "practice"
)

// host is one overridable upstream host.
type host struct {
	name, defaultURL, doc string
}

// hosts lists every host with its default, in documentation order. The
// docs are Markdown: the README's table of hosts is rendered from them.
var hosts = []host{
	{HostBinance, "https://api.binance.com", "Binance spot REST (testnet: `https://testnet.binance.vision`)"},
	{HostBinanceFutures, "https://fapi.binance.com", "Binance USDⓈ-M futures REST, funding and open interest (testnet: `https://testnet.binancefuture.com`)"},
	{HostBinanceStream, "wss://stream.binance.com:9443", "Binance spot market streams"},
	{HostBinanceFuturesStream, "wss://fstream.binance.com", "Binance USDⓈ-M market streams"},
	{HostOKX, "https://www.okx.com", "OKX v5 REST"},
	{HostOKXStream, "wss://ws.okx.com:8443", "OKX v5 public websocket"},
	{HostCoinbase, "https://api.exchange.coinbase.com", "Coinbase Exchange REST: products and candles"},
	{HostCoinbaseAdvanced, "https://api.coinbase.com", "Coinbase Advanced Trade public REST: every ticker in one request"},
	{HostOanda, oandaLiveURL, "OANDA v20 REST (`" + oandaPracticeURL + "` with `MARKET_OANDA_ENVIRONMENT=practice`)"},
	{HostOandaStream, oandaStreamLiveURL, "OANDA v20 pricing stream, chunked HTTP: `https://` or `http://` (`" + oandaStreamPracticeURL + "` with `MARKET_OANDA_ENVIRONMENT=practice`)"},
	{HostAlpaca, "https://api.alpaca.markets", "Alpaca trading API (paper: `https://paper-api.alpaca.markets`): the asset list (the stock universe) and the stock market calendar (`/v2/calendar`), each read once a day"},
	{HostAlpacaData, "https://data.alpaca.markets", "Alpaca market data v2"},
	{HostAlpacaStream, "wss://stream.data.alpaca.markets", "Alpaca market-data websocket: `/v2/iex` or `/v2/sip` by `MARKET_ALPACA_FEED`, stock minute and daily bars"},
	{HostBinanceArchive, archiveDefaultURL, "Binance public data archive (data.binance.vision's bucket): its S3 listing and kline files, read by `marketd import` (a mirror or a local copy in the same layout works)"},
}

// HostNames lists every name Config.BaseURLs accepts.
func HostNames() []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.name
	}
	return out
}

// HostDoc documents one overridable host: its name, its default URL and
// what it is used for (Markdown).
type HostDoc struct {
	Name, Default, Doc string
}

// HostDocs lists every overridable host in documentation order, for the
// configuration's documentation.
func HostDocs() []HostDoc {
	out := make([]HostDoc, len(hosts))
	for i, h := range hosts {
		out[i] = HostDoc{Name: h.name, Default: h.defaultURL, Doc: h.doc}
	}
	return out
}

// websocket reports whether h is a websocket host: its default is wss://.
// OANDA's pricing stream is a "-stream" host too, but a streaming HTTP
// response, so it takes http(s) like the REST hosts.
func (h host) websocket() bool { return strings.HasPrefix(h.defaultURL, "wss://") }

// ValidateBaseURL checks an override of host name: a known name and an
// absolute URL of the host's kind, ws(s) for websocket streams and
// http(s) for the others (the plain schemes for local replays), without
// query or fragment. A path is kept (a mirror under a prefix).
func ValidateBaseURL(name, raw string) error {
	i := slices.IndexFunc(hosts, func(h host) bool { return h.name == name })
	if i < 0 {
		return fmt.Errorf("unknown host name %q (known: %s)", name, strings.Join(HostNames(), ", "))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %q is not a URL", name, raw)
	}
	schemes := []string{"https", "http"}
	if hosts[i].websocket() {
		schemes = []string{"wss", "ws"}
	}
	if !slices.Contains(schemes, u.Scheme) || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s: %q must be an absolute %s:// or %s:// URL without credentials, query or fragment", name, raw, schemes[0], schemes[1])
	}
	return nil
}

// BaseURL is the URL of host name: the override in BaseURLs, else the
// default (for oanda and oanda-stream, the practice hosts when
// OandaEnvironment says so), without a trailing slash.
func (cfg Config) BaseURL(name string) string {
	if u := cfg.BaseURLs[name]; u != "" {
		return strings.TrimRight(u, "/")
	}
	if cfg.OandaEnvironment == OandaPractice {
		switch name {
		case HostOanda:
			return oandaPracticeURL
		case HostOandaStream:
			return oandaStreamPracticeURL
		}
	}
	for _, h := range hosts {
		if h.name == name {
			return h.defaultURL
		}
	}
	return ""
}
