package worker_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// alpacaStocks are the stock exchanges Alpaca serves in the us region.
var alpacaStocks = []domain.Combination{
	{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}, {Market: domain.Stocks, Exchange: "nyse", Instrument: "stock"},
	{Market: domain.Stocks, Exchange: "arca", Instrument: "stock"}, {Market: domain.Stocks, Exchange: "amex", Instrument: "stock"},
	{Market: domain.Stocks, Exchange: "bats", Instrument: "stock"},
}

// alpacaPushBench is a push ingest of the us region on the alpaca feed,
// against the in-process simulator (REST and websocket), whose pushes the
// test steps with its clock.
type alpacaPushBench struct {
	t     *testing.T
	clk   *atomicClock
	sim   *exchangesim.Sim
	ticks chan time.Time
	db    *store.DB
	in    *worker.Ingester
	rest  feeds.BulkCandleProvider
	// symbols are the symbols of every exchange listing some.
	symbols map[domain.Combination][]string
}

// tuesdayNY is a session day, 10:10:30 in New York.
var tuesdayNY = time.Date(2026, 11, 24, 15, 10, 30, 0, time.UTC)

func newAlpacaStreamBench(t *testing.T, plan exchangesim.AlpacaPlan, feed string, assets int) *alpacaPushBench {
	t.Helper()
	b := &alpacaPushBench{t: t, clk: newAtomicClock(tuesdayNY), ticks: make(chan time.Time)}
	b.sim = exchangesim.New(exchangesim.Config{Seed: 7, Now: b.clk.now,
		Alpaca: exchangesim.AlpacaConfig{Plan: plan, Assets: assets, Inactive: 10, DataLimit: 100000, Tick: b.ticks}})
	srv := httptest.NewServer(b.sim)
	t.Cleanup(srv.Close)
	t.Cleanup(b.sim.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{feeds.NameAlpaca}, AlpacaKeyID: "key", AlpacaSecret: "secret", AlpacaFeed: feed,
		BaseURLs: map[string]string{feeds.HostAlpaca: srv.URL, feeds.HostAlpacaData: srv.URL}, Now: b.clk.now})
	if err != nil {
		t.Fatal(err)
	}
	b.rest = reg.Providers()[0].(feeds.BulkCandleProvider)
	b.db = storetest.New(t)
	b.in = &worker.Ingester{Store: b.db, Feeds: reg, Logger: discard(), Now: b.clk.now}
	ctx := context.Background()
	b.symbols = map[domain.Combination][]string{}
	for _, c := range alpacaStocks {
		syms, err := reg.Providers()[0].Symbols(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(syms) == 0 {
			continue // a small universe may list none on an exchange
		}
		b.symbols[c] = syms
		// The screener volumes the stream's symbols are ranked by.
		if err := b.in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(c, b.clk.now())); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	b.in.Pushed = worker.PushedCandles(rdb, prefix)
	s := &worker.PushIngest{In: b.in, Region: "us", Redis: rdb, KeyPrefix: prefix, Logger: discard(),
		FlushEvery: 10 * time.Millisecond, OpenEvery: 10 * time.Millisecond,
		Push: push.Config{BaseURLs: map[string]string{push.NameAlpacaStream: "ws" + strings.TrimPrefix(srv.URL, "http")},
			Alpaca: push.AlpacaConfig{KeyID: "key", Secret: "secret", Feed: feed}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

// stored is a series' stored candles.
func (b *alpacaPushBench) stored(c domain.Combination, sym string, tf domain.Timeframe) []domain.Candle {
	b.t.Helper()
	cs, err := b.db.Candles(context.Background(), store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: tf}, 1000)
	if err != nil {
		b.t.Fatal(err)
	}
	return cs
}

// restBars are the simulator's REST bars of symbols at open, now.
func (b *alpacaPushBench) restBars(c domain.Combination, syms []string, tf domain.Timeframe, open time.Time) map[string]domain.Candle {
	b.t.Helper()
	from := map[string]time.Time{}
	for _, s := range syms {
		from[s] = open
	}
	got, bad, err := b.rest.BulkCandles(context.Background(), c, tf, from, 1)
	if err != nil || len(bad) > 0 {
		b.t.Fatalf("REST bars: %v %v", err, bad)
	}
	out := map[string]domain.Candle{}
	for s, cs := range got {
		if len(cs) > 0 && cs[0].Time.Equal(open) {
			out[s] = cs[0]
		}
	}
	return out
}

// topVolumes are the n symbols of the highest screener volumes of every
// stock exchange together, by exchange.
func (b *alpacaPushBench) topVolumes(n int) map[domain.Combination][]string {
	b.t.Helper()
	type row struct {
		c   domain.Combination
		sym string
		vol float64
	}
	var rows []row
	for _, c := range alpacaStocks {
		ts, err := b.db.Tickers(context.Background(), c)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, tk := range ts {
			rows = append(rows, row{c, tk.Symbol, tk.Volume})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].vol > rows[j].vol })
	out := map[domain.Combination][]string{}
	for _, r := range rows[:n] {
		out[r.c] = append(out[r.c], r.sym)
	}
	for _, syms := range out {
		slices.Sort(syms)
	}
	return out
}

// pushedMinuteBars waits for the catch-up of the pushed series (their
// daily history, loaded after the minute one), then closes the minute on
// the simulator's clock and has it push; it returns REST's bars of that
// minute, by exchange and symbol, once every one is stored, and checks
// they are stored as REST serves them.
func (b *alpacaPushBench) pushedMinuteBars(pushed map[domain.Combination][]string) map[domain.Combination]map[string]domain.Candle {
	t := b.t
	t.Helper()
	for c, syms := range pushed {
		for _, sym := range syms {
			pushtest.Eventually(t, "the catch-up of "+sym, func() bool { return len(b.stored(c, sym, domain.TF1d)) > 0 })
		}
	}
	minute := tuesdayNY.Truncate(time.Minute)
	for c, syms := range pushed {
		for _, sym := range syms {
			if cs := b.stored(c, sym, domain.TF1m); len(cs) > 0 && !cs[len(cs)-1].Time.Before(minute) {
				t.Fatalf("%s: the %s candle is stored before its minute closed", sym, minute)
			}
		}
	}
	b.clk.add(30*time.Second + 50*time.Millisecond) // 15:11:00.05
	b.ticks <- b.clk.now()
	want := map[domain.Combination]map[string]domain.Candle{}
	n := 0
	for c, syms := range pushed {
		want[c] = b.restBars(c, syms, domain.TF1m, minute)
		n += len(want[c])
		for sym, bar := range want[c] {
			pushtest.Eventually(t, "the pushed "+sym+" bar stored", func() bool {
				cs := b.stored(c, sym, domain.TF1m)
				return len(cs) > 0 && cs[len(cs)-1].Time.Equal(minute)
			})
			cs := b.stored(c, sym, domain.TF1m)
			if diff := cmp.Diff(bar, cs[len(cs)-1]); diff != "" {
				t.Errorf("%s %s: stored minute bar differs from REST's (-rest +stored):\n%s", c, sym, diff)
			}
		}
	}
	if n < 5 {
		t.Fatalf("only %d pushed symbols traded in %s", n, minute)
	}
	return want
}

// TestPushIngestAlpacaFreePlan: on the free plan (iex: one connection,
// 30 symbols) the push ingest streams the 30 highest screener volumes of
// all the stock exchanges together; no exchange is marked live, and each
// names its pushed minute series; once the catch-up has loaded their
// history, a minute closing on the simulator's clock has its bars pushed
// and stored, equal to the simulator's REST bars, with no REST poll. The
// scheduled REST ingest then still loads every series of an exchange.
func TestPushIngestAlpacaFreePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newAlpacaStreamBench(t, exchangesim.AlpacaFree, feeds.AlpacaIEX, 150)
	top := b.topVolumes(30)
	for c := range b.symbols {
		pushtest.Eventually(t, c.Exchange+"'s pushed series named", func() bool {
			s := b.in.Pushed(ctx, c, domain.TF1m)
			var got []string
			for sym := range s.Symbols {
				got = append(got, sym)
			}
			slices.Sort(got)
			return !s.All && slices.Equal(got, top[c])
		})
		if s := b.in.Pushed(ctx, c, domain.TF1d); s.Any() {
			t.Errorf("%s: daily series pushed %+v; the daily bar so far is not final", c, s)
		}
	}
	if st := b.sim.Stats().Alpaca.Stream; st.Connections != 1 || len(st.Errors) != 0 {
		t.Fatalf("stream stats %+v: want one connection, no error", st)
	}

	b.pushedMinuteBars(top)
	minute := tuesdayNY.Truncate(time.Minute)
	nasdaq := alpacaStocks[0]
	others := slices.DeleteFunc(slices.Clone(b.symbols[nasdaq]), func(s string) bool { return slices.Contains(top[nasdaq], s) })
	if _, err := b.in.IngestCandles(ctx, nasdaq, domain.TF1m, nil); err != nil {
		t.Fatal(err)
	}
	polled := 0
	for sym, bar := range b.restBars(nasdaq, others, domain.TF1m, minute) {
		cs := b.stored(nasdaq, sym, domain.TF1m)
		if len(cs) == 0 || cs[len(cs)-1] != bar {
			t.Errorf("%s, not pushed: %d candles stored by the scheduled ingest, want its %s bar last", sym, len(cs), minute)
		}
		polled++
	}
	if polled == 0 {
		t.Fatal("no unpushed nasdaq symbol traded")
	}
}

