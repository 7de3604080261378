package feeds

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/marketscreener/market/domain"
)

// alpacaCalendarDay is one entry of GET /v2/calendar: "date" in
// "%Y-%m-%d", "open" and "close" in "%H:%M", New York time, "taking into
// account early closures" (docs.alpaca.markets, Trading API, "Calendar").
// The extended-hours session_open/session_close and settlement_date are
// not used: the regular session is what the screener follows.
type alpacaCalendarDay struct {
	Date  string `json:"date"`
	Open  string `json:"open"`
	Close string `json:"close"`
}

// alpacaCalendarSlack is how far before the asked end the broker's list
// may stop and still vouch for the days after its last session: the
// longest run of weekdays without a session is a few days (a holiday
// weekend, an unscheduled closure). A list ending earlier than that is the
// end of what the broker publishes (its calendar runs to 2029).
const alpacaCalendarSlack = 7 * 24 * time.Hour

// Schedule implements CalendarProvider for stocks: GET /v2/calendar on
// the trading host (HostAlpaca; the paper host answers the same), one
// request a day of its budget. The broker's calendar carries what no rule
// can: closures announced at short notice (a national day of mourning)
// and early closes.
func (a *alpaca) Schedule(ctx context.Context, m domain.Market, first, last time.Time) (domain.Schedule, error) {
	if m != domain.Stocks {
		return domain.Schedule{}, fmt.Errorf("feeds: alpaca: sessions of %s: %w", m, ErrUnsupported)
	}
	q := url.Values{"start": {first.Format(time.DateOnly)}, "end": {last.Format(time.DateOnly)}}
	body, err := a.trading.get(ctx, "/v2/calendar", q)
	if err != nil {
		return domain.Schedule{}, err
	}
	s, err := parseAlpacaCalendar(body, first, last)
	if err != nil {
		return domain.Schedule{}, fmt.Errorf("feeds: alpaca: /v2/calendar: %w", err)
	}
	return s, nil
}

// parseAlpacaCalendar reads the calendar asked for the trading days from
// first to last. Any malformed entry fails the whole answer: a day
// dropped would read as a holiday. Entries outside the range are ignored.
func parseAlpacaCalendar(body []byte, first, last time.Time) (domain.Schedule, error) {
	var days []alpacaCalendarDay
	if err := decodeJSON(body, &days); err != nil {
		return domain.Schedule{}, err
	}
	ny := domain.NewYork()
	s := domain.Schedule{Market: domain.Stocks, First: first, Last: last}
	for i, d := range days {
		date, err := time.Parse(time.DateOnly, d.Date)
		if err != nil {
			return domain.Schedule{}, fmt.Errorf("day %d: date %q: %w", i, d.Date, errBadField)
		}
		if date.Before(first) || date.After(last) {
			continue
		}
		open, err := time.ParseInLocation("2006-01-02 15:04", d.Date+" "+d.Open, ny)
		if err != nil {
			return domain.Schedule{}, fmt.Errorf("%s: open %q: %w", d.Date, d.Open, errBadField)
		}
		close, err := time.ParseInLocation("2006-01-02 15:04", d.Date+" "+d.Close, ny)
		if err != nil {
			return domain.Schedule{}, fmt.Errorf("%s: close %q: %w", d.Date, d.Close, errBadField)
		}
		s.Sessions = append(s.Sessions, domain.Session{Day: date, Open: open.UTC(), Close: close.UTC()})
	}
	if len(s.Sessions) == 0 {
		return domain.Schedule{}, fmt.Errorf("no sessions from %s to %s: %w", first.Format(time.DateOnly), last.Format(time.DateOnly), errBadField)
	}
	if end := s.Sessions[len(s.Sessions)-1].Day; last.Sub(end) > alpacaCalendarSlack {
		s.Last = end
	}
	if err := s.Validate(); err != nil {
		return domain.Schedule{}, err
	}
	return s, nil
}
