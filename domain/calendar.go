package domain

import (
	"fmt"
	"sort"
	"time"
	// Every role asks New York's rules (the US stock session, the forex
	// week's close) and must answer the same on any host: the embedded
	// time-zone database is used where the host has none (a distroless
	// image, a minimal CI container). It costs about 450 KB.
	_ "time/tzdata"
)

// newYork is the time zone of the US stock exchanges and of the forex
// week's close. Loading it cannot fail with time/tzdata embedded.
var newYork = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(fmt.Sprintf("domain: time zone America/New_York: %v", err))
	}
	return loc
}()

// NewYork is the time zone of the US stock exchanges' sessions and of the
// forex week's open and close.
func NewYork() *time.Location { return newYork }

// Session is one trading session of a market: it trades from Open up to,
// not including, Close.
type Session struct {
	// Day is the trading day, its date in the exchange's time zone as
	// 00:00 UTC (how Postgres dates read); zero for the forex week, which
	// is one session from Sunday to Friday.
	Day   time.Time
	Open  time.Time
	Close time.Time
}

// IsZero reports whether s is no session (none known).
func (s Session) IsZero() bool { return s.Open.IsZero() }

// Contains reports whether the market trades at t in this session.
func (s Session) Contains(t time.Time) bool { return !t.Before(s.Open) && t.Before(s.Close) }

// MarketState is what a market's calendar says about one instant.
type MarketState struct {
	// Open: the market trades at the instant, or its calendar does not
	// know (Known false), which is taken as trading: a missing calendar
	// never stops ingest, alerts or 502s, it only leaves them as they are
	// without one.
	Open bool
	// Known: the calendar covers the instant.
	Known bool
	// Session is the session trading at the instant when Open, else the
	// last one that closed before it; zero when none is known and for a
	// market that never closes (crypto).
	Session Session
	// NextOpen is, while the market is closed, when its next session
	// opens; zero while it trades or when the calendar does not know.
	NextOpen time.Time
}

// Calendar says when a market trades.
type Calendar interface {
	// At is the market's state at t.
	At(t time.Time) MarketState
}

// AroundTheClock is the calendar of a market that never closes (crypto).
type AroundTheClock struct{}

// At implements Calendar: always open.
func (AroundTheClock) At(time.Time) MarketState { return MarketState{Open: true, Known: true} }

// ForexWeek is the calendar of the interbank currency market: one session a
// week, from Sunday 17:00 to Friday 17:00 New York time (the convention
// OANDA and the other retail venues follow), whatever the daylight-saving
// time of either end. Bank holidays are not closures: the market stays
// open, thinly.
type ForexWeek struct{}

// At implements Calendar.
func (ForexWeek) At(t time.Time) MarketState {
	local := t.In(newYork)
	y, m, d := local.Date()
	open := time.Date(y, m, d-int(local.Weekday()), 17, 0, 0, 0, newYork) // this week's Sunday
	if t.Before(open) {
		open = open.AddDate(0, 0, -7)
	}
	s := forexSession(open)
	if t.Before(s.Close) {
		return MarketState{Open: true, Known: true, Session: s}
	}
	return MarketState{Known: true, Session: s, NextOpen: forexSession(open.AddDate(0, 0, 7)).Open}
}

// forexSession is the week opening at open (a Sunday 17:00 in New York).
// AddDate keeps the wall-clock 17:00 across a daylight-saving change.
func forexSession(open time.Time) Session {
	return Session{Open: open.UTC(), Close: open.AddDate(0, 0, 5).UTC()}
}

// Schedule is a provider's list of one market's sessions over a range of
// trading days (the US stock exchanges': regular sessions and early
// closes; holidays and weekends have none). A day of the range without a
// session is a day the market does not trade; outside the range nothing
// is known.
type Schedule struct {
	Market Market
	// First and Last are the first and last trading days the list covers
	// (dates in New York, as 00:00 UTC).
	First, Last time.Time
	// Sessions are in order of their open.
	Sessions []Session
}

