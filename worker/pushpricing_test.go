package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// lockedLog is a log sink safe for the push ingest's goroutines.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestPushIngestFollowsOandaPricing runs the oanda feed and the stream
// ingest against the local OANDA simulator in process, on an injected
// clock: the pricing stream (one connection for the account's 68 pairs)
// fills the screener rows of every major and minor with the stream's mids,
// completed by the daily references; over the weekend the stream carries
// heartbeats alone, nothing is logged above info and the rows stay.
func TestPushIngestFollowsOandaPricing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var clockNS atomic.Int64
	clockNS.Store(time.Date(2025, 11, 19, 15, 31, 10, 0, time.UTC).UnixNano()) // a Wednesday
	now := func() time.Time { return time.Unix(0, clockNS.Load()).UTC() }
	sim := exchangesim.New(exchangesim.Config{Seed: 7, Now: now, Oanda: exchangesim.OandaConfig{
		HeartbeatEvery: 50 * time.Millisecond, PriceEvery: 10 * time.Millisecond, NewConnectionsPerSecond: 100}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	logs := &lockedLog{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	reg, err := feeds.New(feeds.Config{Names: []string{feeds.NameOanda}, OandaToken: "sim-oanda-token", OandaAccountID: "101-004-1234567-001",
		BaseURLs: map[string]string{feeds.HostOanda: srv.URL, feeds.HostOandaStream: srv.URL}, Now: now, Logger: logger,
		// The simulator's clock stands still between the test's moves: a
		// budget of new connections a second would make each wait longer.
		Limits: map[string]hostbudget.Limit{"oanda-connections": {Window: time.Second, Max: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: logger, Now: now}
	rdb := redistest.Client(t)
	s := &worker.PushIngest{In: in, Region: "global", Redis: rdb, KeyPrefix: redistest.Prefix(t), Logger: logger,
		TickerFlushEvery: 20 * time.Millisecond, Push: push.Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	if !worker.HasPushFeeds(reg, "global") {
		t.Fatal("the oanda feed alone: nothing to stream")
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	major := domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "major"}
	minor := domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "minor"}
	rows := func(c domain.Combination) []domain.Ticker {
		ts, err := db.Tickers(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	pushtest.Eventually(t, "a screener row for each of the 68 pairs", func() bool { return len(rows(major)) == 7 && len(rows(minor)) == 61 })
	for _, r := range append(rows(major), rows(minor)...) {
		if r.Volume <= 0 || r.Price <= 0 || r.UpdatedAt.After(now()) {
			t.Errorf("row %+v", r)
		}
	}
	if st := sim.Stats().Oanda.Streams; st.Accepted != 1 || st.Open != 1 {
		t.Errorf("streams %+v, want one connection for every pair", st)
	}
	eur := func() domain.Ticker {
		for _, r := range rows(major) {
			if r.Symbol == "EUR_USD" {
				return r
			}
		}
		return domain.Ticker{}
	}
	first := eur()
	clockNS.Add(int64(30 * time.Second)) // the prices move
	pushtest.Eventually(t, "EUR_USD's row follows the stream", func() bool { return eur().UpdatedAt.After(first.UpdatedAt) })

	// The weekend: Friday's last prices, not tradeable, then heartbeats.
	clockNS.Store(time.Date(2025, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	friday := time.Date(2025, 11, 21, 21, 59, 0, 0, time.UTC)
	pushtest.Eventually(t, "the rows hold Friday's last prices", func() bool { return !eur().UpdatedAt.Before(friday) })
	heartbeats := sim.Stats().Oanda.Streams.Heartbeats
	pushtest.Eventually(t, "heartbeats over the weekend", func() bool { return sim.Stats().Oanda.Streams.Heartbeats >= heartbeats+5 })
	if n := len(rows(major)) + len(rows(minor)); n != 68 {
		t.Errorf("%d rows over the weekend, want 68", n)
	}
	if st := sim.Stats().Oanda.Streams; st.Accepted != 1 {
		t.Errorf("%d stream connections, want the first kept over the weekend", st.Accepted)
	}
	if l := logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
		t.Errorf("warnings or errors:\n%s", l)
	}
}
