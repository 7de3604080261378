package exchangesim

import (
	"net/http"
	"sync"
	"time"
	_ "time/tzdata" // America/New_York even where the host has no zoneinfo
)

// newYork is the exchange's time zone: Alpaca's calendar and clock speak
// New York local time, and its daily bars open at New York's midnight.
var newYork = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic("exchangesim: time zone America/New_York: " + err.Error())
	}
	return loc
}()

// day is a New York calendar date, as days since 1970-01-01.
type day int

func civilDay(y int, m time.Month, d int) day {
	return day(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// dayOf is t's New York date.
func dayOf(t time.Time) day {
	t = t.In(newYork)
	return civilDay(t.Year(), t.Month(), t.Day())
}

func (d day) date() time.Time       { return time.Unix(int64(d)*86400, 0).UTC() }
func (d day) weekday() time.Weekday { return d.date().Weekday() }
func (d day) String() string        { return d.date().Format(time.DateOnly) }
func (d day) midnight() time.Time   { return d.at(0, 0) }
func (d day) isWeekend() bool       { wd := d.weekday(); return wd == time.Saturday || wd == time.Sunday }
func (d day) at(h, m int) time.Time {
	t := d.date()
	return time.Date(t.Year(), t.Month(), t.Day(), h, m, 0, 0, newYork)
}
func nthWeekday(y int, m time.Month, wd time.Weekday, n int) day {
	first := civilDay(y, m, 1)
	return first + day((int(wd)-int(first.weekday())+7)%7) + day(7*(n-1))
}

func lastWeekday(y int, m time.Month, wd time.Weekday) day {
	last := civilDay(y, m+1, 1) - 1
	return last - day((int(last.weekday())-int(wd)+7)%7)
}

// easter is Easter Sunday (the anonymous Gregorian computus).
func easter(y int) day {
	a, b, c := y%19, y/100, y%100
	d, e := b/4, b%4
	f := (b + 8) / 25
	g := (b - f + 1) / 3
	h := (19*a + b - d - g + 15) % 30
	i, k := c/4, c%4
	l := (32 + 2*e + 2*i - h - k) % 7
	m := (a + 11*h + 22*l) / 451
	month := (h + l - 7*m + 114) / 31
	return civilDay(y, time.Month(month), (h+l-7*m+114)%31+1)
}

// specialClosures are NYSE's unscheduled full-day closures since 2001
// (the September 11 attacks, the national days of mourning for
// presidents Reagan, Ford, G. H. W. Bush and Carter, Hurricane Sandy):
// Alpaca's calendar, built from the exchange's, has them too.
var specialClosures = []day{
	civilDay(2001, 9, 11), civilDay(2001, 9, 12), civilDay(2001, 9, 13), civilDay(2001, 9, 14),
	civilDay(2004, 6, 11), civilDay(2007, 1, 2), civilDay(2012, 10, 29), civilDay(2012, 10, 30),
	civilDay(2018, 12, 5), civilDay(2025, 1, 9),
}

// marketCalendar is NYSE's calendar computed from its rules for any
// year, plus Config's extra closures and early closes.
type marketCalendar struct {
	extraHolidays, extraEarly map[day]bool

	mu    sync.Mutex
	years map[int]yearRules
}

type yearRules struct{ holidays, early map[day]bool }

func newMarketCalendar(holidays, early []time.Time) *marketCalendar {
	c := &marketCalendar{extraHolidays: map[day]bool{}, extraEarly: map[day]bool{}, years: map[int]yearRules{}}
	for _, t := range holidays {
		c.extraHolidays[dayOf(t)] = true
	}
	for _, t := range early {
		c.extraEarly[dayOf(t)] = true
	}
	return c
}

// nyseYear applies NYSE's holiday rules (NYSE Rule 7.2 and the exchange's
// published holiday tables): New Year's Day (a Sunday moves to Monday, a
// Saturday is not made up on the Friday, the last day of the year),
// Martin Luther King Jr. Day (third Monday of January, since 1998),
// Washington's Birthday (third Monday of February), Good Friday, Memorial
// Day (last Monday of May), Juneteenth (June 19, since 2022),
// Independence Day, Labor Day (first Monday of September), Thanksgiving
// (fourth Thursday of November) and Christmas; a fixed-date holiday on a
// Saturday closes the Friday before, on a Sunday the Monday after. The
// 13:00 early closes: July 3 when it is a Monday to Thursday (the eve of
// an Independence Day kept on its own date), the day after Thanksgiving,
// and Christmas Eve when it is a Monday to Thursday.
func nyseYear(y int) yearRules {
	r := yearRules{holidays: map[day]bool{}, early: map[day]bool{}}
	add := func(d day) {
		if !d.isWeekend() {
			r.holidays[d] = true
		}
	}
	observed := func(d day) day {
		switch d.weekday() {
		case time.Saturday:
			return d - 1
		case time.Sunday:
			return d + 1
		}
		return d
	}
	if nyd := civilDay(y, time.January, 1); nyd.weekday() == time.Sunday {
		add(nyd + 1)
	} else {
		add(nyd)
	}
	if y >= 1998 {
		add(nthWeekday(y, time.January, time.Monday, 3))
	}
	add(nthWeekday(y, time.February, time.Monday, 3))
	add(easter(y) - 2)
	add(lastWeekday(y, time.May, time.Monday))
	if y >= 2022 {
		add(observed(civilDay(y, time.June, 19)))
	}
	add(observed(civilDay(y, time.July, 4)))
	add(nthWeekday(y, time.September, time.Monday, 1))
	thanksgiving := nthWeekday(y, time.November, time.Thursday, 4)
	add(thanksgiving)
	add(observed(civilDay(y, time.December, 25)))
	for _, d := range specialClosures {
		if d.date().Year() == y {
			add(d)
		}
	}
	monToThu := func(d day) bool { wd := d.weekday(); return wd >= time.Monday && wd <= time.Thursday }
	if d := civilDay(y, time.July, 3); monToThu(d) {
		r.early[d] = true
	}
	r.early[thanksgiving+1] = true
	if d := civilDay(y, time.December, 24); monToThu(d) {
		r.early[d] = true
	}
	return r
}

func (c *marketCalendar) year(y int) yearRules {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.years[y]
	if !ok {
		r = nyseYear(y)
		c.years[y] = r
	}
	return r
}

func (c *marketCalendar) isTradingDay(d day) bool {
	return !d.isWeekend() && !c.extraHolidays[d] && !c.year(d.date().Year()).holidays[d]
}

func (c *marketCalendar) isEarlyClose(d day) bool {
	return c.extraEarly[d] || c.year(d.date().Year()).early[d]
}

// next and prev are the trading days after and before d.
func (c *marketCalendar) next(d day) day {
	for d++; !c.isTradingDay(d); d++ {
	}
	return d
}

func (c *marketCalendar) prev(d day) day {
	for d--; !c.isTradingDay(d); d-- {
	}
	return d
}

// closeAt is the regular session's close: 16:00, or 13:00 on an early close.
func (c *marketCalendar) closeAt(d day) time.Time {
	if c.isEarlyClose(d) {
		return d.at(13, 0)
	}
	return d.at(16, 0)
}

// settlement is the trade date's settlement date: T+1 from 2024-05-28
// (SEC Rule 15c6-1 as amended), T+2 from 2017-09-05, T+3 before,
// counting days when the exchange is open and the Federal Reserve's banks
// too (Columbus Day and Veterans Day close the banks, not the exchange).
func (c *marketCalendar) settlement(d day) day {
	n := 1
	switch {
	case d < civilDay(2017, time.September, 5):
		n = 3
	case d < civilDay(2024, time.May, 28):
		n = 2
	}
	s := d
	for n > 0 {
		s++
		if c.isTradingDay(s) && !bankHoliday(s) {
			n--
		}
	}
	return s
}

// bankHoliday is a Federal Reserve holiday on which the exchange trades:
// Columbus Day (second Monday of October) and Veterans Day (November 11,
// a Sunday moved to Monday; the Fed does not make up a Saturday).
func bankHoliday(d day) bool {
	t := d.date()
	if t.Month() == time.October && d == nthWeekday(t.Year(), time.October, time.Monday, 2) {
		return true
	}
	vd := civilDay(t.Year(), time.November, 11)
	if vd.weekday() == time.Sunday {
		vd++
	}
	return d == vd
}

// calendarDay is one row of GET /v2/calendar ([docs-ref] getcalendar-1;
// session_open and session_close as HHMM, [sdk-py]
// test_misc_routes.py: "0400", "2000").
type calendarDay struct {
	Date           string `json:"date"`
	Open           string `json:"open"`
	Close          string `json:"close"`
	SessionOpen    string `json:"session_open"`
	SessionClose   string `json:"session_close"`
	SettlementDate string `json:"settlement_date"`
}

func (c *marketCalendar) row(d day) calendarDay {
	closeAt := c.closeAt(d).In(newYork)
	sessionClose := closeAt.Add(4 * time.Hour) // 20:00, or 17:00 after an early close (chosen: four hours after the close)
	return calendarDay{Date: d.String(), Open: "09:30", Close: closeAt.Format("15:04"), SessionOpen: "0400",
		SessionClose: sessionClose.Format("1504"), SettlementDate: c.settlement(d).String()}
}

// calendar serves GET /v2/calendar: the trading days from start to end
// (inclusive; dates or RFC 3339 times, read as New York dates). Without
// them Alpaca serves "the full list of market days from 1970 to 2029"
// ([docs-ref] getcalendar-1); the simulator's list ends a year after the
// clock's if that is later. date_type=SETTLEMENT selects by settlement date.
func (a *alpacaSim) calendar(r *http.Request) (any, *alpacaError) {
	q := r.URL.Query()
	now := a.now()
	start, end := civilDay(1970, time.January, 1), civilDay(max(2029, now.In(newYork).Year()+1), time.December, 31)
	for _, p := range []struct {
		name string
		dst  *day
	}{{"start", &start}, {"end", &end}} {
		if v := q.Get(p.name); v != "" {
			t, ok := parseAlpacaTime(v)
			if !ok {
				return nil, errBadRequest("invalid " + p.name + ": " + v)
			}
			*p.dst = dayOf(t)
		}
	}
	bySettlement := false
	switch q.Get("date_type") {
	case "", "TRADING":
	case "SETTLEMENT":
		bySettlement = true
	default:
		return nil, errBadRequest("invalid date_type: " + q.Get("date_type"))
	}
	rows := []calendarDay{}
	from := start
	if bySettlement {
		from = start - 10 // a trade date settles at most T+3 business days later
	}
	for d := from; d <= end; d++ {
		if !a.cal.isTradingDay(d) {
			continue
		}
		if bySettlement {
			if s := a.cal.settlement(d); s < start || s > end {
				continue
			}
		}
		rows = append(rows, a.cal.row(d))
	}
	return rows, nil
}

// alpacaClock is GET /v2/clock's body ([docs-md] data/webapi/entities/clock.yaml).
type alpacaClock struct {
	Timestamp string `json:"timestamp"`
	IsOpen    bool   `json:"is_open"`
	NextOpen  string `json:"next_open"`
	NextClose string `json:"next_close"`
}

// clock serves GET /v2/clock in New York local time with its offset, as
// documented ("2022-04-28T14:07:04.451420928-04:00"); is_open covers the
// regular session only.
func (a *alpacaSim) clock(*http.Request) (any, *alpacaError) {
	now := a.now()
	d := dayOf(now)
	open := a.cal.isTradingDay(d) && !now.Before(d.at(9, 30)) && now.Before(a.cal.closeAt(d))
	nextOpenDay, nextCloseDay := d, d
	if !a.cal.isTradingDay(d) || !now.Before(d.at(9, 30)) {
		nextOpenDay = a.cal.next(d)
	}
	if !a.cal.isTradingDay(d) || !now.Before(a.cal.closeAt(d)) {
		nextCloseDay = a.cal.next(d)
	}
	return alpacaClock{Timestamp: now.In(newYork).Format(time.RFC3339Nano), IsOpen: open,
		NextOpen:  nextOpenDay.at(9, 30).Format(time.RFC3339),
		NextClose: a.cal.closeAt(nextCloseDay).Format(time.RFC3339)}, nil
}

// parseAlpacaTime reads a query time: RFC 3339 (with or without a
// fraction) or a date, which counts from New York's midnight (chosen:
// Alpaca accepts "RFC-3339 or YYYY-MM-DD" without saying which zone a
// date is in).
func parseAlpacaTime(v string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, newYork); err == nil {
		return t, true
	}
	return time.Time{}, false
}
