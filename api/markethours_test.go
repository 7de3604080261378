package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

var (
	nasdaqStock = domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	oandaMajor  = domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "major"}
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// thanksgivingHours: the NYSE's week of Thanksgiving 2026 as its feed
// lists it (Thursday a holiday, Friday closing at 13:00 New York, 18:00
// UTC), forex by its rule.
func thanksgivingHours(t testing.TB) domain.MarketHours {
	t.Helper()
	d := func(s string) time.Time { v, _ := time.Parse(time.DateOnly, s); return v }
	sess := func(day, open, close string) domain.Session {
		return domain.Session{Day: d(day), Open: at(day + "T" + open + ":00Z"), Close: at(day + "T" + close + ":00Z")}
	}
	stocks, err := domain.NewSessionCalendar(domain.Schedule{Market: domain.Stocks, First: d("2026-11-23"), Last: d("2026-12-04"),
		Sessions: []domain.Session{sess("2026-11-23", "14:30", "21:00"), sess("2026-11-24", "14:30", "21:00"), sess("2026-11-25", "14:30", "21:00"),
			sess("2026-11-27", "14:30", "18:00"), sess("2026-11-30", "14:30", "21:00"), sess("2026-12-01", "14:30", "21:00")}})
	if err != nil {
		t.Fatal(err)
	}
	return domain.Calendars{domain.Stocks: stocks, domain.Forex: domain.ForexWeek{}}
}

