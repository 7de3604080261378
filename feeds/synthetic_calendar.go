package feeds

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/marketscreener/market/domain"
)

// The synthetic feed trades its stocks in the NYSE's sessions and its
// currencies in the forex week, so a demo shows a closed market as a real
// feed does: no candles while it is closed, screener rows frozen at the
// last close. The NYSE's sessions come from its published rules (below),
// never from a list of dates: the synthetic feed is a provider like
// Alpaca, whose calendar the worker stores the same way.

// Schedule implements CalendarProvider: the NYSE's sessions by rule.
func (s *Synthetic) Schedule(_ context.Context, m domain.Market, first, last time.Time) (domain.Schedule, error) {
	if m != domain.Stocks {
		return domain.Schedule{}, fmt.Errorf("feeds: synthetic: sessions of %s: %w", m, ErrUnsupported)
	}
	first, last = domain.TradingDay(first), domain.TradingDay(last)
	out := domain.Schedule{Market: m, First: first, Last: last}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		if ss, ok := nyseSession(d); ok {
			out.Sessions = append(out.Sessions, ss)
		}
	}
	return out, nil
}

// nyseSession is the NYSE's regular session of trading day d (a date as
// 00:00 UTC), by the rules the exchange publishes (NYSE Rule 7.2 and its
// holiday and hours notices): weekdays 09:30-16:00 New York time, except
// the nine holidays below, and 13:00 closes on the day after
// Thanksgiving, and on July 3 and December 24 when they fall on a Monday
// to Thursday. Nasdaq keeps the same days and hours. Unscheduled
// closures (national days of mourning, storms) follow no rule and are
// not here: that is what a real provider's calendar adds.
func nyseSession(d time.Time) (domain.Session, bool) {
	if wd := d.Weekday(); wd == time.Saturday || wd == time.Sunday || nyseHoliday(d) {
		return domain.Session{}, false
	}
	y, m, dd := d.Date()
	closeHour := 16
	if nyseEarlyClose(d) {
		closeHour = 13
	}
	ny := domain.NewYork()
	return domain.Session{
		Day:   d,
		Open:  time.Date(y, m, dd, 9, 30, 0, 0, ny).UTC(),
		Close: time.Date(y, m, dd, closeHour, 0, 0, 0, ny).UTC(),
	}, true
}

// nyseHoliday reports whether weekday d is one of the NYSE's full-day
// holidays. A holiday on a Saturday is observed on the Friday before and
// one on a Sunday on the Monday after, except New Year's Day on a
// Saturday, which is not observed (Rule 7.2: the Friday is the last
// trading day of the year).
func nyseHoliday(d time.Time) bool {
	y := d.Year()
	fixed := []time.Time{date(y, time.July, 4), date(y, time.December, 25)}
	if y >= 2022 { // Juneteenth, a holiday since 2022
		fixed = append(fixed, date(y, time.June, 19))
	}
	for _, h := range fixed {
		if d.Equal(observed(h)) {
			return true
		}
	}
	newYear := date(y, time.January, 1)
	if newYear.Weekday() != time.Saturday && d.Equal(observed(newYear)) {
		return true
	}
	for _, h := range []time.Time{
		nthWeekday(y, time.January, time.Monday, 3),   // Martin Luther King Jr. Day
		nthWeekday(y, time.February, time.Monday, 3),  // Washington's Birthday
		easter(y).AddDate(0, 0, -2),                   // Good Friday
		lastWeekday(y, time.May, time.Monday),         // Memorial Day
		nthWeekday(y, time.September, time.Monday, 1), // Labor Day
		thanksgiving(y),
	} {
		if d.Equal(h) {
			return true
		}
	}
	return false
}

// nyseEarlyClose reports whether trading day d closes at 13:00.
func nyseEarlyClose(d time.Time) bool {
	y, m, dd := d.Date()
	midweek := d.Weekday() >= time.Monday && d.Weekday() <= time.Thursday
	return d.Equal(thanksgiving(y).AddDate(0, 0, 1)) ||
		(m == time.July && dd == 3 && midweek) ||
		(m == time.December && dd == 24 && midweek)
}

