package app_test

import (
	"strings"
	"testing"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/feeds"
)

func loadConfig(env map[string]string) (app.Config, error) {
	return app.LoadConfig(func(k string) string { return env[k] })
}

// TestFeedURLsOverrideEveryHost: MARKET_FEED_URLS names any host of any
// feed; plain http:// and ws:// are accepted for local replays, and the
// stream hosts (read by the stream client) are kept like the others.
func TestFeedURLsOverrideEveryHost(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(map[string]string{"MARKET_FEED_URLS": " binance=http://127.0.0.1:9001 , binance-futures=https://testnet.binancefuture.com/," +
		"binance-stream=ws://127.0.0.1:9002,binance-futures-stream=wss://fstream.binancefuture.com,okx=https://okx.mirror.example/prefix," +
		"okx-stream=wss://wspap.okx.com:8443,coinbase=https://api-public.sandbox.exchange.coinbase.com,coinbase-advanced=http://127.0.0.1:9003," +
		"oanda=https://api-fxpractice.oanda.com,oanda-stream=http://127.0.0.1:9005,alpaca=https://paper-api.alpaca.markets,alpaca-data=http://127.0.0.1:9004,alpaca-stream=ws://127.0.0.1:19500,binance-archive=http://127.0.0.1:9006/archive"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.FeedURLs) != len(feeds.HostNames()) {
		t.Errorf("FeedURLs has %d hosts, want every one of %v: %v", len(cfg.FeedURLs), feeds.HostNames(), cfg.FeedURLs)
	}
	fc := feeds.Config{BaseURLs: cfg.FeedURLs}
	for name, want := range map[string]string{
		feeds.HostBinance:              "http://127.0.0.1:9001",
		feeds.HostBinanceFutures:       "https://testnet.binancefuture.com",
		feeds.HostBinanceStream:        "ws://127.0.0.1:9002",
		feeds.HostBinanceFuturesStream: "wss://fstream.binancefuture.com",
		feeds.HostOKX:                  "https://okx.mirror.example/prefix",
		feeds.HostAlpacaData:           "http://127.0.0.1:9004",
		feeds.HostOandaStream:          "http://127.0.0.1:9005",
		feeds.HostAlpacaStream:         "ws://127.0.0.1:19500",
		feeds.HostBinanceArchive:       "http://127.0.0.1:9006/archive",
	} {
		if got := fc.BaseURL(name); got != want {
			t.Errorf("BaseURL(%s) = %q, want %q", name, got, want)
		}
	}
	if cfg.MaxCandleSymbols != 0 {
		t.Errorf("MaxCandleSymbols defaults to %d, want 0 (all)", cfg.MaxCandleSymbols)
	}
}

// TestFeedHostDefaults: without overrides every host has its documented
// default (wss:// for the websockets, https:// for REST and OANDA's
// streaming HTTP); MARKET_OANDA_ENVIRONMENT=practice picks OANDA's practice
// hosts, and an explicit oanda= entry wins over it.
func TestFeedHostDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(map[string]string{"MARKET_FEEDS": "binance,okx"})
	if err != nil {
		t.Fatal(err)
	}
	fc := feeds.Config{BaseURLs: cfg.FeedURLs, OandaEnvironment: cfg.OandaEnvironment}
	for _, name := range feeds.HostNames() {
		want := "https://"
		if strings.HasSuffix(name, "-stream") && name != feeds.HostOandaStream {
			want = "wss://"
		}
		if got := fc.BaseURL(name); !strings.HasPrefix(got, want) {
			t.Errorf("default BaseURL(%s) = %q, want a %s URL", name, got, want)
		}
	}
	if got := fc.BaseURL(feeds.HostOanda); got != "https://api-fxtrade.oanda.com" {
		t.Errorf("oanda default = %q, want the live host", got)
	}
	if cfg.MaxCandleSymbols != 0 {
		t.Errorf("real feeds: MaxCandleSymbols defaults to %d, want 0 (all)", cfg.MaxCandleSymbols)
	}
	practice, err := loadConfig(map[string]string{"MARKET_OANDA_ENVIRONMENT": "practice"})
	if err != nil {
		t.Fatal(err)
	}
	fc = feeds.Config{BaseURLs: practice.FeedURLs, OandaEnvironment: practice.OandaEnvironment}
	if got := fc.BaseURL(feeds.HostOanda); got != "https://api-fxpractice.oanda.com" {
		t.Errorf("practice: oanda = %q, want the practice host", got)
	}
	if got := fc.BaseURL(feeds.HostOandaStream); got != "https://stream-fxpractice.oanda.com" {
		t.Errorf("practice: oanda-stream = %q, want the practice stream host", got)
	}
	mirror, err := loadConfig(map[string]string{"MARKET_OANDA_ENVIRONMENT": "practice", "MARKET_FEED_URLS": "oanda=http://127.0.0.1:9005"})
	if err != nil {
		t.Fatal(err)
	}
	fc = feeds.Config{BaseURLs: mirror.FeedURLs, OandaEnvironment: mirror.OandaEnvironment}
	if got := fc.BaseURL(feeds.HostOanda); got != "http://127.0.0.1:9005" {
		t.Errorf("practice with an oanda= entry: oanda = %q, want the entry", got)
	}
	capped, err := loadConfig(map[string]string{"MARKET_MAX_CANDLE_SYMBOLS": "50"})
	if err != nil || capped.MaxCandleSymbols != 50 {
		t.Errorf("MARKET_MAX_CANDLE_SYMBOLS=50: %d, %v; want the operator's cap", capped.MaxCandleSymbols, err)
	}
}

