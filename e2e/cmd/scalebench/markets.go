package main

// The stock and forex markets beside crypto (-markets crypto,stocks,forex):
// stocks from the simulator's Alpaca part (-alpaca-assets active
// equities, -alpaca-plan), forex from its OANDA account (-oanda-pairs
// pairs), crypto from its Binance part, all in one `marketd all`.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/e2e/exchangesim"
)

// marketSet is the markets a run serves.
type marketSet struct{ crypto, stocks, forex bool }

func parseMarkets(s string) (marketSet, error) {
	var m marketSet
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "crypto":
			m.crypto = true
		case "stocks":
			m.stocks = true
		case "forex":
			m.forex = true
		default:
			return m, fmt.Errorf("-markets: %q is not crypto, stocks or forex", name)
		}
	}
	return m, nil
}

// feedEnv is marketd's feed settings for the markets against the
// simulator at host.
func (m marketSet) feedEnv(host, plan string) map[string]string {
	var feeds, urls []string
	env := map[string]string{}
	if m.crypto {
		feeds = append(feeds, "binance")
		urls = append(urls, fmt.Sprintf("binance=http://%s,binance-futures=http://%s,binance-stream=ws://%s,binance-futures-stream=ws://%s", host, host, host, host))
	}
	if m.stocks {
		feeds = append(feeds, "alpaca")
		urls = append(urls, fmt.Sprintf("alpaca=http://%s,alpaca-data=http://%s,alpaca-stream=ws://%s", host, host, host))
		env["MARKET_ALPACA_KEY_ID"], env["MARKET_ALPACA_SECRET"] = "scalebench-key", "scalebench-secret"
		env["MARKET_ALPACA_FEED"] = "iex"
		if plan == string(exchangesim.AlpacaPaid) {
			env["MARKET_ALPACA_FEED"] = "sip"
		}
	}
	if m.forex {
		feeds = append(feeds, "oanda")
		urls = append(urls, fmt.Sprintf("oanda=http://%s,oanda-stream=http://%s", host, host))
		env["MARKET_OANDA_TOKEN"], env["MARKET_OANDA_ACCOUNT_ID"] = "sim-oanda-token", "101-004-1234567-001"
	}
	env["MARKET_FEEDS"], env["MARKET_FEED_URLS"] = strings.Join(feeds, ","), strings.Join(urls, ",")
	return env
}

// alpacaServed maps Alpaca's exchange values to the catalogue's stock
// exchanges (README, "Alpaca (stocks)"); OTC is not served.
var alpacaServed = map[string]string{"NASDAQ": "nasdaq", "NYSE": "nyse", "ARCA": "arca", "NYSEARCA": "arca", "AMEX": "amex", "BATS": "bats"}

var newYork = func() *time.Location {
	l, err := time.LoadLocation("America/New_York")
	if err != nil {
		log.Fatal(err)
	}
	return l
}()

// reference is what the simulator process serves, read from a simulator
// of the same configuration in this process (the same seed, universe and
// clock): its budgets are its own, so the deployment's are not spent and
// the process's /sim/stats count marketd alone.
type reference struct {
	sim      *exchangesim.Sim
	stocks   map[string]int    // served exchange → active equities
	exchange map[string]string // symbol → served exchange
	scorable map[string]bool   // symbols with enough 4h history for a report
	majors   int               // forex
	minors   int
	feed     string // iex or sip
}