func date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// observed moves a holiday off the weekend.
func observed(h time.Time) time.Time {
	switch h.Weekday() {
	case time.Saturday:
		return h.AddDate(0, 0, -1)
	case time.Sunday:
		return h.AddDate(0, 0, 1)
	}
	return h
}

func thanksgiving(y int) time.Time { return nthWeekday(y, time.November, time.Thursday, 4) }

// nthWeekday is the n-th given weekday of a month.
func nthWeekday(y int, m time.Month, wd time.Weekday, n int) time.Time {
	first := date(y, m, 1)
	return first.AddDate(0, 0, (int(wd)-int(first.Weekday())+7)%7+7*(n-1))
}

// lastWeekday is the last given weekday of a month.
func lastWeekday(y int, m time.Month, wd time.Weekday) time.Time {
	last := date(y, m+1, 0)
	return last.AddDate(0, 0, -((int(last.Weekday()) - int(wd) + 7) % 7))
}

// easter is Easter Sunday of the Gregorian year y (the anonymous
// Gregorian algorithm, Meeus/Jones/Butcher).
func easter(y int) time.Time {
	a, b, c := y%19, y/100, y%100
	d, e := b/4, b%4
	f := (b + 8) / 25
	g := (b - f + 1) / 3
	h := (19*a + b - d - g + 15) % 30
	i, k := c/4, c%4
	l := (32 + 2*e + 2*i - h - k) % 7
	m := (a + 11*h + 22*l) / 451
	month := (h + l - 7*m + 114) / 31
	day := (h+l-7*m+114)%31 + 1
	return date(y, time.Month(month), day)
}

// sessionSource walks a market's sessions for the synthetic feed's candles
// and screener rows.
type sessionSource interface {
	// after is the first session closing after t.
	after(t time.Time) domain.Session
	// before is the last session opening before t.
	before(t time.Time) domain.Session
}

// sessionsOf is the sessions of a market the synthetic feed trades in
// sessions; nil for crypto, which trades around the clock.
func sessionsOf(m domain.Market) sessionSource {
	switch m {
	case domain.Stocks:
		return nyseSessions{}
	case domain.Forex:
		return forexWeeks{}
	}
	return nil
}

// marketState is a session market's state at t: the session trading at t
// (open true) or the last one closed before it.
func marketState(src sessionSource, t time.Time) (domain.Session, bool) {
	ss := src.before(t.Add(1))
	return ss, t.Before(ss.Close)
}

// nyseSessions walks nyseSession day by day; the longest run of days
// without a session is a four-day weekend, so every walk is short.
type nyseSessions struct{}

func (nyseSessions) after(t time.Time) domain.Session {
	for d := domain.TradingDay(t); ; d = d.AddDate(0, 0, 1) {
		if ss, ok := nyseSession(d); ok && ss.Close.After(t) {
			return ss
		}
	}
}

func (nyseSessions) before(t time.Time) domain.Session {
	for d := domain.TradingDay(t); ; d = d.AddDate(0, 0, -1) {
		if ss, ok := nyseSession(d); ok && ss.Open.Before(t) {
			return ss
		}
	}
}

// forexWeeks walks the forex week (domain.ForexWeek).
type forexWeeks struct{}

func (forexWeeks) after(t time.Time) domain.Session {
	st := domain.ForexWeek{}.At(t)
	if st.Open {
		return st.Session
	}
	return domain.ForexWeek{}.At(st.NextOpen).Session
}

func (forexWeeks) before(t time.Time) domain.Session {
	return domain.ForexWeek{}.At(t.Add(-1)).Session
}

// window is one candle of a market that trades in sessions: its open time
// t0 (aligned as every candle is) and the span [a, b) from the first to
// the last instant it traded; days is how many trading days of volume it
// holds (a week of stock sessions: 5).
type window struct {
	t0, a, b time.Time
	days     float64
}

