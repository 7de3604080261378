// Command exchangesim serves the local Binance simulator (package
// e2e/exchangesim) for benchmarks and manual runs: spot on /api/v3/...,
// USDⓈ-M futures on /fapi/v1/... and /futures/data/..., all on one
// loopback address, with Binance's documented weights and limits per IP,
// the market streams on ws://<addr>/stream (spot) and /market/stream
// (USDⓈ-M), and GET /sim/stats for the peak weight per window, the 429
// and 418 counts and the stream traffic. Point marketd at it with
// MARKET_FEED_URLS: binance and binance-futures http://<addr>,
// binance-stream and binance-futures-stream ws://<addr>; an OANDA v20
// account is served on the same address (oanda and oanda-stream
// http://<addr>).
//
// The same address serves Alpaca's stock APIs: the Trading API
// (/v2/assets, /v2/calendar, /v2/clock), market data v2 (/v2/stocks/...)
// and the market-data websocket (ws://<addr>/v2/{iex,sip,delayed_sip,test}),
// with the plan's limits per key (MARKET_FEED_URLS: alpaca and
// alpaca-data http://<addr>, alpaca-stream ws://<addr>).
//
// With -archive-months it serves Binance's public data archive of the
// spot universe under /archive (MARKET_FEED_URLS binance-archive
// http://<addr>/archive), generated on request (feeds/archivetest).
//
//	go run ./e2e/cmd/exchangesim [-addr 127.0.0.1:19500] [-seed 1] [-spot 1200] [-perpetual 400] [-window 1m] [-spot-limit 6000] [-futures-limit 2400] [-stream-attempts 300] [-stream-max-age 24h] [-clock-offset 14h25m] [-alpaca-assets 11500] [-alpaca-plan free] [-alpaca-data-limit 0] [-alpaca-keys id:secret] [-oanda-account 101-004-1234567-001] [-oanda-token sim-oanda-token] [-oanda-pairs 68]
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/marketscreener/market/e2e/exchangesim"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:19500", "listen address (loopback only)")
	seed := flag.Int64("seed", 1, "seed of the universe's prices and volumes")
	spot := flag.Int("spot", 1200, "spot pairs")
	perp := flag.Int("perpetual", 400, "USDT-M perpetuals")
	window := flag.Duration("window", time.Minute, "weight-counting window (Binance: 1m)")
	spotLimit := flag.Int("spot-limit", 6000, "spot weight per IP and window")
	futLimit := flag.Int("futures-limit", 2400, "USDⓈ-M weight per IP and window")
	firstBan := flag.Duration("first-ban", 2*time.Minute, "first 418 ban; each next one doubles, up to 3 days")
	attempts := flag.Int("stream-attempts", 300, "stream connection attempts per IP in 5 minutes, per family")
	maxAge := flag.Duration("stream-max-age", 24*time.Hour, "a stream connection is cut after this long")
	offset := flag.Duration("clock-offset", 0, "added to the wall clock the simulated market follows (a scale benchmark's shifted clock; marketd's MARKET_BENCH_CLOCK_OFFSET)")
	alpacaAssets := flag.Int("alpaca-assets", 11500, "Alpaca active us_equity assets")
	alpacaInactive := flag.Int("alpaca-inactive", 600, "Alpaca inactive assets")
	alpacaPlan := flag.String("alpaca-plan", "free", "Alpaca market-data plan: free (IEX, 200 data requests a minute, 30 stream symbols) or paid (SIP, 10,000, unlimited)")
	alpacaDataLimit := flag.Int("alpaca-data-limit", 0, "Alpaca market-data requests per key and minute (0: the plan's)")
	alpacaTradingLimit := flag.Int("alpaca-trading-limit", 200, "Alpaca Trading API requests per key and minute")
	alpacaKeys := flag.String("alpaca-keys", "", "accepted Alpaca key pairs, id:secret,... (empty: any non-empty pair)")
	oandaAccount := flag.String("oanda-account", "101-004-1234567-001", "OANDA v20 account id served (MARKET_OANDA_ACCOUNT_ID)")
	oandaToken := flag.String("oanda-token", "sim-oanda-token", "OANDA bearer token accepted (MARKET_OANDA_TOKEN)")
	oandaPairs := flag.Int("oanda-pairs", 68, "OANDA CURRENCY pairs of the account (1-68, the seven USD majors first)")
	archiveMonths := flag.Int("archive-months", 0, "serve Binance's public data archive under /archive: this many months of 1d, 4h and 1h klines before the current one (0: none)")
	archiveSymbols := flag.Int("archive-symbols", 0, "the archive's symbols: the first spot pairs of the universe (0: every one); beyond the universe, archive-only pairs delisted in the archive's last year")
	flag.Parse()
	if *oandaPairs < 1 || *oandaPairs > 68 {
		log.Fatalf("-oanda-pairs: %d is not between 1 and 68", *oandaPairs)
	}
	cfg := exchangesim.Config{Seed: *seed, Spot: *spot, Perpetual: *perp, Window: *window,
		SpotLimit: *spotLimit, FuturesLimit: *futLimit, FirstBan: *firstBan,
		StreamAttempts: *attempts, StreamMaxAge: *maxAge,
		Alpaca: exchangesim.AlpacaConfig{Assets: *alpacaAssets, Inactive: *alpacaInactive, Plan: exchangesim.AlpacaPlan(*alpacaPlan),
			DataLimit: *alpacaDataLimit, TradingLimit: *alpacaTradingLimit},
		Oanda:         exchangesim.OandaConfig{AccountID: *oandaAccount, Token: *oandaToken, Pairs: *oandaPairs},
		ArchiveMonths: *archiveMonths, ArchiveSymbols: *archiveSymbols}
	if *alpacaPlan != string(exchangesim.AlpacaFree) && *alpacaPlan != string(exchangesim.AlpacaPaid) {
		log.Fatalf("-alpaca-plan: %q is neither free nor paid", *alpacaPlan)
	}
	if *alpacaKeys != "" {
		cfg.Alpaca.Keys = map[string]string{}
		for _, pair := range strings.Split(*alpacaKeys, ",") {
			id, secret, ok := strings.Cut(pair, ":")
			if !ok || id == "" || secret == "" {
				log.Fatalf("-alpaca-keys: %q is not id:secret", pair)
			}
			cfg.Alpaca.Keys[id] = secret
		}
	}
	if *offset != 0 {
		off := *offset
		cfg.Now = func() time.Time { return time.Now().Add(off) }
	}
	if err := run(*addr, cfg); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, cfg exchangesim.Config) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr: %s is not a loopback address (the simulator is for this machine only)", host)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	sim := exchangesim.New(cfg)
	srv := &http.Server{Handler: sim, ConnState: sim.ConnState, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("exchangesim: serving Binance spot and USDⓈ-M on http://%s, streams on ws://%s (stats: /sim/stats)", ln.Addr(), ln.Addr())
	log.Printf("exchangesim: serving Alpaca (%s plan) on http://%s: /v2/assets, /v2/calendar, /v2/clock, /v2/stocks/{bars,snapshots,bars/latest}; stream ws://%s/v2/{iex,sip,delayed_sip,test}",
		cfg.Alpaca.Plan, ln.Addr(), ln.Addr())
	log.Printf("exchangesim: serving OANDA v20 account %s (token %q) on http://%s, pricing stream included: MARKET_FEED_URLS=oanda=http://%s,oanda-stream=http://%s",
		cfg.Oanda.AccountID, cfg.Oanda.Token, ln.Addr(), ln.Addr(), ln.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		sim.Close()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