func newReference(o options, m marketSet) (*reference, error) {
	off := clockOffset
	sim := exchangesim.New(exchangesim.Config{Seed: 1, Spot: 2, Perpetual: 1,
		Alpaca: exchangesim.AlpacaConfig{Assets: o.alpacaAssets, Plan: exchangesim.AlpacaPlan(o.alpacaPlan)},
		Oanda:  exchangesim.OandaConfig{Pairs: o.oandaPairs},
		Now:    func() time.Time { return time.Now().Add(off) }})
	ref := &reference{sim: sim, stocks: map[string]int{}, exchange: map[string]string{}, scorable: map[string]bool{}, feed: "iex"}
	if o.alpacaPlan == string(exchangesim.AlpacaPaid) {
		ref.feed = "sip"
	}
	ref.majors = min(7, o.oandaPairs)
	ref.minors = o.oandaPairs - ref.majors
	if !m.stocks {
		return ref, nil
	}
	var assets []struct {
		Symbol, Exchange, Status string
		Attributes               []string
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v2/assets?status=active&asset_class=us_equity", nil)
	req.Header.Set("APCA-API-KEY-ID", "scalebench-reference")
	req.Header.Set("APCA-API-SECRET-KEY", "reference")
	sim.ServeHTTP(rec, req)
	if err := json.Unmarshal(rec.Body.Bytes(), &assets); rec.Code != http.StatusOK || err != nil {
		return nil, fmt.Errorf("reference simulator's assets: %d %v", rec.Code, err)
	}
	var listed []string // recent listings: their history may be short
	for _, a := range assets {
		ex, ok := alpacaServed[a.Exchange]
		if !ok || a.Status != "active" {
			continue
		}
		ref.stocks[ex]++
		ref.exchange[a.Symbol] = ex
		ref.scorable[a.Symbol] = true
		if slices.Contains(a.Attributes, "ipo") {
			listed = append(listed, a.Symbol)
		}
	}
	// A new series loads its newest 300 4h bars from far enough back
	// (feeds/alpaca.go, alpacaInitialStart); a stock listed since the
	// simulator's data start may have fewer than a report needs.
	from := now().Add(-300*4*time.Hour*3/2*7/5).AddDate(0, 0, -4)
	bars, err := sim.StockBarCounts(ref.feed, "4Hour", listed, from, time.Time{})
	if err != nil {
		return nil, err
	}
	short := 0
	for _, sym := range listed {
		if bars[sym] < analytics.MinCandles {
			delete(ref.scorable, sym)
			short++
		}
	}
	log.Printf("reference: %d active stocks served on %d exchanges, %d with enough 4h history (%d recent listings, %d short)",
		len(ref.exchange), len(ref.stocks), len(ref.scorable), len(listed), short)
	return ref, nil
}

// stockBar says whether sym has a 1m bar opening at open on the feed (a
// minute without a trade has none).
func (ref *reference) stockBar(sym string, open time.Time) bool {
	bars, err := ref.sim.StockBarCounts(ref.feed, "1Min", []string{sym}, open, open)
	if err != nil {
		log.Printf("reference bar: %v", err)
		return false
	}
	return bars[sym] > 0
}

func (ref *reference) close() { ref.sim.Close() }

// inSession says whether the minute opening at open is in the regular
// session of a weekday (9:30-16:00 New York; holidays are not known
// here: the reference's bars tell).
func inSession(open time.Time) bool {
	t := open.In(newYork)
	m := t.Hour()*60 + t.Minute()
	return t.Weekday() != time.Saturday && t.Weekday() != time.Sunday && m >= 9*60+30 && m < 16*60
}

// forexOpen says whether OANDA trades at t (Sunday 17:00 to Friday 17:00
// New York).
func forexOpen(t time.Time) bool {
	ny := t.In(newYork)
	switch ny.Weekday() {
	case time.Saturday:
		return false
	case time.Friday:
		return ny.Hour() < 17
	case time.Sunday:
		return ny.Hour() >= 17
	}
	return true
}

// coldFigure is one cold-start goal: from marketd's start until check
// first says done.
type coldFigure struct {
	name, goal string
	limit      time.Duration
	mu         sync.Mutex
	took       time.Duration
	done       bool
	detail     string
	finished   chan struct{}
}

// watchCold polls check every 2 s from now on until it is done or limit
// has passed since the start.
func (d *deployment) watchCold(name, goal string, limit time.Duration, check func() (bool, string)) *coldFigure {
	c := &coldFigure{name: name, goal: goal, limit: limit, finished: make(chan struct{})}
	go func() {
		defer close(c.finished)
		for {
			ok, detail := check()
			took := now().Sub(d.start)
			c.mu.Lock()
			c.took, c.done, c.detail = took, ok, detail
			c.mu.Unlock()
			if ok || took > limit {
				return
			}
			time.Sleep(2 * time.Second)
		}
	}()
	return c
}

func (c *coldFigure) get() (time.Duration, bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.took, c.done, c.detail
}

// stockAndForexCold starts the cold-start watches of the stocks and
// forex goals.
func (d *deployment) stockAndForexCold(o options, m marketSet, ref *reference) []*coldFigure {
	var out []*coldFigure
	screener := func(path string, want int) (bool, string) {
		var rows []json.RawMessage
		if _, err := d.getJSON(path, &rows); err != nil {
			return false, fmt.Sprintf("%s: %v", path, shortErr(err))
		}
		return len(rows) == want, fmt.Sprintf("%s %d/%d", path[strings.Index(path[1:], "/")+2:], len(rows), want)
	}
	all := func(checks ...func() (bool, string)) func() (bool, string) {
		return func() (bool, string) {
			ok, parts := true, []string(nil)
			for _, c := range checks {
				good, detail := c()
				ok = ok && good
				parts = append(parts, detail)
			}
			return ok, strings.Join(parts, ", ")
		}
	}
	if m.stocks {
		var checks []func() (bool, string)
		for _, ex := range slices.Sorted(maps.Keys(ref.stocks)) {
			checks = append(checks, func() (bool, string) { return screener("/screener/stocks/"+ex+"/stock", ref.stocks[ex]) })
		}
		out = append(out, d.watchCold(fmt.Sprintf("cold start → every active stock in its screener (%d)", len(ref.exchange)), "< 2 min", o.coldLimit, all(checks...)))
		out = append(out, d.watchCold(fmt.Sprintf("cold start → every stock with enough history has a report (%d of %d)", len(ref.scorable), len(ref.exchange)),
			"< 20 min", o.stockColdLimit, func() (bool, string) {
				n := d.reportsOf("stocks", "swing", ref.scorable)
				return n == len(ref.scorable), fmt.Sprintf("%d/%d", n, len(ref.scorable))
			}))
	}
	if m.forex {
		out = append(out, d.watchCold(fmt.Sprintf("cold start → every OANDA pair in its screener (%d)", ref.majors+ref.minors), "< 2 min", o.coldLimit,
			all(func() (bool, string) { return screener("/screener/forex/oanda/major", ref.majors) },
				func() (bool, string) { return screener("/screener/forex/oanda/minor", ref.minors) })))
		out = append(out, d.watchCold(fmt.Sprintf("cold start → every OANDA pair has a report (%d)", ref.majors+ref.minors), "", o.coldLimit,
			func() (bool, string) {
				n := d.reportsOf("forex", "swing", nil)
				return n >= ref.majors+ref.minors, fmt.Sprintf("%d/%d", n, ref.majors+ref.minors)
			}))
	}
	return out
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// reportsOf counts the reports of a market and style (of the symbols in
// only, unless nil).
func (d *deployment) reportsOf(market, style string, only map[string]bool) int {
	rows, err := d.db.Query(context.Background(), `SELECT symbol FROM analytics_reports WHERE market = $1 AND style = $2`, market, style)
	if err != nil {
		return 0
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var s string
		if rows.Scan(&s) == nil && (only == nil || only[s]) {
			n++
		}
	}
	return n
}

// series is one market's sampled 1m series.
type series struct{ market, exchange, symbol string }

// minuteSamples are the series whose closed 1m candle is timed, per
// group: crypto, the stocks Alpaca's stream delivers, the stocks REST
// polls, forex.
type minuteSamples map[string][]series

const (
	groupCrypto   = "crypto (binance spot, streamed)"
	groupStreamed = "stocks on Alpaca's stream"
	groupPolled   = "stocks polled over REST"
	groupForex    = "forex (OANDA, polled)"
)

// stockAndForexSamples picks the stock series Alpaca's stream delivers
// (the worker's push:series sets in Redis), liquid ones it does not
// (REST), and forex pairs.
func (d *deployment) stockAndForexSamples(o options, m marketSet, ref *reference, into minuteSamples) {
	if m.forex {
		for _, p := range []string{"EUR_USD", "USD_JPY", "GBP_USD", "AUD_USD", "USD_CAD", "USD_CHF", "NZD_USD"}[:min(7, ref.majors)] {
			into[groupForex] = append(into[groupForex], series{"forex", "oanda", p})
		}
	}
	if !m.stocks {
		return
	}
	streamed := map[string]bool{}
	if opts, err := redis.ParseURL(d.vars["MARKET_REDIS_URL"]); err == nil {
		rdb := redis.NewClient(opts)
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, "*push:series:stocks:*:1m").Result()
		for _, k := range keys {
			syms, _ := rdb.SMembers(ctx, k).Result()
			for _, s := range syms {
				streamed[s] = true
			}
		}
		rdb.Close()
	}
	type row struct {
		Symbol string  `json:"symbol"`
		Volume float64 `json:"volume"`
	}
	var rows []row
	for ex := range ref.stocks {
		var rs []row
		if _, err := d.getJSON("/screener/stocks/"+ex+"/stock", &rs); err == nil {
			rows = append(rows, rs...)
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.Volume, a.Volume) })
	if len(streamed) == 0 { // no set read: the free plan streams the 30 highest volumes
		log.Printf("no push:series set in Redis: taking the 30 highest screener volumes as streamed")
		for _, r := range rows[:min(30, len(rows))] {
			streamed[r.Symbol] = true
		}
	}
	var polled []string
	for i, r := range rows {
		if streamed[r.Symbol] {
			into[groupStreamed] = append(into[groupStreamed], series{"stocks", ref.exchange[r.Symbol], r.Symbol})
		} else if i < 400 { // liquid: a bar nearly every minute
			polled = append(polled, r.Symbol)
		}
	}
	for _, s := range spread(polled, 5*o.perMinute) {
		into[groupPolled] = append(into[groupPolled], series{"stocks", ref.exchange[s], s})
	}
	log.Printf("stock samples: %d streamed (of %d in the streams' sets), %d polled", len(into[groupStreamed]), len(streamed), len(into[groupPolled]))
}