// Validate checks what a provider's list must be for a calendar: a
// non-empty range, sessions inside it, each opening before it closes, in
// order and apart.
func (s Schedule) Validate() error {
	if s.First.IsZero() || s.Last.Before(s.First) {
		return Errorf(EINVALID, "calendar of %s: empty range %s..%s", s.Market, s.First.Format(time.DateOnly), s.Last.Format(time.DateOnly))
	}
	from, to := s.covers()
	for i, ss := range s.Sessions {
		switch {
		case !ss.Open.Before(ss.Close):
			return Errorf(EINVALID, "calendar of %s: session %s closes before it opens", s.Market, ss.Day.Format(time.DateOnly))
		case ss.Open.Before(from) || ss.Close.After(to):
			return Errorf(EINVALID, "calendar of %s: session %s outside %s..%s", s.Market, ss.Day.Format(time.DateOnly),
				s.First.Format(time.DateOnly), s.Last.Format(time.DateOnly))
		case i > 0 && ss.Open.Before(s.Sessions[i-1].Close):
			return Errorf(EINVALID, "calendar of %s: session %s overlaps the one before", s.Market, ss.Day.Format(time.DateOnly))
		}
	}
	return nil
}

// covers is the span of instants the schedule vouches for: from the first
// day's midnight to the midnight after the last day, in New York.
func (s Schedule) covers() (from, to time.Time) {
	return DayStart(s.First), DayStart(s.Last.AddDate(0, 0, 1))
}

// DayStart is the midnight in New York that starts the trading day day
// (a date as 00:00 UTC).
func DayStart(day time.Time) time.Time {
	y, m, d := day.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, newYork).UTC()
}

// TradingDay is the date in New York of the instant t, as 00:00 UTC.
func TradingDay(t time.Time) time.Time {
	y, m, d := t.In(newYork).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// SessionCalendar is the calendar of a market that trades in sessions
// listed by its provider (the stock exchanges). The zero value knows
// nothing: every instant is Open but not Known.
type SessionCalendar struct {
	sessions []Session
	from, to time.Time
}

// NewSessionCalendar is the calendar of a provider's schedule.
func NewSessionCalendar(s Schedule) (*SessionCalendar, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	from, to := s.covers()
	return &SessionCalendar{sessions: append([]Session(nil), s.Sessions...), from: from, to: to}, nil
}

// At implements Calendar. Outside the schedule's range nothing is known.
func (c *SessionCalendar) At(t time.Time) MarketState {
	if c == nil || t.Before(c.from) || !t.Before(c.to) {
		return MarketState{Open: true}
	}
	// The first session opening after t; the one before it is the
	// current or the last one.
	i := sort.Search(len(c.sessions), func(i int) bool { return c.sessions[i].Open.After(t) })
	st := MarketState{Known: true}
	if i > 0 {
		st.Session = c.sessions[i-1]
		if t.Before(st.Session.Close) {
			st.Open = true
			return st
		}
	}
	if i < len(c.sessions) {
		st.NextOpen = c.sessions[i].Open
	}
	return st
}

// Sessions lists the calendar's sessions (a copy).
func (c *SessionCalendar) Sessions() []Session {
	if c == nil {
		return nil
	}
	return append([]Session(nil), c.sessions...)
}

// MarketHours gives each market's calendar.
type MarketHours interface {
	Calendar(m Market) Calendar
}

// Calendars is a fixed set of calendars (tests, the synthetic feed); a
// market without one trades around the clock.
type Calendars map[Market]Calendar

// Calendar implements MarketHours.
func (cs Calendars) Calendar(m Market) Calendar {
	if c, ok := cs[m]; ok && c != nil {
		return c
	}
	return AroundTheClock{}
}

// StateAt is market m's state at t by h; a nil h (no calendar
// configured) has every market trading around the clock, as the service
// did before it knew any calendar.
func StateAt(h MarketHours, m Market, t time.Time) MarketState {
	if h == nil {
		return AroundTheClock{}.At(t)
	}
	return h.Calendar(m).At(t)
}

// RuleCalendar is the calendar a market has by rule, with no provider:
// crypto never closes, forex closes for the weekend (ForexWeek). Stocks
// have none (their sessions come from the feed: ok false).
func RuleCalendar(m Market) (c Calendar, ok bool) {
	switch m {
	case Crypto:
		return AroundTheClock{}, true
	case Forex:
		return ForexWeek{}, true
	}
	return nil, false
}