// TestFeedURLErrorsNameVariableAndEntry: a bad entry is a config error in
// one line naming MARKET_FEED_URLS and the entry.
func TestFeedURLErrorsNameVariableAndEntry(t *testing.T) {
	t.Parallel()
	for name, entry := range map[string]string{
		"unknown name":      "bitstamp=https://www.bitstamp.net",
		"no equals":         "binance",
		"empty url":         "okx=",
		"ftp":               "binance=ftp://api.binance.com",
		"ws for rest":       "okx=wss://ws.okx.com:8443",
		"https for stream":  "binance-stream=https://stream.binance.com",
		"wss for oanda":     "oanda-stream=wss://stream-fxtrade.oanda.com",
		"relative":          "coinbase=/products",
		"query":             "alpaca-data=https://data.alpaca.markets?feed=sip",
		"credentials":       "oanda=https://user:pw@api-fxtrade.oanda.com",
		"given twice":       "binance=https://a.example,binance=https://b.example",
		"not a url":         "binance=http://[::1",
		"oanda environment": "",
	} {
		env := map[string]string{"MARKET_FEED_URLS": entry}
		entries := strings.Split(entry, ",")
		wantVar, wantText := "MARKET_FEED_URLS", entries[len(entries)-1]
		if name == "oanda environment" {
			env = map[string]string{"MARKET_OANDA_ENVIRONMENT": "sandbox"}
			wantVar, wantText = "MARKET_OANDA_ENVIRONMENT", "practice"
		}
		_, err := loadConfig(env)
		if err == nil || !strings.HasPrefix(err.Error(), wantVar+": ") || !strings.Contains(err.Error(), wantText) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one line naming %s and %q", name, err, wantVar, wantText)
		}
	}
}

// TestOandaAccountID: the oanda feed needs MARKET_OANDA_ACCOUNT_ID, in the
// v20 form "{siteID}-{divisionID}-{userID}-{accountNumber}"
// (oanda/v20-openapi, AccountID); either mistake names the variable.
func TestOandaAccountID(t *testing.T) {
	t.Parallel()
	base := map[string]string{"MARKET_FEEDS": "oanda", "MARKET_OANDA_TOKEN": "t"}
	with := func(id string) map[string]string {
		env := map[string]string{"MARKET_OANDA_ACCOUNT_ID": id}
		for k, v := range base {
			env[k] = v
		}
		return env
	}
	cfg, err := loadConfig(with("101-004-1234567-001"))
	if err != nil || cfg.OandaAccountID != "101-004-1234567-001" {
		t.Fatalf("valid id: %q, %v", cfg.OandaAccountID, err)
	}
	for name, env := range map[string]map[string]string{
		"missing":      base,
		"v1 number":    with("1234567"),
		"letters":      with("101-004-abc-001"),
		"empty groups": with("101--1234567-001"),
	} {
		_, err := loadConfig(env)
		if err == nil || !strings.HasPrefix(err.Error(), "MARKET_OANDA_ACCOUNT_ID: ") {
			t.Errorf("%s: err %v, want one naming MARKET_OANDA_ACCOUNT_ID", name, err)
		}
	}
}

// TestSyntheticAssetsSetting: MARKET_SYNTHETIC_ASSETS defaults to the
// synthetic feed's default universe, accepts a scale-benchmark size and
// refuses a value out of range naming the variable.
func TestSyntheticAssetsSetting(t *testing.T) {
	t.Parallel()
	def, err := loadConfig(nil)
	if err != nil || def.SyntheticAssets != feeds.SyntheticDefaultCryptoAssets {
		t.Fatalf("default: %d, %v; want %d", def.SyntheticAssets, err, feeds.SyntheticDefaultCryptoAssets)
	}
	big, err := loadConfig(map[string]string{"MARKET_SYNTHETIC_ASSETS": "2000"})
	if err != nil || big.SyntheticAssets != 2000 {
		t.Fatalf("2000: %d, %v", big.SyntheticAssets, err)
	}
	for _, bad := range []string{"0", "-5", "many", "20001"} {
		if _, err := loadConfig(map[string]string{"MARKET_SYNTHETIC_ASSETS": bad}); err == nil || !strings.Contains(err.Error(), "MARKET_SYNTHETIC_ASSETS") {
			t.Errorf("MARKET_SYNTHETIC_ASSETS=%s: %v, want an error naming the variable", bad, err)
		}
	}
}
