package feeds

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
)

// The calendar's payload is an array of {date, open, close} with the
// date as "%Y-%m-%d" and the times as "%H:%M" in New York, "taking into
// account early closures" (docs.alpaca.markets, Trading API, "Calendar":
// example {"date": "2018-01-03", "open": "09:30", "close": "16:00",
// "settlement_date": "2018-01-05"}); the API reference's example and
// alpaca-py's fixture (tests/trading/trading_client/
// test_clock_calendar_routes.py) add "session_open": "0400" and
// "session_close": "2000", the extended hours. testdata/alpaca/calendar.json
// is Thanksgiving week 2026 in that shape: no entry for the holiday on the
// 26th, the 27th closing at 13:00.

func setupAlpacaCalendar(t *testing.T, h http.HandlerFunc) (*alpaca, *testBundle) {
	t.Helper()
	tb := setup(t)
	tb.up.mux.HandleFunc("/v2/calendar", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("APCA-API-KEY-ID") != "test-key-id" || r.Header.Get("APCA-API-SECRET-KEY") != "test-secret" {
			body(http.StatusUnauthorized, `{"message":"forbidden"}`)(w, r)
			return
		}
		h(w, r)
	})
	reg, err := New(Config{Names: []string{NameAlpaca}, AlpacaKeyID: tb.cfg.AlpacaKeyID, AlpacaSecret: tb.cfg.AlpacaSecret,
		BaseURLs: tb.cfg.BaseURLs, HTTPClient: tb.cfg.HTTPClient, Logger: tb.cfg.Logger, Now: tb.cfg.Now, Sleep: tb.cfg.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.For(nasdaq)
	a, ok := p.(*alpaca)
	if !ok {
		t.Fatalf("the alpaca feed is a %T, not a calendar provider", p)
	}
	return a, tb
}

func TestAlpacaCalendar(t *testing.T) {
	t.Parallel()
	a, tb := setupAlpacaCalendar(t, file(t, "alpaca/calendar.json"))
	var _ CalendarProvider = a
	got, err := a.Schedule(context.Background(), domain.Stocks, day("2026-11-23"), day("2026-12-04"))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { return utc(s) }
	sess := func(d, open, close string) domain.Session {
		return domain.Session{Day: day(d), Open: at(d + "T" + open + ":00Z"), Close: at(d + "T" + close + ":00Z")}
	}
	want := domain.Schedule{Market: domain.Stocks, First: day("2026-11-23"), Last: day("2026-12-04"), Sessions: []domain.Session{
		sess("2026-11-23", "14:30", "21:00"), sess("2026-11-24", "14:30", "21:00"), sess("2026-11-25", "14:30", "21:00"),
		sess("2026-11-27", "14:30", "18:00"), // 13:00 EST
		sess("2026-11-30", "14:30", "21:00"), sess("2026-12-01", "14:30", "21:00"), sess("2026-12-02", "14:30", "21:00"),
		sess("2026-12-03", "14:30", "21:00"), sess("2026-12-04", "14:30", "21:00"),
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schedule (-want +got):\n%s", diff)
	}
	reqs := tb.up.requestsTo("/v2/calendar")
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if q := reqs[0].URL.Query(); q.Get("start") != "2026-11-23" || q.Get("end") != "2026-12-04" {
		t.Errorf("query %v", q)
	}
	if _, err := a.Schedule(context.Background(), domain.Forex, day("2026-11-23"), day("2026-12-04")); err == nil {
		t.Error("forex sessions from alpaca")
	}
}

// TestAlpacaCalendarDocumentedDay parses alpaca-py's fixture of
// /v2/calendar as it stands: 2025-01-02, a winter day (EST).
func TestAlpacaCalendarDocumentedDay(t *testing.T) {
	t.Parallel()
	const fixture = `[{"date": "2025-01-02", "open": "09:30", "close": "16:00", "session_open": "0400", "session_close": "2000", "settlement_date": "2025-01-03"}]`
	got, err := parseAlpacaCalendar([]byte(fixture), day("2025-01-02"), day("2025-01-02"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sessions) != 1 || !got.Sessions[0].Open.Equal(utc("2025-01-02T14:30:00Z")) || !got.Sessions[0].Close.Equal(utc("2025-01-02T21:00:00Z")) {
		t.Errorf("%+v", got)
	}
	// A summer day of the documented example's shape is on EDT.
	got, err = parseAlpacaCalendar([]byte(`[{"date": "2018-07-03", "open": "09:30", "close": "13:00", "settlement_date": "2018-07-06"}]`),
		day("2018-07-03"), day("2018-07-03"))
	if err != nil || !got.Sessions[0].Open.Equal(utc("2018-07-03T13:30:00Z")) || !got.Sessions[0].Close.Equal(utc("2018-07-03T17:00:00Z")) {
		t.Errorf("2018-07-03: %+v %v", got, err)
	}
}

// TestAlpacaCalendarEnd: the broker publishes its calendar to 2029; asked
// further, the schedule covers what was published, not the days after.
func TestAlpacaCalendarEnd(t *testing.T) {
	t.Parallel()
	payload := `[{"date": "2029-12-28", "open": "09:30", "close": "16:00"}, {"date": "2029-12-31", "open": "09:30", "close": "16:00"}]`
	got, err := parseAlpacaCalendar([]byte(payload), day("2029-12-27"), day("2030-06-30"))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Last.Equal(day("2029-12-31")) || !got.First.Equal(day("2029-12-27")) {
		t.Errorf("covers %s..%s, want 2029-12-27..2029-12-31", got.First, got.Last)
	}
	// Within a week of the end asked, the list vouches for the days up to it.
	got, _ = parseAlpacaCalendar([]byte(payload), day("2029-12-27"), day("2030-01-02"))
	if !got.Last.Equal(day("2030-01-02")) {
		t.Errorf("covers to %s, want 2030-01-02", got.Last)
	}
}

// TestAlpacaCalendarRejectsBadDays: a malformed entry fails the answer (a
// day dropped would read as a holiday), and so does an empty list.
func TestAlpacaCalendarRejectsBadDays(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string]string{
		"bad date":     `[{"date": "2026/11/23", "open": "09:30", "close": "16:00"}]`,
		"bad open":     `[{"date": "2026-11-23", "open": "9h30", "close": "16:00"}]`,
		"missing":      `[{"date": "2026-11-23", "open": "09:30"}]`,
		"inverted":     `[{"date": "2026-11-23", "open": "16:00", "close": "09:30"}]`,
		"out of order": `[{"date": "2026-11-24", "open": "09:30", "close": "16:00"}, {"date": "2026-11-23", "open": "09:30", "close": "16:00"}]`,
		"empty":        `[]`,
		"not a list":   `{"message": "oops"}`,
	} {
		if _, err := parseAlpacaCalendar([]byte(payload), day("2026-11-23"), day("2026-11-30")); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	a, _ := setupAlpacaCalendar(t, body(http.StatusOK, `[{"date": "2026-11-23", "open": "09:30", "close": "25:00"}]`))
	if _, err := a.Schedule(context.Background(), domain.Stocks, day("2026-11-23"), day("2026-11-30")); err == nil ||
		!strings.Contains(err.Error(), "/v2/calendar") {
		t.Errorf("bad close: %v", err)
	}
}

func FuzzParseAlpacaCalendar(f *testing.F) {
	f.Add([]byte(`[{"date": "2026-11-27", "open": "09:30", "close": "13:00"}]`))
	f.Add([]byte(`[{"date": "2026-03-08", "open": "02:30", "close": "03:00"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseAlpacaCalendar(b, day("2026-01-01"), day("2026-12-31"))
		if err == nil {
			if verr := s.Validate(); verr != nil {
				t.Fatalf("accepted an invalid schedule: %v", verr)
			}
		}
	})
}