// TestPushIngestAlpacaPaidPlan: on a paid plan (sip, no symbol limit)
// every symbol of every stock exchange is pushed: each exchange's minute
// series are marked pushed as a whole once the subscription is
// confirmed, the daily ones are not; the closed minute bars are stored as
// REST serves them, and the scheduled REST ingest of minute bars then
// loads only series with nothing stored: no request.
func TestPushIngestAlpacaPaidPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newAlpacaStreamBench(t, exchangesim.AlpacaPaid, feeds.AlpacaSIP, 25)
	for c := range b.symbols {
		pushtest.Eventually(t, c.Exchange+" minute bars pushed", func() bool { return b.in.Pushed(ctx, c, domain.TF1m).All })
		if s := b.in.Pushed(ctx, c, domain.TF1d); s.Any() {
			t.Errorf("%s: daily series pushed %+v; the daily bar so far is not final", c, s)
		}
	}
	b.pushedMinuteBars(b.symbols)
	before := b.sim.Stats().Alpaca.Data.Requests
	for c := range b.symbols {
		if _, err := b.in.IngestCandles(ctx, c, domain.TF1m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.sim.Stats().Alpaca.Data.Requests - before; n != 0 {
		t.Errorf("the scheduled minute-bar ingest of pushed exchanges sent %d requests, want none", n)
	}
}
