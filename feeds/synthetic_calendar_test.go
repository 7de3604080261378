package feeds

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// The NYSE's full-day holidays and 13:00 closes as NYSE Group announced
// them ("NYSE Group Announces 2022, 2023 and 2024 Holiday and Early
// Closings Calendar", 2021-12-27; "... 2025, 2026 and 2027 ...",
// 2024-11-08; "... 2026, 2027 and 2028 ...", 2025-12-23): no New Year's
// Day is observed when it falls on a Saturday (2022, 2028).
var nysePublished = map[int]struct{ holidays, early []string }{
	2022: {[]string{"2022-01-17", "2022-02-21", "2022-04-15", "2022-05-30", "2022-06-20", "2022-07-04", "2022-09-05", "2022-11-24", "2022-12-26"},
		[]string{"2022-11-25"}},
	2023: {[]string{"2023-01-02", "2023-01-16", "2023-02-20", "2023-04-07", "2023-05-29", "2023-06-19", "2023-07-04", "2023-09-04", "2023-11-23", "2023-12-25"},
		[]string{"2023-07-03", "2023-11-24"}},
	2024: {[]string{"2024-01-01", "2024-01-15", "2024-02-19", "2024-03-29", "2024-05-27", "2024-06-19", "2024-07-04", "2024-09-02", "2024-11-28", "2024-12-25"},
		[]string{"2024-07-03", "2024-11-29", "2024-12-24"}},
	2025: {[]string{"2025-01-01", "2025-01-20", "2025-02-17", "2025-04-18", "2025-05-26", "2025-06-19", "2025-07-04", "2025-09-01", "2025-11-27", "2025-12-25"},
		[]string{"2025-07-03", "2025-11-28", "2025-12-24"}},
	2026: {[]string{"2026-01-01", "2026-01-19", "2026-02-16", "2026-04-03", "2026-05-25", "2026-06-19", "2026-07-03", "2026-09-07", "2026-11-26", "2026-12-25"},
		[]string{"2026-11-27", "2026-12-24"}},
	2027: {[]string{"2027-01-01", "2027-01-18", "2027-02-15", "2027-03-26", "2027-05-31", "2027-06-18", "2027-07-05", "2027-09-06", "2027-11-25", "2027-12-24"},
		[]string{"2027-11-26"}},
	2028: {[]string{"2028-01-17", "2028-02-21", "2028-04-14", "2028-05-29", "2028-06-19", "2028-07-04", "2028-09-04", "2028-11-23", "2028-12-25"},
		[]string{"2028-07-03", "2028-11-24"}},
}