// scoredClose is a market's style scored at a timeframe's close.
type scoredClose struct {
	market, style, label string
	tf                   time.Duration
	at                   func(b time.Time) bool // whether b closes a candle of it
	watch                time.Duration
}

func (s scoredClose) key() string { return s.market + " " + s.style }

// scoredCloses lists the closes a run watches.
func scoredCloses(m marketSet) []scoredClose {
	var out []scoredClose
	if m.crypto {
		for _, st := range styles {
			out = append(out, scoredClose{market: "crypto", style: st.name, label: "closed " + st.label + " candle → crypto " + st.name,
				tf: st.tf, at: func(b time.Time) bool { return b.Truncate(st.tf).Equal(b) }, watch: time.Minute})
		}
	}
	if m.stocks {
		// Alpaca's 4h bars are aligned on midnight New York: the 12:00-16:00
		// bar closes with the session.
		out = append(out, scoredClose{market: "stocks", style: "swing", label: "16:00 New York close (4h bar) → stock swing",
			tf: 4 * time.Hour, at: func(b time.Time) bool {
				t := b.In(newYork)
				return t.Hour() == 16 && t.Minute() == 0 && t.Weekday() != time.Saturday && t.Weekday() != time.Sunday
			}, watch: 3 * time.Minute})
	}
	if m.forex {
		out = append(out, scoredClose{market: "forex", style: "swing", label: "closed 4h candle → forex swing",
			tf: 4 * time.Hour, at: func(b time.Time) bool { return b.Truncate(4*time.Hour).Equal(b) && forexOpen(b.Add(-time.Minute)) }, watch: time.Minute})
	}
	return out
}

