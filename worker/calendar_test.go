package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

var nasdaqStock = domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}

// TestCalendarRefreshStoresFeedSessions: the stocks feed's sessions of the
// window every role reads are stored, and the refresh shows in the feed
// health under kind "calendar"; a second run stores the same.
func TestCalendarRefreshStoresFeedSessions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	sat := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	reg, err := feeds.New(feeds.Config{Names: []string{"synthetic"}, Now: func() time.Time { return sat }})
	if err != nil {
		t.Fatal(err)
	}
	job := &worker.CalendarJob{Store: db, Feeds: reg, Region: "global", Logger: discard(), Now: func() time.Time { return sat }}
	for range 2 {
		if err := job.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, ok, err := db.Schedule(ctx, domain.Stocks, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 12, 31, 0, 0, 0, 0, time.UTC))
	if err != nil || !ok {
		t.Fatalf("stored: ok=%v err=%v", ok, err)
	}
	c, err := domain.NewSessionCalendar(s)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.At(sat); st.Open || !st.NextOpen.Equal(time.Date(2026, 11, 30, 14, 30, 0, 0, time.UTC)) {
		t.Errorf("stored calendar on Saturday: %+v", st)
	}
	if !s.Last.After(sat.AddDate(1, 0, 0)) {
		t.Errorf("the stored calendar ends %s: less than a year ahead", s.Last)
	}
	for _, m := range []domain.Market{domain.Forex, domain.Crypto} {
		if _, ok, _ := db.Schedule(ctx, m, sat.AddDate(-1, 0, 0), sat.AddDate(1, 0, 0)); ok {
			t.Errorf("%s has stored sessions; its calendar is a rule", m)
		}
	}
	h, err := db.FeedHealthOf(ctx, nasdaqStock, worker.CalendarKind)
	if err != nil || h.LastSuccessAt == nil || h.Failing() {
		t.Errorf("feed health of the calendar: %+v %v", h, err)
	}
}

// TestCalendarRefreshFailureIsTheFeeds: a provider that refuses leaves the
// stored calendar alone and records the failure as the calendar's.
func TestCalendarRefreshFailureIsTheFeeds(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"forbidden"}`, http.StatusForbidden)
	}))
	t.Cleanup(up.Close)
	reg, err := feeds.New(feeds.Config{Names: []string{"alpaca"}, AlpacaKeyID: "k", AlpacaSecret: "s",
		BaseURLs: map[string]string{feeds.HostAlpaca: up.URL, feeds.HostAlpacaData: up.URL}, HTTPClient: up.Client()})
	if err != nil {
		t.Fatal(err)
	}
	served := func(c domain.Combination) bool { return feeds.Serves("alpaca", c) }
	job := &worker.CalendarJob{Store: db, Feeds: reg, Region: "global", Served: served, Logger: discard(), Now: time.Now}
	if err := job.Refresh(ctx); err == nil {
		t.Fatal("a refused calendar refresh succeeded")
	}
	h, _ := db.FeedHealthOf(ctx, nasdaqStock, worker.CalendarKind)
	if !h.Failing() {
		t.Errorf("feed health of the calendar: %+v, want failing", h)
	}
	// A deployment whose feeds publish no sessions has nothing to refresh.
	binance, _ := feeds.New(feeds.Config{Names: []string{"binance"}})
	onlyBinance := func(c domain.Combination) bool { return feeds.Serves("binance", c) }
	job = &worker.CalendarJob{Store: db, Feeds: binance, Region: "global", Served: onlyBinance, Logger: discard(), Now: time.Now}
	if err := job.Refresh(ctx); err != nil {
		t.Errorf("nothing to refresh: %v", err)
	}
}
