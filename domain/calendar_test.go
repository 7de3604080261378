package domain_test

import (
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// session is a stock session written as a provider sends it: a date and
// New York wall-clock times.
func session(date, open, close string) domain.Session {
	at := func(hm string) time.Time {
		t, err := time.ParseInLocation("2006-01-02 15:04", date+" "+hm, domain.NewYork())
		if err != nil {
			panic(err)
		}
		return t.UTC()
	}
	return domain.Session{Day: day(date), Open: at(open), Close: at(close)}
}

func mustCalendar(t *testing.T, s domain.Schedule) *domain.SessionCalendar {
	t.Helper()
	c, err := domain.NewSessionCalendar(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type stateWant struct {
	at                string
	open, known       bool
	sessOpen, sessEnd string // "" for no session
	nextOpen          string // "" for none
}

func checkStates(t *testing.T, c domain.Calendar, wants []stateWant) {
	t.Helper()
	for _, w := range wants {
		got := c.At(utc(w.at))
		var so, sc, no string
		if !got.Session.IsZero() {
			so, sc = got.Session.Open.Format(time.RFC3339), got.Session.Close.Format(time.RFC3339)
		}
		if !got.NextOpen.IsZero() {
			no = got.NextOpen.Format(time.RFC3339)
		}
		if got.Open != w.open || got.Known != w.known || so != w.sessOpen || sc != w.sessEnd || no != w.nextOpen {
			t.Errorf("at %s: open=%v known=%v session %s..%s next %s; want open=%v known=%v session %s..%s next %s",
				w.at, got.Open, got.Known, so, sc, no, w.open, w.known, w.sessOpen, w.sessEnd, w.nextOpen)
		}
	}
}

// TestForexWeek: the week runs from Sunday 17:00 to Friday 17:00 New York
// time, so 22:00 UTC in winter and 21:00 UTC in summer, and each end moves
// with its own daylight-saving time.
func TestForexWeek(t *testing.T) {
	t.Parallel()
	checkStates(t, domain.ForexWeek{}, []stateWant{
		// Saturday 2026-11-28: closed since Friday's 17:00 EST.
		{"2026-11-28T12:00:00Z", false, true, "2026-11-22T22:00:00Z", "2026-11-27T22:00:00Z", "2026-11-29T22:00:00Z"},
		{"2026-11-27T21:59:59Z", true, true, "2026-11-22T22:00:00Z", "2026-11-27T22:00:00Z", ""},
		{"2026-11-27T22:00:00Z", false, true, "2026-11-22T22:00:00Z", "2026-11-27T22:00:00Z", "2026-11-29T22:00:00Z"},
		{"2026-11-29T21:59:59Z", false, true, "2026-11-22T22:00:00Z", "2026-11-27T22:00:00Z", "2026-11-29T22:00:00Z"},
		{"2026-11-29T22:00:00Z", true, true, "2026-11-29T22:00:00Z", "2026-12-04T22:00:00Z", ""},
		// Spring forward on Sunday 2026-03-08 (02:00): Friday closed at
		// 17:00 EST (22:00 UTC), Sunday opens at 17:00 EDT (21:00 UTC).
		{"2026-03-07T10:00:00Z", false, true, "2026-03-01T22:00:00Z", "2026-03-06T22:00:00Z", "2026-03-08T21:00:00Z"},
		{"2026-03-08T21:00:00Z", true, true, "2026-03-08T21:00:00Z", "2026-03-13T21:00:00Z", ""},
		// Fall back on Sunday 2026-11-01: Friday closes at 17:00 EDT
		// (21:00 UTC), Sunday opens at 17:00 EST (22:00 UTC).
		{"2026-10-30T20:59:00Z", true, true, "2026-10-25T21:00:00Z", "2026-10-30T21:00:00Z", ""},
		{"2026-10-30T21:00:00Z", false, true, "2026-10-25T21:00:00Z", "2026-10-30T21:00:00Z", "2026-11-01T22:00:00Z"},
		{"2026-11-01T21:30:00Z", false, true, "2026-10-25T21:00:00Z", "2026-10-30T21:00:00Z", "2026-11-01T22:00:00Z"},
		// Midweek.
		{"2026-11-25T03:00:00Z", true, true, "2026-11-22T22:00:00Z", "2026-11-27T22:00:00Z", ""},
	})
}

// thanksgivingWeek is the NYSE's week of Thanksgiving 2026 as a provider
// lists it: Thursday 26 is a holiday (absent), Friday 27 closes at 13:00.
func thanksgivingWeek() domain.Schedule {
	return domain.Schedule{Market: domain.Stocks, First: day("2026-11-23"), Last: day("2026-12-01"), Sessions: []domain.Session{
		session("2026-11-23", "09:30", "16:00"),
		session("2026-11-24", "09:30", "16:00"),
		session("2026-11-25", "09:30", "16:00"),
		session("2026-11-27", "09:30", "13:00"),
		session("2026-11-30", "09:30", "16:00"),
		session("2026-12-01", "09:30", "16:00"),
	}}
}

// TestStockSessions: a holiday, an early close, a weekend, and the
// calendar's edges.
func TestStockSessions(t *testing.T) {
	t.Parallel()
	c := mustCalendar(t, thanksgivingWeek())
	fri := [2]string{"2026-11-27T14:30:00Z", "2026-11-27T18:00:00Z"} // 09:30-13:00 EST
	wed := [2]string{"2026-11-25T14:30:00Z", "2026-11-25T21:00:00Z"}
	checkStates(t, c, []stateWant{
		// Saturday 2026-11-28: the last session is Friday's early close.
		{"2026-11-28T12:00:00Z", false, true, fri[0], fri[1], "2026-11-30T14:30:00Z"},
		{"2026-11-27T17:59:59Z", true, true, fri[0], fri[1], ""},
		{"2026-11-27T18:00:00Z", false, true, fri[0], fri[1], "2026-11-30T14:30:00Z"},
		// Thanksgiving: closed all day, the last session Wednesday's.
		{"2026-11-26T16:00:00Z", false, true, wed[0], wed[1], "2026-11-27T14:30:00Z"},
		// Before the open and after the close of a regular day.
		{"2026-11-25T14:29:59Z", false, true, "2026-11-24T14:30:00Z", "2026-11-24T21:00:00Z", wed[0]},
		{"2026-11-25T14:30:00Z", true, true, wed[0], wed[1], ""},
		{"2026-11-25T21:00:00Z", false, true, wed[0], wed[1], fri[0]},
		// Covered, but before the first session: nothing closed yet.
		{"2026-11-23T06:00:00Z", false, true, "", "", "2026-11-23T14:30:00Z"},
		// After the last session, still inside the last covered day.
		{"2026-12-01T23:00:00Z", false, true, "2026-12-01T14:30:00Z", "2026-12-01T21:00:00Z", ""},
		// Outside the range: unknown, taken as open.
		{"2026-12-02T15:00:00Z", true, false, "", "", ""},
		{"2026-11-22T12:00:00Z", true, false, "", "", ""},
	})
}

// TestStockSessionsAcrossDST: the New York session is 14:30-21:00 UTC in
// winter and 13:30-20:00 UTC in summer; the next open after the weekend
// of the change is on the new offset.
func TestStockSessionsAcrossDST(t *testing.T) {
	t.Parallel()
	spring := mustCalendar(t, domain.Schedule{Market: domain.Stocks, First: day("2026-03-06"), Last: day("2026-03-09"), Sessions: []domain.Session{
		session("2026-03-06", "09:30", "16:00"),
		session("2026-03-09", "09:30", "16:00"),
	}})
	checkStates(t, spring, []stateWant{
		{"2026-03-06T20:59:00Z", true, true, "2026-03-06T14:30:00Z", "2026-03-06T21:00:00Z", ""},
		{"2026-03-07T12:00:00Z", false, true, "2026-03-06T14:30:00Z", "2026-03-06T21:00:00Z", "2026-03-09T13:30:00Z"},
		{"2026-03-09T13:30:00Z", true, true, "2026-03-09T13:30:00Z", "2026-03-09T20:00:00Z", ""},
		{"2026-03-09T20:00:00Z", false, true, "2026-03-09T13:30:00Z", "2026-03-09T20:00:00Z", ""},
	})
	fall := mustCalendar(t, domain.Schedule{Market: domain.Stocks, First: day("2026-10-30"), Last: day("2026-11-02"), Sessions: []domain.Session{
		session("2026-10-30", "09:30", "16:00"),
		session("2026-11-02", "09:30", "16:00"),
	}})
	checkStates(t, fall, []stateWant{
		{"2026-10-30T19:59:00Z", true, true, "2026-10-30T13:30:00Z", "2026-10-30T20:00:00Z", ""},
		{"2026-11-01T12:00:00Z", false, true, "2026-10-30T13:30:00Z", "2026-10-30T20:00:00Z", "2026-11-02T14:30:00Z"},
		{"2026-11-02T14:29:00Z", false, true, "2026-10-30T13:30:00Z", "2026-10-30T20:00:00Z", "2026-11-02T14:30:00Z"},
	})
}

// TestNextOpenAcrossHolidayWeekend: after Thursday's close before Good
// Friday 2026 the next open is Monday's, three days later.
func TestNextOpenAcrossHolidayWeekend(t *testing.T) {
	t.Parallel()
	c := mustCalendar(t, domain.Schedule{Market: domain.Stocks, First: day("2026-04-01"), Last: day("2026-04-07"), Sessions: []domain.Session{
		session("2026-04-01", "09:30", "16:00"),
		session("2026-04-02", "09:30", "16:00"),
		session("2026-04-06", "09:30", "16:00"),
		session("2026-04-07", "09:30", "16:00"),
	}})
	for _, at := range []string{"2026-04-02T20:00:00Z", "2026-04-03T15:00:00Z", "2026-04-05T23:59:00Z"} {
		st := c.At(utc(at))
		if st.Open || !st.NextOpen.Equal(utc("2026-04-06T13:30:00Z")) || !st.Session.Close.Equal(utc("2026-04-02T20:00:00Z")) {
			t.Errorf("at %s: %+v, want closed since 2026-04-02T20:00Z until 2026-04-06T13:30Z", at, st)
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	t.Parallel()
	ok := thanksgivingWeek()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid schedule: %v", err)
	}
	overlap := thanksgivingWeek()
	overlap.Sessions[1].Open = overlap.Sessions[0].Close.Add(-time.Hour)
	inverted := thanksgivingWeek()
	inverted.Sessions[0].Close = inverted.Sessions[0].Open
	outside := thanksgivingWeek()
	outside.Last = day("2026-11-30")
	empty := thanksgivingWeek()
	empty.First, empty.Last = day("2026-12-01"), day("2026-11-23")
	for name, s := range map[string]domain.Schedule{"overlap": overlap, "inverted": inverted, "outside": outside, "empty": empty} {
		if err := s.Validate(); domain.ErrorCode(err) != domain.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
		if _, err := domain.NewSessionCalendar(s); err == nil {
			t.Errorf("%s: a calendar was built", name)
		}
	}
}

// TestStateAt: without calendars every market trades around the clock;
// with them, crypto still does and a market without an entry does too.
func TestStateAt(t *testing.T) {
	t.Parallel()
	sat := utc("2026-11-28T12:00:00Z")
	for _, m := range domain.Markets {
		if st := domain.StateAt(nil, m, sat); !st.Open || !st.Known {
			t.Errorf("no calendars, %s: %+v", m, st)
		}
	}
	cs := domain.Calendars{domain.Forex: domain.ForexWeek{}}
	if st := domain.StateAt(cs, domain.Forex, sat); st.Open {
		t.Errorf("forex on Saturday: %+v", st)
	}
	if st := domain.StateAt(cs, domain.Crypto, sat); !st.Open || !st.Session.IsZero() {
		t.Errorf("crypto on Saturday: %+v", st)
	}
	var unknown domain.SessionCalendar
	if st := unknown.At(sat); !st.Open || st.Known {
		t.Errorf("empty session calendar: %+v, want open and unknown", st)
	}
	if _, ok := domain.RuleCalendar(domain.Stocks); ok {
		t.Error("stocks have a rule calendar; their sessions come from the feed")
	}
}

func TestTradingDay(t *testing.T) {
	t.Parallel()
	// 02:00 UTC on the 28th is still the 27th in New York.
	if got := domain.TradingDay(utc("2026-11-28T02:00:00Z")); !got.Equal(day("2026-11-27")) {
		t.Errorf("TradingDay = %s", got)
	}
	if got := domain.DayStart(day("2026-07-03")); !got.Equal(utc("2026-07-03T04:00:00Z")) {
		t.Errorf("DayStart = %s", got)
	}
}