// memSampler follows marketd's resident memory (/proc/<pid>/status) and
// the machine's load average (/proc/loadavg, the 1-minute one).
type memSampler struct {
	mu                sync.Mutex
	coldPeak, steady  int64 // VmRSS peaks, kB
	hwm, last         int64
	inSteady, stopped bool
	load              loadStats
}

// loadStats summarise the 1-minute load average's samples.
type loadStats struct {
	sum, max float64
	n        int
}

func (l loadStats) String() string {
	if l.n == 0 {
		return "not sampled"
	}
	return fmt.Sprintf("mean %.1f, max %.1f", l.sum/float64(l.n), l.max)
}

func (d *deployment) sampleMemory() *memSampler {
	s := &memSampler{}
	go func() {
		for {
			rss, hwm := procMem(d.proc.Process.Pid)
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			if b, err := os.ReadFile("/proc/loadavg"); err == nil {
				if f := strings.Fields(string(b)); len(f) > 0 {
					if v, err := strconv.ParseFloat(f[0], 64); err == nil {
						s.load.sum, s.load.max, s.load.n = s.load.sum+v, max(s.load.max, v), s.load.n+1
					}
				}
			}
			if rss > 0 {
				s.last, s.hwm = rss, max(s.hwm, hwm)
				if s.inSteady {
					s.steady = max(s.steady, rss)
				} else {
					s.coldPeak = max(s.coldPeak, rss)
				}
			}
			s.mu.Unlock()
			time.Sleep(2 * time.Second)
		}
	}()
	return s
}

func (s *memSampler) steadyFromNow() { s.mu.Lock(); s.inSteady = true; s.mu.Unlock() }

func (s *memSampler) stop() (coldPeak, steadyPeak, hwm, last int64, load loadStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	return s.coldPeak, s.steady, s.hwm, s.last, s.load
}

// procMem is VmRSS and VmHWM of pid in kB.
func procMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

// simMark marks the end of the warm-up in the simulator's counters.
func simMark(addr string) error {
	resp, err := http.Post("http://"+addr+"/sim/stats/mark", "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /sim/stats/mark: %d", resp.StatusCode)
	}
	return nil
}

// verdict is "met" or "NOT met".
func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**NOT met**"
}