// TestNYSERulesMatchPublishedCalendars: the synthetic feed's rules give
// exactly the holidays and early closes the exchange published, for seven
// years, and 09:30-16:00 (13:00) New York time on every other weekday.
func TestNYSERulesMatchPublishedCalendars(t *testing.T) {
	t.Parallel()
	s, _ := newTestSynthetic(t, 1, testNow)
	for year, want := range nysePublished {
		sched, err := s.Schedule(context.Background(), domain.Stocks, day("2000-01-01").AddDate(year-2000, 0, 0), day("2000-12-31").AddDate(year-2000, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := sched.Validate(); err != nil {
			t.Fatalf("%d: %v", year, err)
		}
		trading := map[string]domain.Session{}
		for _, ss := range sched.Sessions {
			trading[ss.Day.Format(time.DateOnly)] = ss
		}
		var holidays, early []string
		for d := sched.First; !d.After(sched.Last); d = d.AddDate(0, 0, 1) {
			key := d.Format(time.DateOnly)
			ss, ok := trading[key]
			if wd := d.Weekday(); wd == time.Saturday || wd == time.Sunday {
				if ok {
					t.Errorf("%s: a weekend session", key)
				}
				continue
			}
			if !ok {
				holidays = append(holidays, key)
				continue
			}
			open, close := ss.Open.In(domain.NewYork()), ss.Close.In(domain.NewYork())
			if open.Format("15:04") != "09:30" || open.Format(time.DateOnly) != key {
				t.Errorf("%s opens %s", key, open)
			}
			switch close.Format("15:04") {
			case "13:00":
				early = append(early, key)
			case "16:00":
			default:
				t.Errorf("%s closes %s", key, close)
			}
		}
		if !slices.Equal(holidays, want.holidays) {
			t.Errorf("%d holidays %v, published %v", year, holidays, want.holidays)
		}
		if !slices.Equal(early, want.early) {
			t.Errorf("%d early closes %v, published %v", year, early, want.early)
		}
	}
	if _, err := s.Schedule(context.Background(), domain.Forex, day("2026-01-01"), day("2026-12-31")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("forex sessions: %v, want ErrUnsupported (forex is a rule)", err)
	}
	var _ CalendarProvider = s
}

// TestSyntheticStocksTradeInSessions: on Saturday 2026-11-28 the newest
// stock candles are Friday's early close (13:00 New York, 18:00 UTC); the
// holiday before it has none; the screener row stands at the close.
func TestSyntheticStocksTradeInSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sat := utc("2026-11-28T12:00:00Z")
	s, clk := newTestSynthetic(t, 3, sat)
	newest := func(tf domain.Timeframe, n int) []domain.Candle {
		t.Helper()
		cs, err := s.Candles(ctx, nasdaq, "AAPL", tf, time.Time{}, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != n {
			t.Fatalf("%s: %d candles, want %d", tf, len(cs), n)
		}
		if err := domain.ValidateCandles(cs); err != nil {
			t.Fatalf("%s: %v", tf, err)
		}
		return cs
	}
	minutes := newest(domain.TF1m, 400)
	if got := minutes[len(minutes)-1].Time; !got.Equal(utc("2026-11-27T17:59:00Z")) {
		t.Errorf("last 1m candle opens %s, want 17:59 UTC Friday (13:00 New York close)", got)
	}
	if got := minutes[len(minutes)-210].Time; !got.Equal(utc("2026-11-27T14:30:00Z")) {
		t.Errorf("Friday's first 1m candle %s, want 14:30 UTC (09:30 New York)", got)
	}
	if got := minutes[len(minutes)-211].Time; !got.Equal(utc("2026-11-25T20:59:00Z")) {
		t.Errorf("the candle before Friday's open opens %s, want Wednesday 20:59 UTC (no Thanksgiving session)", got)
	}
	days := newest(domain.TF1d, 5)
	var dates []string
	for _, c := range days {
		dates = append(dates, c.Time.Format(time.DateOnly))
	}
	if want := []string{"2026-11-20", "2026-11-23", "2026-11-24", "2026-11-25", "2026-11-27"}; !slices.Equal(dates, want) {
		t.Errorf("daily candles %v, want %v", dates, want)
	}
	hours := newest(domain.TF1h, 4)
	if hours[3].Time != utc("2026-11-27T17:00:00Z") || hours[0].Time != utc("2026-11-27T14:00:00Z") {
		t.Errorf("Friday's hours %v..%v, want 14:00..17:00 UTC", hours[0].Time, hours[3].Time)
	}
	// Timeframes agree: the 14:00 UTC hour traded from 14:30, the day
	// closed with its last minute.
	if hours[0].Open != minutes[len(minutes)-210].Open || days[4].Close != minutes[len(minutes)-1].Close || days[4].Open != hours[0].Open {
		t.Errorf("1h opens %v, 1m at the open %v; 1d %v..%v, 1m close %v", hours[0].Open, minutes[len(minutes)-210].Open,
			days[4].Open, days[4].Close, minutes[len(minutes)-1].Close)
	}
	weekly := newest(domain.TF1w, 2)
	if !weekly[1].Time.Equal(utc("2026-11-23T00:00:00Z")) || weekly[1].Close != days[4].Close || weekly[1].Open != days[1].Open {
		t.Errorf("this week's candle %+v, want Monday's open to Friday's close", weekly[1])
	}
	if r := weekly[0].Volume / days[0].Volume; r < 2 || r > 12 {
		t.Errorf("a week of sessions has %.1f times a day's volume", r)
	}
	rows, err := s.Tickers(ctx, nasdaq)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Symbol == "AAPL" && (!r.UpdatedAt.Equal(utc("2026-11-27T18:00:00Z")) || r.Price != minutes[len(minutes)-1].Close) {
			t.Errorf("AAPL on Saturday: %+v, want Friday's close %v at 18:00 UTC", r, minutes[len(minutes)-1].Close)
		}
	}
	// Nothing moves over the weekend; the candles read then are the same.
	clk.set(utc("2026-11-29T20:00:00Z"))
	later, _ := s.Candles(ctx, nasdaq, "AAPL", domain.TF1m, time.Time{}, 400)
	if !slices.EqualFunc(minutes, later, candleEqual) {
		t.Error("the candles changed over the weekend")
	}
	after, _ := s.Tickers(ctx, nasdaq)
	if !slices.Equal(rows, after) {
		t.Error("the screener rows moved over the weekend")
	}
	// Read from an instant: Wednesday's last hour, then Friday's.
	from, err := s.Candles(ctx, nasdaq, "AAPL", domain.TF1h, utc("2026-11-25T20:00:00Z"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(from) != 3 || from[0].Time != utc("2026-11-25T20:00:00Z") || from[1].Time != utc("2026-11-27T14:00:00Z") || !candleEqual(from[1], hours[0]) {
		t.Errorf("1h from Wednesday 20:00 UTC: %v", from)
	}
}

// TestSyntheticStocksDuringSession: while the market trades, the newest
// candle is the one open now and the row is quoted now, its change against
// the previous session's close (Wednesday's, across the holiday).
func TestSyntheticStocksDuringSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := utc("2026-11-27T15:10:20Z")
	s, _ := newTestSynthetic(t, 3, at)
	cs, err := s.Candles(ctx, nasdaq, "MSFT", domain.TF1m, time.Time{}, 2)
	if err != nil || len(cs) != 2 || !cs[1].Time.Equal(utc("2026-11-27T15:10:00Z")) {
		t.Fatalf("newest 1m: %v %v", cs, err)
	}
	rows, _ := s.Tickers(ctx, nasdaq)
	wed, _ := s.Candles(ctx, nasdaq, "MSFT", domain.TF1d, day("2026-11-25"), 1)
	for _, r := range rows {
		if r.Symbol != "MSFT" {
			continue
		}
		if !r.UpdatedAt.Equal(at) || r.Price != cs[1].Close {
			t.Errorf("MSFT: %+v, want the live close %v at %s", r, cs[1].Close, at)
		}
		if want := (r.Price/wed[0].Close - 1) * 100; r.ChangePct-want > 1e-3 || want-r.ChangePct > 1e-3 {
			t.Errorf("change %v%%, want %v%% against Wednesday's close %v", r.ChangePct, want, wed[0].Close)
		}
	}
}

// TestSyntheticForexWeek: currencies stop at Friday 17:00 New York time
// and start again on Sunday at 17:00.
func TestSyntheticForexWeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 5, utc("2026-11-28T12:00:00Z"))
	cs, err := s.Candles(ctx, oandaMajor, "EUR_USD", domain.TF1m, time.Time{}, 3)
	if err != nil || len(cs) != 3 || !cs[2].Time.Equal(utc("2026-11-27T21:59:00Z")) {
		t.Fatalf("newest EUR_USD minutes on Saturday: %v %v", cs, err)
	}
	next, err := s.Candles(ctx, oandaMajor, "EUR_USD", domain.TF1h, utc("2026-11-27T21:00:00Z"), 5)
	if err != nil || len(next) != 1 {
		t.Fatalf("hours after Friday 21:00 UTC, read on Saturday: %v %v", next, err)
	}
	s2, _ := newTestSynthetic(t, 5, utc("2026-11-29T23:30:00Z"))
	sunday, _ := s2.Candles(ctx, oandaMajor, "EUR_USD", domain.TF1h, utc("2026-11-27T21:00:00Z"), 5)
	if len(sunday) != 3 || !sunday[1].Time.Equal(utc("2026-11-29T22:00:00Z")) || !sunday[2].Time.Equal(utc("2026-11-29T23:00:00Z")) {
		t.Errorf("hours read on Sunday 23:30 UTC: %v, want Friday 21:00, Sunday 22:00 and 23:00", sunday)
	}
	if !candleEqual(sunday[0], next[0]) {
		t.Error("Friday's last hour changed over the weekend")
	}
}
