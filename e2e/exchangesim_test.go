package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/e2e/exchangesim"
)

// TestBinanceDeploymentAgainstTheSimulator: marketd all with
// MARKET_FEEDS=binance and every Binance host of MARKET_FEED_URLS pointed at
// the local simulator (40 spot pairs, 10 perpetuals, REST and streams)
// lists the simulator's universe in the screener, stores a closed 1m candle
// pushed by the stream within seconds of its close (REST candle ingest is
// scheduled every 10 minutes and defers to the live stream, so nothing else
// can deliver it that soon), scores every spot asset (the crypto analytics
// source) from the backfilled history, and never draws a 429 or 418.
func TestBinanceDeploymentAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	const nSpot, nPerp = 40, 10
	sim := exchangesim.New(exchangesim.Config{Seed: 7, Spot: nSpot, Perpetual: nPerp})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	d := newDeployment(t, map[string]string{
		"MARKET_FEEDS": "binance",
		"MARKET_FEED_URLS": fmt.Sprintf("binance=%s,binance-futures=%s,binance-stream=%s,binance-futures-stream=%s",
			srv.URL, srv.URL, ws, ws),
		"MARKET_TICKER_INTERVAL": "10s",
		"MARKET_CANDLE_INTERVAL": "10m",
	})
	key := d.cli("demo-key")
	start := time.Now()
	base, _ := d.start("all")

	poll(t, 30*time.Second, func() string {
		for inst, want := range map[string]int{"spot": nSpot, "perpetual": nPerp} {
			var rows []screenerRow
			status, problem := getJSON(t, base+"/screener/crypto/binance/"+inst, key, &rows)
			if status != 200 || len(rows) != want {
				return fmt.Sprintf("screener %s: %d %v (%d rows, want %d)", inst, status, problem["detail"], len(rows), want)
			}
		}
		return ""
	})
	poll(t, 30*time.Second, func() string {
		st := sim.Stats()
		if st.SpotStreams.Open == 0 || st.FuturesStreams.Open == 0 || st.SpotStreams.Pushed == 0 {
			return fmt.Sprintf("streams not connected: spot %+v, futures %+v", st.SpotStreams, st.FuturesStreams)
		}
		return ""
	})
	t.Logf("screener listed and streams connected %.1fs after start", time.Since(start).Seconds())

	// The next minute to close once the streams are up.
	closeAt := time.Now().Truncate(time.Minute).Add(time.Minute)
	open := closeAt.Add(-time.Minute)

	poll(t, 60*time.Second, func() string {
		var items []struct {
			Symbol string `json:"symbol"`
		}
		status, problem := getJSON(t, base+"/analytics/crypto/list", key, &items)
		if status != 200 || len(items) != nSpot {
			return fmt.Sprintf("analytics list: %d %v (%d of %d assets)", status, problem["detail"], len(items), nSpot)
		}
		return ""
	})
	t.Logf("every spot asset scored %.1fs after start", time.Since(start).Seconds())

	// Waiting for a moment of the clock, not a condition: the measured
	// delay starts at the close.
	time.Sleep(time.Until(closeAt))
	want := simClose(t, sim, "ETHUSDT", open)
	poll(t, 20*time.Second, func() string {
		var cs []candle
		status, problem := getJSON(t, base+"/ohlcv/crypto/binance/ETH_USDT/1m?limit=3", key, &cs)
		for _, c := range cs {
			if c.Time.Equal(open) && strconv.FormatFloat(c.Close, 'f', 8, 64) == want {
				return ""
			}
		}
		return fmt.Sprintf("ohlcv: %d %v: no closed candle at %s (close %s) in %+v", status, problem["detail"], open, want, cs)
	})
	t.Logf("the 1m candle closed at %s was served %.1fs after its close", closeAt.Format(time.TimeOnly), time.Since(closeAt).Seconds())

	st := sim.Stats()
	for name, f := range map[string]exchangesim.FamilyStats{"spot": st.Spot, "futures": st.Futures, "futures data": st.FuturesData} {
		if f.Refused429 != 0 || f.Banned418 != 0 {
			t.Errorf("%s REST: %d 429s, %d 418s", name, f.Refused429, f.Banned418)
		}
	}
	for name, s := range map[string]exchangesim.StreamStats{"spot": st.SpotStreams, "futures": st.FuturesStreams} {
		if s.Refused429 != 0 || len(s.Breaches) != 0 {
			t.Errorf("%s streams: %d refused, breaches %v", name, s.Refused429, s.Breaches)
		}
	}
	b, _ := json.Marshal(st)
	t.Logf("simulator: %s", b)
}

// simClose is the close of the simulator's 1m candle of symbol opening at
// open, as its REST klines give it once closed (asked from a client
// address of its own, so the deployment's budget is not spent).
func simClose(t *testing.T, sim http.Handler, symbol string, open time.Time) string {
	t.Helper()
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet,
		fmt.Sprintf("/api/v3/klines?symbol=%s&interval=1m&limit=1&startTime=%d", symbol, open.UnixMilli()), nil))
	var rows [][]any
	if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("simulator klines: %d %s", rec.Code, rec.Body)
	}
	return rows[0][4].(string)
}