// newHoursFixture is newMarketFixture's api with the markets' calendars.
func newHoursFixture(t testing.TB, hours domain.MarketHours, now time.Time) *marketFixture {
	t.Helper()
	db := storetest.New(t)
	c := &domain.Client{OrgName: "Fixture", Tier: domain.Business, Markets: domain.Markets}
	if err := db.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key, _, err := db.IssueKey(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	f := &marketFixture{db: db, key: key, now: now}
	clock := func() time.Time { return f.now }
	f.cache = readcache.New(10*time.Second, clock)
	f.apiS = api.New(api.Config{Region: "global", Now: clock, Cache: f.cache, Hours: hours}, db, storeGate{db})
	f.srv = httptest.NewServer(f.apiS.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// getWithHeaders is f.get with the response headers.
func (f *marketFixture) getWithHeaders(t *testing.T, path string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/v1/public"+path, nil)
	req.Header.Set("X-API-Key", f.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, resp.Header
}

// failingFeed records the last success of a feed at last and a failed
// attempt at failed: the feed is failing.
func failingFeed(t *testing.T, f *marketFixture, c domain.Combination, kind string, last, failed time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := f.db.RecordFeedSuccess(ctx, c, kind, last); err != nil {
		t.Fatal(err)
	}
	if err := f.db.RecordFeedError(ctx, c, kind, failed, "upstream: 503 Service Unavailable"); err != nil {
		t.Fatal(err)
	}
}

// TestClosedMarketServesLastSessionWithout502: on Saturday 2026-11-28 a
// stock combination whose feed fails and whose data is Friday's close
// answers 200 with that data and X-Market-Open: false, the close and the
// next open; forex too; a crypto combination with a failing feed and
// stale data still gets its 502. On Monday the staleness bound counts
// from the open.
func TestClosedMarketServesLastSessionWithout502(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHoursFixture(t, thanksgivingHours(t), at("2026-11-28T12:00:00Z"))
	friClose := at("2026-11-27T18:00:00Z")
	for _, c := range []domain.Combination{nasdaqStock, oandaMajor, binanceSpot} {
		sym := map[domain.Market]string{domain.Stocks: "AAPL", domain.Forex: "EUR_USD", domain.Crypto: "BTC_USDT"}[c.Market]
		rows := []domain.Ticker{{Symbol: sym, Price: 100, ChangePct: 1, Volume: 1e6, UpdatedAt: friClose}}
		if err := f.db.ReplaceTickers(ctx, c, rows); err != nil {
			t.Fatal(err)
		}
		failingFeed(t, f, c, "tickers", friClose.Add(2*time.Minute), f.now.Add(-time.Minute))
		candles := domain.Combination{Market: c.Market, Exchange: c.Exchange, Instrument: domain.CandleInstrument}
		series := map[store.CandleKey][]domain.Candle{{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: domain.TF1h}: {
			{Time: at("2026-11-27T16:00:00Z"), Open: 100, High: 101, Low: 99, Close: 100.5, Volume: 10},
			{Time: at("2026-11-27T17:00:00Z"), Open: 100.5, High: 101, Low: 99, Close: 100, Volume: 10},
		}}
		if err := f.db.UpsertCandleSeries(ctx, series); err != nil {
			t.Fatal(err)
		}
		failingFeed(t, f, candles, "candles:1h", friClose.Add(2*time.Minute), f.now.Add(-time.Minute))
	}

	for _, tc := range []struct {
		path, close, next string
	}{
		{"/screener/stocks/nasdaq/stock", "2026-11-27T18:00:00Z", "2026-11-30T14:30:00Z"},
		{"/ohlcv/stocks/nasdaq/AAPL/1h", "2026-11-27T18:00:00Z", "2026-11-30T14:30:00Z"},
		{"/screener/forex/oanda/major", "2026-11-27T22:00:00Z", "2026-11-29T22:00:00Z"},
		{"/ohlcv/forex/oanda/EUR_USD/1h", "2026-11-27T22:00:00Z", "2026-11-29T22:00:00Z"},
	} {
		status, body, h := f.getWithHeaders(t, tc.path)
		if status != http.StatusOK {
			t.Errorf("%s on Saturday, feed failing: %d %s, want 200 with the last session's data", tc.path, status, body)
			continue
		}
		if h.Get("X-Market-Open") != "false" || h.Get("X-Market-Session-Close") != tc.close || h.Get("X-Market-Next-Open") != tc.next {
			t.Errorf("%s: X-Market-Open %q, -Session-Close %q, -Next-Open %q; want false, %s, %s", tc.path,
				h.Get("X-Market-Open"), h.Get("X-Market-Session-Close"), h.Get("X-Market-Next-Open"), tc.close, tc.next)
		}
	}
	for _, path := range []string{"/screener/crypto/binance/spot", "/ohlcv/crypto/binance/BTC_USDT/1h"} {
		if status, body, _ := f.getWithHeaders(t, path); status != http.StatusBadGateway {
			t.Errorf("%s, feed failing, data from yesterday: %d %s, want 502", path, status, body)
		}
	}
	if _, _, h := f.getWithHeaders(t, "/screener/crypto/binance/spot?volume_min=0"); h.Get("X-Market-Open") != "" {
		t.Errorf("a 502 carries market headers: %v", h)
	}

	// Monday, three minutes into the session: the feed has not caught
	// up yet, the data is Friday's; the bound counts from the open.
	f.now = at("2026-11-30T14:33:00Z")
	f.cache.InvalidateAll()
	status, body, h := f.getWithHeaders(t, "/screener/stocks/nasdaq/stock")
	if status != http.StatusOK || h.Get("X-Market-Open") != "true" || h.Get("X-Market-Session-Close") != "2026-11-30T21:00:00Z" || h.Get("X-Market-Next-Open") != "" {
		t.Errorf("Monday 14:33 UTC: %d %s %v", status, body, h)
	}
	f.now = at("2026-11-30T14:36:00Z")
	f.cache.InvalidateAll()
	if status, body, _ := f.getWithHeaders(t, "/screener/stocks/nasdaq/stock"); status != http.StatusBadGateway {
		t.Errorf("Monday, six minutes into the session with the feed failing: %d %s, want 502", status, body)
	}
	// The crypto answers carry market_open true and nothing else.
	_ = f.db.RecordFeedSuccess(ctx, binanceSpot, "tickers", f.now)
	f.cache.InvalidateAll()
	if _, _, h := f.getWithHeaders(t, "/screener/crypto/binance/spot"); h.Get("X-Market-Open") != "true" || h.Get("X-Market-Session-Close") != "" {
		t.Errorf("crypto headers: %v", h)
	}
}

// TestReportOfClosedMarket: a stock report read on Saturday says the
// market is closed, since when and until when; its as_of is the session's
// close when the market closed inside the last candle, and its
// data_age_seconds counts from there and keeps growing.
func TestReportOfClosedMarket(t *testing.T) {
	t.Parallel()
	f := newHoursFixture(t, thanksgivingHours(t), at("2026-11-28T12:00:00Z"))
	cs := walk(300, 0.001, at("2026-11-27T16:00:00Z"))
	res, err := analytics.Score(analytics.Input{Market: domain.Stocks, Symbol: "AAPL", Candles: cs})
	if err != nil {
		t.Fatal(err)
	}
	last := cs[len(cs)-1]
	rec := store.AnalyticsRecord{Market: domain.Stocks, Style: analytics.Swing, Symbol: "AAPL", Exchange: "nasdaq", Instrument: "stock",
		Result: &res, OverallScore: res.OverallScore, Verdict: res.Verdict, Price: last.Close, Sparkline: []float64{1},
		CandleTime: last.Time, CandleClose: last.Close, UpdatedAt: at("2026-11-27T18:03:00Z"), CandlesUsed: len(cs)}
	if _, err := f.db.SaveAnalytics(context.Background(), []store.AnalyticsRecord{rec}, nil); err != nil {
		t.Fatal(err)
	}
	rep := getReport(t, f, "/analytics/stocks/AAPL?lang=en")
	if rep.MarketOpen || rep.SessionClose == nil || !rep.SessionClose.Equal(at("2026-11-27T18:00:00Z")) ||
		rep.NextOpen == nil || !rep.NextOpen.Equal(at("2026-11-30T14:30:00Z")) {
		t.Fatalf("Saturday's report: %+v, want closed since Friday's 18:00 UTC until Monday's 14:30 UTC", rep.MarketHours)
	}
	// The last 4h candle (16:00-20:00 UTC) stopped trading at the 18:00
	// close: scored at 18:03, it is closed, and the age counts from then.
	if !rep.AsOf.Equal(at("2026-11-27T18:00:00Z")) || !rep.CandleClosed || rep.DataAgeSeconds != int64(18*time.Hour/time.Second) {
		t.Errorf("as_of %s, candle_closed %v, data_age_seconds %d; want the session's close, closed, 64800 s", rep.AsOf, rep.CandleClosed, rep.DataAgeSeconds)
	}
	f.now = f.now.Add(24 * time.Hour)
	if rep := getReport(t, f, "/analytics/stocks/AAPL?lang=en"); rep.DataAgeSeconds != int64(42*time.Hour/time.Second) || rep.MarketOpen {
		t.Errorf("on Sunday: data_age_seconds %d, market_open %v; want 151200, false", rep.DataAgeSeconds, rep.MarketOpen)
	}
	f.now = at("2026-11-28T12:00:00Z")
	status, body := f.get(t, "/analytics/stocks/list")
	var list []api.AnalyticsListItem
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 1 || list[0].MarketOpen || list[0].NextOpen == nil {
		t.Fatalf("list: %d %s", status, body)
	}
	var top []api.TopSetup
	status, body = f.get(t, "/analytics/top-setups?market=stocks")
	if status != http.StatusOK || json.Unmarshal(body, &top) != nil || len(top) != 1 || top[0].MarketOpen {
		t.Fatalf("top setups: %d %s", status, body)
	}
	// Monday during the session: open, the session's close, no next open.
	f.now = at("2026-11-30T15:00:00Z")
	f.cache.InvalidateAll()
	rep = getReport(t, f, "/analytics/stocks/AAPL?lang=en")
	if !rep.MarketOpen || rep.NextOpen != nil || rep.SessionClose == nil || !rep.SessionClose.Equal(at("2026-11-30T21:00:00Z")) {
		t.Errorf("Monday's report: %+v", rep.MarketHours)
	}
}
