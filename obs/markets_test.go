package obs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/obs"
)

// TestMarketCollector: on a Saturday forex and a stock market with known
// sessions are closed (0), crypto trades (1); a market whose calendar
// does not know the instant counts as open and says it is not known.
func TestMarketCollector(t *testing.T) {
	t.Parallel()
	sat := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	d := func(s string) time.Time { v, _ := time.Parse(time.DateOnly, s); return v }
	stocks, err := domain.NewSessionCalendar(domain.Schedule{Market: domain.Stocks, First: d("2026-11-27"), Last: d("2026-11-30"),
		Sessions: []domain.Session{{Day: d("2026-11-27"), Open: d("2026-11-27").Add(14*time.Hour + 30*time.Minute), Close: d("2026-11-27").Add(18 * time.Hour)}}})
	if err != nil {
		t.Fatal(err)
	}
	c := obs.NewMarketCollector(domain.Calendars{domain.Stocks: stocks, domain.Forex: domain.ForexWeek{}}, func() time.Time { return sat })
	want := `
# HELP marketd_market_open 1 while the market trades by its calendar (crypto always; also when the calendar does not know the instant), 0 while it is closed: a closed market's feeds are not stale.
# TYPE marketd_market_open gauge
marketd_market_open{market="crypto"} 1
marketd_market_open{market="forex"} 0
marketd_market_open{market="stocks"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "marketd_market_open"); err != nil {
		t.Error(err)
	}
	unknown := obs.NewMarketCollector(domain.Calendars{domain.Stocks: &domain.SessionCalendar{}}, func() time.Time { return sat })
	want = `
# HELP marketd_market_calendar_known 1 when the market's calendar covers the instant (its stored sessions, or its rule), 0 when it does not and the market counts as open.
# TYPE marketd_market_calendar_known gauge
marketd_market_calendar_known{market="crypto"} 1
marketd_market_calendar_known{market="forex"} 1
marketd_market_calendar_known{market="stocks"} 0
`
	if err := testutil.CollectAndCompare(unknown, strings.NewReader(want), "marketd_market_calendar_known"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(unknown, "marketd_market_open"); n != 3 {
		t.Errorf("%d market_open series", n)
	}
}