// sessionDays is the trading days of volume one session holds: a stock
// session one, a forex week five.
func sessionDays(ss domain.Session) float64 {
	return math.Max(1, math.Round(ss.Close.Sub(ss.Open).Hours()/24))
}

// part is the window of the candle opening at t0 within session ss.
func part(ss domain.Session, t0 time.Time, dur time.Duration) window {
	a, b := t0, t0.Add(dur)
	if ss.Open.After(a) {
		a = ss.Open
	}
	if ss.Close.Before(b) {
		b = ss.Close
	}
	return window{t0: t0, a: a, b: b, days: float64(b.Sub(a)) / float64(ss.Close.Sub(ss.Open)) * sessionDays(ss)}
}

// windowsFrom lists, oldest first, at most limit candles of tf opening at
// or after first (aligned) that traded by now: only candles overlapping a
// session exist, as on an exchange.
func windowsFrom(src sessionSource, tf domain.Timeframe, first, now time.Time, limit int) []window {
	dur := tf.Duration()
	var out []window
	for t := first; ; {
		ss := src.after(t)
		if ss.Open.After(now) {
			return out
		}
		t0 := tf.Truncate(ss.Open)
		if t0.Before(first) {
			t0 = first
		}
		for ; t0.Before(ss.Close); t0 = t0.Add(dur) {
			w := part(ss, t0, dur)
			if w.a.After(now) {
				return out
			}
			if n := len(out); n > 0 && out[n-1].t0.Equal(t0) { // a week spans sessions
				out[n-1].b, out[n-1].days = w.b, out[n-1].days+w.days
				continue
			}
			if len(out) == limit {
				return out
			}
			out = append(out, w)
		}
		t = ss.Close
	}
}

// windowsBefore lists, oldest first, the newest limit candles of tf that
// traded by now.
func windowsBefore(src sessionSource, tf domain.Timeframe, now time.Time, limit int) []window {
	dur := tf.Duration()
	var rev []window
	stop := now.AddDate(-100, 0, 0) // a bound for absurd limits, far past any retention
	for t := now.Add(1); t.After(stop); {
		ss := src.before(t)
		last := ss.Close.Add(-1)
		if now.Before(last) {
			last = now
		}
		for t0 := tf.Truncate(last); t0.Add(dur).After(ss.Open); t0 = t0.Add(-dur) {
			w := part(ss, t0, dur)
			if n := len(rev); n > 0 && rev[n-1].t0.Equal(t0) {
				rev[n-1].a, rev[n-1].days = w.a, rev[n-1].days+w.days
				continue
			}
			if len(rev) == limit {
				slices.Reverse(rev)
				return rev
			}
			rev = append(rev, w)
		}
		t = ss.Open
	}
	slices.Reverse(rev)
	return rev
}

// windowSeries builds the candles of ws. Each one opens at the price of its
// first traded instant and closes at its last one's (so a stock's candles
// gap overnight, as the path moved while the market was shut); its high
// and low are sampled within what it traded. A candle of a day or longer
// gets the volume of the trading days it holds.
func (s *Synthetic) windowSeries(in *instrument, tf domain.Timeframe, ws []window, now time.Time) []domain.Candle {
	e := in.evaluator(s.factors[in.market])
	nowNs := now.UnixNano()
	out := make([]domain.Candle, len(ws))
	for i, w := range ws {
		a, b := w.a.UnixNano(), w.b.UnixNano()
		c, _, quoteVol := s.candle(&e, tf, a, b-a, nowNs, e.logPrice(a, 0))
		if b-a >= int64(24*time.Hour) {
			quoteVol *= w.days * nanosPerDay / (float64(b-a) * dailySeasonality(in.market, a, b-a))
			c.Volume = in.toUnits(quoteVol, (c.Open+c.Close)/2)
		}
		c.Time = w.t0
		out[i] = c
	}
	return out
}
