package scheduler_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/scheduler"
	"github.com/marketscreener/market/worker"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// thanksgivingHours are the calendars of the week of Thanksgiving 2026:
// stocks from the synthetic feed's sessions (Friday the 27th closes at
// 13:00 New York, 18:00 UTC), forex by its rule.
func thanksgivingHours(t *testing.T) domain.MarketHours {
	t.Helper()
	s, err := feeds.NewSynthetic(1, nil).Schedule(context.Background(), domain.Stocks, at("2026-11-01T00:00:00Z"), at("2026-12-31T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	stocks, err := domain.NewSessionCalendar(s)
	if err != nil {
		t.Fatal(err)
	}
	return domain.Calendars{domain.Stocks: stocks, domain.Forex: domain.ForexWeek{}}
}

// TestClosedMarketIsNotPolledButCaughtUpOnce drives the scheduler's ticks
// across Friday's early close, the weekend and Monday's open: a closed
// market's tickers, candles and fundamentals are not enqueued, except the
// closing read at the bell and one catch-up per series after the close (however many ticks the closure
// has), which runs however late and is kept until the next open; crypto
// is polled throughout; polling resumes at the open.
func TestClosedMarketIsNotPolledButCaughtUpOnce(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	entries := append(scheduler.IngestEntries(domain.DefaultRegion, nil, 10*time.Second, time.Minute),
		scheduler.FundamentalsEntries(domain.DefaultRegion, nil, time.Hour)...)
	s, err := scheduler.New(scheduler.Config{RedisURL: url, Entries: entries, Hours: thanksgivingHours(t)})
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := asynq.ParseRedisURI(url)
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	seen := map[string]bool{}
	// tick enqueues every entry's tick at the instant and returns the ids
	// that are new in the queues, by market.
	tick := func(now string) map[domain.Market][]string {
		t.Helper()
		for _, e := range entries {
			s.EnqueueTick(context.Background(), e, e.Tick(at(now)))
		}
		fresh := map[domain.Market][]string{}
		for _, q := range []string{worker.QueueLive, worker.QueueIngest, worker.QueueMinute} {
			tasks, err := insp.ListPendingTasks(q, asynq.PageSize(1000))
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range tasks {
				if seen[ti.ID] {
					continue
				}
				seen[ti.ID] = true
				for _, m := range domain.Markets {
					if strings.Contains(ti.ID, ":"+string(m)+":") {
						fresh[m] = append(fresh[m], ti.ID)
					}
				}
			}
		}
		return fresh
	}
	all := func(ids []string, sub string) bool {
		return len(ids) > 0 && !slices.ContainsFunc(ids, func(id string) bool { return !strings.Contains(id, sub) })
	}

	open := tick("2026-11-27T17:59:30Z")
	if !all(open[domain.Stocks], ":20261127T17") || !all(open[domain.Forex], ":20261127T17") || len(open[domain.Crypto]) == 0 {
		t.Fatalf("open markets before the close: %v", open)
	}
	// The tick at the bell is the closing read: the candles scoring reads
	// (stocks: 4h) and the 1m bars of every exchange, under the tick's own
	// id (read at once, not two minutes later); the screener rows, the
	// display-only timeframes and fundamentals wait for the catch-up.
	bell := tick("2026-11-27T18:00:00Z")
	closing := bell[domain.Stocks]
	slices.Sort(closing)
	var wantClosing []string
	for _, ex := range []string{"amex", "arca", "bats", "nasdaq", "nyse"} {
		for _, tf := range []string{"1m", "4h"} {
			wantClosing = append(wantClosing, "ingest:candles:stocks:"+ex+":stock:"+tf+":20261127T180000")
		}
	}
	if !slices.Equal(closing, wantClosing) {
		t.Fatalf("the closing read at the bell: %v, want %v", closing, wantClosing)
	}
	// Its tasks say so (worker.HeaderClosing: no history in them); an
	// open market's are not marked.
	for _, e := range entries {
		for _, when := range []string{"2026-11-27T17:59:30Z", "2026-11-27T18:00:00Z"} {
			tk := e.Tick(at(when))
			for _, p := range s.Plan(e, tk) {
				marked := p.Headers[worker.HeaderClosing] != ""
				if want := p.Market == domain.Stocks && !tk.Before(at("2026-11-27T18:00:00Z")); marked != want {
					t.Errorf("%s at %s: marked as the closing read %v, want %v", p.ID, when, marked, want)
				}
			}
		}
	}
	atClose := tick("2026-11-27T18:00:30Z")
	if len(atClose[domain.Stocks]) != 0 || len(atClose[domain.Forex]) == 0 || len(atClose[domain.Crypto]) == 0 {
		t.Fatalf("after the stocks' closing read: %v, want no stocks polled", atClose)
	}
	// The catch-up is every stocks series of an open tick (tickers of each
	// combination, candles of each exchange and timeframe, fundamentals),
	// once, under the close's id.
	want := map[string]bool{}
	for _, e := range entries {
		tk := e.Tick(at("2026-11-27T17:59:30Z"))
		for _, p := range s.Plan(e, tk) {
			if p.Market == domain.Stocks {
				want[strings.TrimSuffix(p.ID, ":"+tk.Format("20060102T150405"))+":close:20261127T180000"] = true
			}
		}
	}
	catchUp := tick("2026-11-27T18:10:00Z")
	stocks := catchUp[domain.Stocks]
	if len(stocks) != len(want) || len(want) < 4 {
		t.Fatalf("the catch-up after the close: %v, want %d tasks", stocks, len(want))
	}
	for _, id := range stocks {
		if !want[id] {
			t.Errorf("catch-up %s is not a stocks series of an open tick", id)
		}
	}
	for _, prefix := range []string{"ingest:tickers:stocks:nasdaq:stock:", "ingest:candles:stocks:nyse:stock:1d:", "ingest:fundamentals:stocks:"} {
		if !slices.ContainsFunc(stocks, func(id string) bool { return strings.HasPrefix(id, prefix) }) {
			t.Errorf("no catch-up of %s* in %v", prefix, stocks)
		}
	}
	info, err := insp.GetTaskInfo(worker.QueueLive, "ingest:tickers:stocks:nasdaq:stock:close:20261127T180000")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Headers[worker.HeaderNotAfter]; ok {
		t.Errorf("the catch-up has a start-by time: %v", info.Headers)
	}
	if until := at("2026-11-27T18:10:00Z").Add(info.Retention); until.Before(at("2026-11-30T14:30:00Z")) {
		t.Errorf("the catch-up's id is kept until %s, before Monday's open", until)
	}
	for _, now := range []string{"2026-11-27T18:10:10Z", "2026-11-27T21:00:00Z", "2026-11-28T12:00:00Z", "2026-11-29T23:00:00Z"} {
		if got := tick(now); len(got[domain.Stocks]) != 0 || len(got[domain.Crypto]) == 0 {
			t.Errorf("%s: %v, want crypto alone polled and no second stocks catch-up", now, got)
		}
	}
	// Forex closed at 17:00 New York (22:00 UTC); its catch-up came with
	// the first tick of Saturday's above: Sunday 23:00 UTC is open again.
	if !seen["ingest:tickers:forex:oanda:major:close:20261127T220000"] {
		t.Error("no forex catch-up after Friday's 17:00 New York close")
	}
	monday := tick("2026-11-30T14:30:00Z")
	if !all(monday[domain.Stocks], ":20261130T1430") {
		t.Errorf("stocks at Monday's open: %v", monday[domain.Stocks])
	}
}

// TestNoCalendarPollsAroundTheClock: without calendars (or with a stocks
// calendar that does not know the instant) every market is polled on
// every tick, as before calendars.
func TestNoCalendarPollsAroundTheClock(t *testing.T) {
	t.Parallel()
	entries := scheduler.IngestEntries(domain.DefaultRegion, nil, 10*time.Second, time.Minute)
	sat := at("2026-11-28T12:00:00Z")
	for _, hours := range []domain.MarketHours{nil, domain.Calendars{domain.Stocks: &domain.SessionCalendar{}}} {
		s, err := scheduler.New(scheduler.Config{RedisURL: "redis://127.0.0.1:6379/15", Entries: entries, Hours: hours})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			markets := map[domain.Market]bool{}
			for _, p := range s.Plan(e, e.Tick(sat)) {
				markets[p.Market] = true
				if p.Headers[worker.HeaderNotAfter] == "" {
					t.Errorf("%s: no start-by time", p.ID)
				}
			}
			if !markets[domain.Stocks] || !markets[domain.Forex] && hours == nil {
				t.Errorf("%s on Saturday with calendars %v: markets %v", e.Name, hours, markets)
			}
		}
	}
}
