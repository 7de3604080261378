package push_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
)

// testClock is a clock the test moves while the source reads it.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// updateLog records what OnCandles received.
type updateLog struct {
	mu    sync.Mutex
	us    []push.CandleUpdate
	calls []int // the updates of each call
}

func (l *updateLog) add(us []push.CandleUpdate) {
	l.mu.Lock()
	l.us = append(l.us, us...)
	l.calls = append(l.calls, len(us))
	l.mu.Unlock()
}

// take returns the updates received so far and the number of each call's,
// and forgets them.
func (l *updateLog) take() ([]push.CandleUpdate, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	us, calls := l.us, l.calls
	l.us, l.calls = nil, nil
	return us, calls
}

func (l *updateLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.us)
}

// pushed is what the test compares: series, open time and closed flag.
type pushed struct {
	Symbol string
	TF     domain.Timeframe
	Open   string
	Closed bool
}

func summary(us []push.CandleUpdate) []pushed {
	out := make([]pushed, len(us))
	for i, u := range us {
		out[i] = pushed{u.Symbol, u.Timeframe, u.Candle.Time.Format("15:04"), u.Closed}
	}
	return out
}

// TestLocalReadsEveryMinuteClose: the in-process source delivers, at its
// start and at every tick, each series from the candle open at the
// previous read, shortest timeframe first: the closed candles flagged
// Closed and equal to what the feed serves once they are final, then the
// open one, each timeframe's updates in one call; a tick late by minutes
// delivers every close it missed; its plans are live while it runs.
func TestLocalReadsEveryMinuteClose(t *testing.T) {
	t.Parallel()
	clk := &testClock{}
	clk.set(time.Date(2026, 11, 23, 12, 0, 30, 0, time.UTC))
	feed := feeds.NewSynthetic(7, clk.now)
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	plan := push.Plan{Combination: spot, Series: []push.Series{
		{Symbol: "BTC_USDT", Timeframe: domain.TF1h}, {Symbol: "BTC_USDT", Timeframe: domain.TF1m}, {Symbol: "ETH_USDT", Timeframe: domain.TF1m},
	}}
	log := &updateLog{}
	ticks := make(chan time.Time)
	src := push.NewLocal(push.LocalConfig{Feed: feed, OnCandles: log.add, Now: clk.now, Ticks: ticks})
	if src.Live(spot) {
		t.Fatal("live before it runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = src.Run(ctx, []push.Plan{plan}); close(done) }()

	pushtest.Eventually(t, "the first read", func() bool { return log.len() == 6 })
	if !src.Live(spot) {
		t.Error("not live while running")
	}
	want := []pushed{
		{"BTC_USDT", domain.TF1m, "11:59", true}, {"BTC_USDT", domain.TF1m, "12:00", false},
		{"ETH_USDT", domain.TF1m, "11:59", true}, {"ETH_USDT", domain.TF1m, "12:00", false},
		{"BTC_USDT", domain.TF1h, "11:00", true}, {"BTC_USDT", domain.TF1h, "12:00", false},
	}
	got, calls := log.take()
	if diff := cmp.Diff(want, summary(got)); diff != "" {
		t.Errorf("first read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{4, 2}, calls); diff != "" {
		t.Errorf("first read's calls, 1m then 1h (-want +got):\n%s", diff)
	}

	clk.set(time.Date(2026, 11, 23, 12, 1, 0, 5e6, time.UTC))
	ticks <- clk.now()
	pushtest.Eventually(t, "the read of 12:01", func() bool { return log.len() == 5 })
	got, calls = log.take()
	want = []pushed{
		{"BTC_USDT", domain.TF1m, "12:00", true}, {"BTC_USDT", domain.TF1m, "12:01", false},
		{"ETH_USDT", domain.TF1m, "12:00", true}, {"ETH_USDT", domain.TF1m, "12:01", false},
		{"BTC_USDT", domain.TF1h, "12:00", false},
	}
	if diff := cmp.Diff(want, summary(got)); diff != "" {
		t.Errorf("read of 12:01 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{4, 1}, calls); diff != "" {
		t.Errorf("calls of the read of 12:01 (-want +got):\n%s", diff)
	}
	// The closed candle is the feed's final one, as a later read serves it.
	clk.add(time.Hour)
	final, err := feed.Candles(context.Background(), spot, "BTC_USDT", domain.TF1m, time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(final[0], got[0].Candle); diff != "" {
		t.Errorf("closed 12:00 candle differs from the final one (-want +got):\n%s", diff)
	}

	// Three minutes late: every close since the previous read.
	clk.set(time.Date(2026, 11, 23, 12, 4, 0, 5e6, time.UTC))
	ticks <- clk.now()
	pushtest.Eventually(t, "the read of 12:04", func() bool { return log.len() == 9 })
	want = []pushed{
		{"BTC_USDT", domain.TF1m, "12:01", true}, {"BTC_USDT", domain.TF1m, "12:02", true}, {"BTC_USDT", domain.TF1m, "12:03", true}, {"BTC_USDT", domain.TF1m, "12:04", false},
		{"ETH_USDT", domain.TF1m, "12:01", true}, {"ETH_USDT", domain.TF1m, "12:02", true}, {"ETH_USDT", domain.TF1m, "12:03", true}, {"ETH_USDT", domain.TF1m, "12:04", false},
		{"BTC_USDT", domain.TF1h, "12:00", false},
	}
	got, calls = log.take()
	if diff := cmp.Diff(want, summary(got)); diff != "" {
		t.Errorf("read of 12:04 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{8, 1}, calls); diff != "" {
		t.Errorf("calls of the read of 12:04 (-want +got):\n%s", diff)
	}

	cancel()
	<-done
	if src.Live(spot) {
		t.Error("live after it stopped")
	}
}
