package e2e_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/e2e/exchangesim"
)

// The stock exchanges of the catalogue, by Alpaca's exchange values.
var alpacaServed = map[string]string{"NASDAQ": "nasdaq", "NYSE": "nyse", "ARCA": "arca", "NYSEARCA": "arca", "AMEX": "amex", "BATS": "bats"}

// TestStocksAndForexDeploymentAgainstTheSimulators: marketd all with
// MARKET_FEEDS=alpaca,oanda and every Alpaca and OANDA host of
// MARKET_FEED_URLS (the push feeds' alpaca-stream and oanda-stream included)
// pointed at the local simulator lists every active equity of the served
// exchanges in its exchange's screener (none of OTC, no inactive one) and
// every currency pair of the account in majors or minors, scores every
// stock and every pair, serves a class share's daily candles as the
// simulator's bars, names the feed in the reports' data quality, follows
// OANDA's pricing stream, and never draws a 429. It holds on any day: the
// simulated markets keep their history through weekends and holidays.
func TestStocksAndForexDeploymentAgainstTheSimulators(t *testing.T) {
	t.Parallel()
	const pairs = 12
	sim := exchangesim.New(exchangesim.Config{Seed: 7, Spot: 2, Perpetual: 1,
		Alpaca: exchangesim.AlpacaConfig{Assets: 160, Inactive: 8, Plan: exchangesim.AlpacaPaid},
		Oanda:  exchangesim.OandaConfig{Pairs: pairs}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	d := newDeployment(t, map[string]string{
		"MARKET_FEEDS":         "alpaca,oanda",
		"MARKET_ALPACA_KEY_ID": "e2e-key", "MARKET_ALPACA_SECRET": "e2e-secret", "MARKET_ALPACA_FEED": "sip",
		"MARKET_OANDA_TOKEN": "sim-oanda-token", "MARKET_OANDA_ACCOUNT_ID": "101-004-1234567-001",
		"MARKET_FEED_URLS": fmt.Sprintf("alpaca=%s,alpaca-data=%s,alpaca-stream=%s,oanda=%s,oanda-stream=%s",
			srv.URL, srv.URL, "ws"+strings.TrimPrefix(srv.URL, "http"), srv.URL, srv.URL),
		"MARKET_TICKER_INTERVAL": "10s",
		"MARKET_CANDLE_INTERVAL": "1m",
	})
	byExchange, classShare, symbols := simEquities(t, sim)
	scorable := simScorable(t, sim, symbols)
	key := d.cli("demo-key")
	start := time.Now()
	base, _ := d.start("all")

	total := 0
	for _, n := range byExchange {
		total += n
	}
	poll(t, 60*time.Second, func() string {
		for ex, want := range byExchange {
			var rows []screenerRow
			status, problem := getJSON(t, base+"/screener/stocks/"+ex+"/stock", key, &rows)
			if status != 200 || len(rows) != want {
				return fmt.Sprintf("screener stocks/%s: %d %v (%d rows, want %d)", ex, status, problem["detail"], len(rows), want)
			}
		}
		for inst, want := range map[string]int{"major": 7, "minor": pairs - 7} {
			var rows []screenerRow
			status, problem := getJSON(t, base+"/screener/forex/oanda/"+inst, key, &rows)
			if status != 200 || len(rows) != want {
				return fmt.Sprintf("screener forex/oanda/%s: %d %v (%d rows, want %d)", inst, status, problem["detail"], len(rows), want)
			}
		}
		return ""
	})
	t.Logf("%d stocks on %d exchanges and %d pairs listed %.1fs after start", total, len(byExchange), pairs, time.Since(start).Seconds())

	type item struct {
		Symbol string `json:"symbol"`
		Source struct {
			Exchange string `json:"exchange"`
			DataFeed string `json:"data_feed"`
		} `json:"source"`
	}
	var stocks []item
	// A functional bound, not a goal (BENCHMARKS measures the cold start):
	// on a 2-core host running the rest of the suite beside it, this took
	// 99 s at load 15, and once more than 150 s (the simulator's 10,000-bar
	// pages timed out under that load, four attempts each, and the stocks'
	// candles came with the next ingest).
	poll(t, 240*time.Second, func() string {
		for m, want := range map[string]int{"stocks": scorable, "forex": pairs} {
			var items []item
			status, problem := getJSON(t, base+"/analytics/"+m+"/list", key, &items)
			if status != 200 || len(items) != want {
				return fmt.Sprintf("analytics %s: %d %v (%d of %d assets)", m, status, problem["detail"], len(items), want)
			}
			if m == "stocks" {
				stocks = items
			}
		}
		return ""
	})
	t.Logf("every stock with enough history (%d of %d) and every pair scored %.1fs after start", scorable, total, time.Since(start).Seconds())
	exchanges := map[string]bool{}
	for _, it := range stocks {
		exchanges[it.Source.Exchange] = true
		if it.Source.DataFeed != "alpaca/sip" {
			t.Fatalf("%s: data_feed %q, want alpaca/sip", it.Symbol, it.Source.DataFeed)
		}
	}
	if len(exchanges) != len(byExchange) {
		t.Errorf("reports scored from %v, want every stock exchange (%d)", exchanges, len(byExchange))
	}

	// A class share, by its dotted symbol, as the simulator's daily bars.
	// The display-only timeframes load after the scored one's first pass.
	var cs []candle
	poll(t, 60*time.Second, func() string {
		if status, problem := getJSON(t, base+"/ohlcv/stocks/nyse/"+classShare+"/1d?limit=5", key, &cs); status != 200 || len(cs) != 5 {
			return fmt.Sprintf("ohlcv of %s: %d %v (%d candles)", classShare, status, problem["detail"], len(cs))
		}
		return ""
	})
	want := simDailyBars(t, sim, classShare, cs[0].Time.Add(-24*time.Hour))
	for _, c := range cs[:4] { // the newest may still be forming
		b, ok := want[c.Time.Format(time.DateOnly)]
		if !ok || math.Abs(b.Close-c.Close) > 1e-9 || math.Abs(b.Volume-c.Volume) > 1e-6 {
			t.Errorf("%s %s: served %+v, simulator %+v", classShare, c.Time.Format(time.DateOnly), c, b)
		}
	}

	poll(t, 30*time.Second, func() string {
		if a := sim.Stats().Alpaca.Stream; a.Authenticated == 0 || a.Open != 1 {
			return fmt.Sprintf("alpaca stream: %+v, want one authenticated connection", a)
		}
		return ""
	})
	st := sim.Stats()
	if st.Oanda.Streams.Open != 1 || st.Oanda.Streams.Heartbeats+st.Oanda.Streams.Prices == 0 {
		t.Errorf("oanda pricing stream: %+v, want one connection delivering", st.Oanda.Streams)
	}
	for name, l := range map[string]exchangesim.AlpacaLimitStats{"trading": st.Alpaca.Trading, "data": st.Alpaca.Data} {
		if l.Refused429 != 0 || l.SentDuring429 != 0 {
			t.Errorf("alpaca %s: %d 429s, %d requests inside a 429's window", name, l.Refused429, l.SentDuring429)
		}
	}
	if st.Alpaca.URITooLong != 0 || st.Oanda.Refused429 != 0 {
		t.Errorf("refusals: %d URIs too long (alpaca), %d 429s (oanda)", st.Alpaca.URITooLong, st.Oanda.Refused429)
	}
	b, _ := json.Marshal(st)
	t.Logf("simulator: %s", b)
}

// simEquities reads the simulator's active equities (with a key of its
// own, so the deployment's budget is not spent) and returns how many each
// served exchange lists, a class share on NYSE, and every served symbol.
func simEquities(t *testing.T, sim http.Handler) (map[string]int, string, []string) {
	t.Helper()
	var assets []struct {
		Symbol, Exchange, Status, Class string
	}
	simGet(t, sim, "/v2/assets?status=active&asset_class=us_equity", &assets)
	out := map[string]int{}
	share := ""
	var symbols []string
	for _, a := range assets {
		ex, ok := alpacaServed[a.Exchange]
		if !ok || a.Status != "active" {
			continue
		}
		out[ex]++
		symbols = append(symbols, a.Symbol)
		if ex == "nyse" && share == "" && strings.Contains(a.Symbol, ".") {
			share = a.Symbol
		}
	}
	if share == "" || len(out) != 5 {
		t.Fatalf("the simulator lists %v and no NYSE class share (%q): grow its universe", out, share)
	}
	return out, share, symbols
}

// simScorable counts the symbols with enough 4h bars (the stocks' scored
// timeframe) to be scored within the history a new series loads: 300 bars
// back over nights and weekends (feeds/alpaca.go), the SIP feed.
func simScorable(t *testing.T, sim *exchangesim.Sim, symbols []string) int {
	t.Helper()
	from := time.Now().Add(-300*4*time.Hour*3/2*7/5).AddDate(0, 0, -4)
	bars, err := sim.StockBarCounts("sip", "4Hour", symbols, from, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sym := range symbols {
		if bars[sym] >= analytics.MinCandles {
			n++
		}
	}
	if n == 0 {
		t.Fatal("no simulated stock has enough history")
	}
	return n
}

type simBar struct {
	Time string  `json:"t"`
	C    float64 `json:"c"`
	V    float64 `json:"v"`
}

// simDailyBars is the simulator's SIP daily bars of symbol from a day, by
// New York date.
func simDailyBars(t *testing.T, sim http.Handler, symbol string, from time.Time) map[string]candle {
	t.Helper()
	var r struct {
		Bars map[string][]simBar `json:"bars"`
	}
	simGet(t, sim, "/v2/stocks/bars?feed=sip&timeframe=1Day&adjustment=raw&symbols="+symbol+"&start="+from.UTC().Format(time.RFC3339), &r)
	ny, _ := time.LoadLocation("America/New_York")
	out := map[string]candle{}
	for _, b := range r.Bars[symbol] {
		at, err := time.Parse(time.RFC3339, b.Time)
		if err != nil {
			t.Fatal(err)
		}
		out[at.In(ny).Format(time.DateOnly)] = candle{Close: b.C, Volume: b.V}
	}
	return out
}

func simGet(t *testing.T, sim http.Handler, path string, out any) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("APCA-API-KEY-ID", "e2e-reader")
	req.Header.Set("APCA-API-SECRET-KEY", "e2e-reader-secret")
	sim.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("simulator %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("simulator %s: %v", path, err)
	}
}
