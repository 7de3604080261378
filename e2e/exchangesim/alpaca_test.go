package exchangesim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/e2e/exchangesim"
)

// testClock is a clock a test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// newYork is the exchange's zone, for building test times.
func newYork(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// tuesday is 2026-11-24 10:10:30 New York: the Tuesday before
// Thanksgiving, the market open.
var tuesday = time.Date(2026, 11, 24, 15, 10, 30, 0, time.UTC)

// alpaca returns a simulator on clock c with a small universe unless
// cfg says otherwise.
func alpaca(c *testClock, cfg exchangesim.AlpacaConfig) *exchangesim.Sim {
	if cfg.Assets == 0 {
		cfg.Assets, cfg.Inactive = 600, 30
	}
	return exchangesim.New(exchangesim.Config{Seed: 7, Now: c.Now, Alpaca: cfg})
}

// alpacaGet sends an authenticated GET.
func alpacaGet(h http.Handler, path string) *httptest.ResponseRecorder {
	return alpacaGetAs(h, path, "key", "secret")
}

func alpacaGetAs(h http.Handler, path, key, secret string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if key != "" {
		req.Header.Set("APCA-API-KEY-ID", key)
		req.Header.Set("APCA-API-SECRET-KEY", secret)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decodeOK decodes a 200 response.
func decodeOK[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %s: %v", rec.Body, err)
	}
	return v
}

// alpacaErr checks an error response's status and Alpaca body.
func alpacaErr(t *testing.T, rec *httptest.ResponseRecorder, status int, message string) {
	t.Helper()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if rec.Code != status || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code/100000 != status ||
		!strings.Contains(body.Message, message) {
		t.Errorf("got %d %s, want %d with an Alpaca body saying %q", rec.Code, rec.Body, status, message)
	}
}

type asset struct {
	ID, Class, Exchange, Symbol, Name, Status string
	Tradable, Marginable, Shortable           bool
	EasyToBorrow                              bool `json:"easy_to_borrow"`
	Fractionable                              bool
	Attributes                                []string
}

// TestAlpacaAssets: the default universe has at least 11,000 active
// us_equity assets over Alpaca's exchange values in the configured
// proportions, ticker-shaped symbols with dotted class shares, inactive
// assets on request, the documented order, and single lookups.
func TestAlpacaAssets(t *testing.T) {
	t.Parallel()
	sim := alpaca(&testClock{t: tuesday}, exchangesim.AlpacaConfig{Assets: 11500, Inactive: 600})
	active := decodeOK[[]asset](t, alpacaGet(sim, "/v2/assets?status=active&asset_class=us_equity"))
	if len(active) < 11000 {
		t.Fatalf("%d active assets, want at least 11,000", len(active))
	}
	shape := regexp.MustCompile(`^[A-Z]{1,5}(\.[A-Z])?$`)
	byExchange := map[string]int{}
	seen := map[string]bool{}
	for i, a := range active {
		byExchange[a.Exchange]++
		if a.Status != "active" || a.Class != "us_equity" || !shape.MatchString(a.Symbol) || seen[a.Symbol] || a.Name == "" || len(a.ID) != 36 {
			t.Fatalf("asset %+v: want an active us_equity with a unique ticker-shaped symbol, a name and a UUID", a)
		}
		seen[a.Symbol] = true
		if i > 0 && (active[i-1].Exchange > a.Exchange || active[i-1].Exchange == a.Exchange && active[i-1].Symbol > a.Symbol) {
			t.Fatalf("%s/%s before %s/%s: want exchange, then symbol order", active[i-1].Exchange, active[i-1].Symbol, a.Exchange, a.Symbol)
		}
	}
	for ex, want := range map[string]float64{"NASDAQ": 0.455, "NYSE": 0.245, "ARCA": 0.17, "BATS": 0.055, "AMEX": 0.03, "OTC": 0.04, "NYSEARCA": 0.005} {
		if got := float64(byExchange[ex]) / float64(len(active)); got < want*0.9 || got > want*1.1 {
			t.Errorf("%s: %.3f of the active assets, want %.3f", ex, got, want)
		}
	}
	if len(byExchange) != 7 {
		t.Errorf("exchanges %v, want Alpaca's seven values", byExchange)
	}
	for _, s := range []string{"BRK.B", "BF.B", "HEI.A", "AAPL", "SPY"} {
		if !seen[s] {
			t.Errorf("%s missing", s)
		}
	}
	inactive := decodeOK[[]asset](t, alpacaGet(sim, "/v2/assets?status=inactive"))
	if len(inactive) != 600 || inactive[0].Status != "inactive" || inactive[0].Tradable {
		t.Errorf("%d inactive assets (first %+v), want 600, not tradable", len(inactive), inactive[0])
	}
	all := decodeOK[[]asset](t, alpacaGet(sim, "/v2/assets"))
	if len(all) != len(active)+len(inactive) {
		t.Errorf("no status: %d assets, want active + inactive = %d", len(all), len(active)+len(inactive))
	}
	nyse := decodeOK[[]asset](t, alpacaGet(sim, "/v2/assets?status=active&exchange=NYSE"))
	if len(nyse) != byExchange["NYSE"] {
		t.Errorf("exchange=NYSE: %d, want %d", len(nyse), byExchange["NYSE"])
	}
	brk := decodeOK[asset](t, alpacaGet(sim, "/v2/assets/BRK.B"))
	if brk.Exchange != "NYSE" || !brk.Fractionable {
		t.Errorf("BRK.B: %+v", brk)
	}
	if byID := decodeOK[asset](t, alpacaGet(sim, "/v2/assets/"+brk.ID)); byID.Symbol != "BRK.B" {
		t.Errorf("by id: %+v", byID)
	}
	alpacaErr(t, alpacaGet(sim, "/v2/assets/NOPE.Z"), 404, "not found")
	alpacaErr(t, alpacaGet(sim, "/v2/assets?exchange=LSE"), 422, "exchange")
}

type calendarDay struct {
	Date, Open, Close string
	SessionOpen       string `json:"session_open"`
	SessionClose      string `json:"session_close"`
	SettlementDate    string `json:"settlement_date"`
}

// TestAlpacaCalendar: NYSE's 2026 and 2027 holidays and early closes
// come from its rules (weekend rules included), weekends are absent,
// settlement is T+1 over exchange and bank holidays, Config adds
// closures, and the clock reads the calendar.
func TestAlpacaCalendar(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim := alpaca(clock, exchangesim.AlpacaConfig{Holidays: []time.Time{time.Date(2026, 12, 30, 12, 0, 0, 0, time.UTC)}})
	days := decodeOK[[]calendarDay](t, alpacaGet(sim, "/v2/calendar?start=2026-01-01&end=2027-12-31"))
	byDate := map[string]calendarDay{}
	for _, d := range days {
		byDate[d.Date] = d
	}
	for _, h := range []string{"2026-01-01", "2026-01-19", "2026-02-16", "2026-04-03", "2026-05-25", "2026-06-19",
		"2026-07-03", "2026-09-07", "2026-11-26", "2026-12-25", "2027-01-01", "2027-03-26", "2027-06-18", "2027-07-05",
		"2027-11-25", "2027-12-24", "2026-12-30"} {
		if _, open := byDate[h]; open {
			t.Errorf("%s is a holiday, listed as a trading day", h)
		}
	}
	for _, w := range []string{"2026-11-28", "2026-11-29", "2027-07-04"} {
		if _, open := byDate[w]; open {
			t.Errorf("weekend day %s listed", w)
		}
	}
	want := map[string]calendarDay{
		"2026-11-27": {Date: "2026-11-27", Open: "09:30", Close: "13:00", SessionOpen: "0400", SessionClose: "1700", SettlementDate: "2026-11-30"},
		"2026-12-24": {Date: "2026-12-24", Open: "09:30", Close: "13:00", SessionOpen: "0400", SessionClose: "1700", SettlementDate: "2026-12-28"},
		"2026-11-25": {Date: "2026-11-25", Open: "09:30", Close: "16:00", SessionOpen: "0400", SessionClose: "2000", SettlementDate: "2026-11-27"},
		"2026-10-09": {Date: "2026-10-09", Open: "09:30", Close: "16:00", SessionOpen: "0400", SessionClose: "2000", SettlementDate: "2026-10-13"}, // Columbus Day closes the banks
		"2027-07-02": {Date: "2027-07-02", Open: "09:30", Close: "16:00", SessionOpen: "0400", SessionClose: "2000", SettlementDate: "2027-07-06"}, // no early close before a Monday holiday
	}
	for date, w := range want {
		if diff := cmp.Diff(w, byDate[date]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", date, diff)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(days), func(d calendarDay) bool { return d.Date >= "2027" })); n != 250 {
		t.Errorf("2026 has %d trading days, want 251 weekdays-not-holidays minus the configured closure = 250", n)
	}
	var clk struct {
		Timestamp string
		IsOpen    bool   `json:"is_open"`
		NextOpen  string `json:"next_open"`
		NextClose string `json:"next_close"`
	}
	clock.Set(time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)) // Wednesday 17:00, Thanksgiving next
	clk = decodeOK[struct {
		Timestamp string
		IsOpen    bool   `json:"is_open"`
		NextOpen  string `json:"next_open"`
		NextClose string `json:"next_close"`
	}](t, alpacaGet(sim, "/v2/clock"))
	if clk.IsOpen || clk.Timestamp != "2026-11-25T17:00:00-05:00" || clk.NextOpen != "2026-11-27T09:30:00-05:00" || clk.NextClose != "2026-11-27T13:00:00-05:00" {
		t.Errorf("clock %+v: want closed, next the early-close Friday 09:30 to 13:00 New York", clk)
	}
}

type bar struct {
	T          string
	O, H, L, C float64
	V, N       int64
	VW         float64
}

type barsPage struct {
	Bars          map[string][]bar
	NextPageToken *string `json:"next_page_token"`
}

// allBars follows next_page_token from query to the end.
func allBars(t *testing.T, h http.Handler, query string) (map[string][]bar, int) {
	t.Helper()
	out := map[string][]bar{}
	pages := 0
	token := ""
	for {
		q := query
		if token != "" {
			q += "&page_token=" + token
		}
		p := decodeOK[barsPage](t, alpacaGet(h, "/v2/stocks/bars?"+q))
		pages++
		for s, bs := range p.Bars {
			out[s] = append(out[s], bs...)
		}
		if p.NextPageToken == nil {
			return out, pages
		}
		token = *p.NextPageToken
		if pages > 1000 {
			t.Fatal("more than 1,000 pages")
		}
	}
}

// TestAlpacaBarsPaging: limit counts bars across every symbol of a page,
// sorted by symbol then time; following next_page_token reaches exactly
// the bars of one big page, ascending and descending; unknown symbols
// are left out.
func TestAlpacaBarsPaging(t *testing.T) {
	t.Parallel()
	sim := alpaca(&testClock{t: tuesday}, exchangesim.AlpacaConfig{})
	base := "symbols=SPY,AAPL,ZZZZ,MSFT&timeframe=1Hour&start=2026-11-09T00:00:00Z&end=2026-11-24T15:00:00Z"
	first := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?"+base+"&limit=37"))
	if len(first.Bars) != 1 || len(first.Bars["AAPL"]) != 37 || first.NextPageToken == nil {
		t.Fatalf("first page: %d symbols, %d AAPL bars, token %v; want 37 AAPL bars (the symbol first in order) and a token",
			len(first.Bars), len(first.Bars["AAPL"]), first.NextPageToken)
	}
	for _, sort := range []string{"asc", "desc"} {
		big := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?"+base+"&limit=10000&sort="+sort))
		paged, pages := allBars(t, sim, base+"&limit=37&sort="+sort)
		if diff := cmp.Diff(big.Bars, paged); diff != "" {
			t.Errorf("%s: paged bars differ from one page (-big +paged):\n%s", sort, diff)
		}
		n := len(big.Bars["AAPL"]) + len(big.Bars["MSFT"]) + len(big.Bars["SPY"])
		if _, ok := big.Bars["ZZZZ"]; ok || len(big.Bars) != 3 || pages != (n+36)/37 || big.NextPageToken != nil {
			t.Errorf("%s: %d symbols, %d bars in %d pages; want AAPL, MSFT, SPY and %d pages", sort, len(big.Bars), n, pages, (n+36)/37)
		}
		bs := big.Bars["MSFT"]
		if len(bs) < 100 || (sort == "asc") != (bs[0].T < bs[len(bs)-1].T) {
			t.Errorf("%s: MSFT %d bars from %s to %s", sort, len(bs), bs[0].T, bs[len(bs)-1].T)
		}
	}
}

// TestAlpacaBarsFollowTheClock: closed bars never change as the clock
// moves; the newest minute appears only once it has closed.
func TestAlpacaBarsFollowTheClock(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim := alpaca(clock, exchangesim.AlpacaConfig{})
	q := "/v2/stocks/bars?symbols=AAPL,SPY&timeframe=1Min&start=2026-11-24T14:00:00Z&limit=10000"
	before := decodeOK[barsPage](t, alpacaGet(sim, q))
	clock.Set(tuesday.Add(3 * time.Minute))
	after := decodeOK[barsPage](t, alpacaGet(sim, q))
	for _, s := range []string{"AAPL", "SPY"} {
		b, a := before.Bars[s], after.Bars[s]
		if last := b[len(b)-1].T; last != "2026-11-24T15:09:00Z" {
			t.Errorf("%s: newest bar %s at 15:10:30Z, want the closed 15:09 minute", s, last)
		}
		// Minutes whose late trades are all in (updatedAfter, 90 s) are final.
		stable := slices.IndexFunc(b, func(x bar) bool { return x.T >= "2026-11-24T15:08:00Z" })
		if diff := cmp.Diff(b[:stable], a[:stable]); diff != "" {
			t.Errorf("%s: closed bars changed (-before +after):\n%s", s, diff)
		}
		if a[len(a)-1].T != "2026-11-24T15:12:00Z" {
			t.Errorf("%s: newest bar %s at 15:13:30Z, want 15:12", s, a[len(a)-1].T)
		}
	}
}

// TestAlpacaBarsInSessions: SIP minute bars exist from 04:00 to 20:00
// New York (17:00 after an early close), IEX's from 08:00 to 17:00
// (14:00), never on weekends or holidays; a day bar is its regular
// minutes' bar; IEX's volume is a few percent of SIP's.
func TestAlpacaBarsInSessions(t *testing.T) {
	t.Parallel()
	ny := newYork(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sim := alpaca(&testClock{t: now}, exchangesim.AlpacaConfig{Plan: exchangesim.AlpacaPaid})
	window := map[string][2]int{"sip": {4 * 60, 20 * 60}, "iex": {8 * 60, 17 * 60}}
	early := map[string]int{"sip": 17 * 60, "iex": 14 * 60}
	var days map[string][]bar
	for _, feed := range []string{"sip", "iex"} {
		bars, _ := allBars(t, sim, "symbols=AAPL,SPY&timeframe=1Min&start=2026-11-20&end=2026-11-30&feed="+feed)
		perDay := map[string]int{}
		for _, bs := range bars {
			for _, b := range bs {
				at, _ := time.Parse(time.RFC3339, b.T)
				local := at.In(ny)
				minute := local.Hour()*60 + local.Minute()
				from, to := window[feed][0], window[feed][1]
				if local.Day() == 27 {
					to = early[feed]
				}
				if minute < from || minute >= to || local.Weekday() == time.Saturday || local.Weekday() == time.Sunday {
					t.Fatalf("%s bar at %s New York: outside the feed's session", feed, local)
				}
				if b.L > min(b.O, b.C) || b.H < max(b.O, b.C) || b.VW < b.L || b.VW > b.H || b.V < 1 || b.N < 1 {
					t.Fatalf("%s bar %+v: inconsistent", feed, b)
				}
				perDay[local.Format(time.DateOnly)]++
			}
		}
		if perDay["2026-11-26"] != 0 || perDay["2026-11-23"] < 400 {
			t.Errorf("%s bars per day %v: want none on Thanksgiving, a session's worth on Monday", feed, perDay)
		}
		daily := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?symbols=AAPL&timeframe=1Day&start=2026-11-20&end=2026-11-30&feed="+feed))
		if feed == "sip" {
			days = daily.Bars
			// The day bar is the regular session's minutes: 09:30 to 16:00 (13:00 on the 27th).
			var regular []bar
			for _, b := range bars["AAPL"] {
				at, _ := time.Parse(time.RFC3339, b.T)
				if l := at.In(ny); l.Day() == 27 && l.Hour()*60+l.Minute() >= 9*60+30 && l.Hour() < 13 {
					regular = append(regular, b)
				}
			}
			day := daily.Bars["AAPL"][slices.IndexFunc(daily.Bars["AAPL"], func(b bar) bool { return b.T == "2026-11-27T05:00:00Z" })]
			hi, lo := regular[0].H, regular[0].L
			for _, b := range regular {
				hi, lo = max(hi, b.H), min(lo, b.L)
			}
			if day.T != "2026-11-27T05:00:00Z" || day.O != regular[0].O || day.C != regular[len(regular)-1].C || day.H != hi || day.L != lo {
				t.Errorf("day bar %+v, want open %v high %v low %v close %v from its regular minutes", day, regular[0].O, hi, lo, regular[len(regular)-1].C)
			}
		} else {
			for i, b := range daily.Bars["AAPL"] {
				if share := float64(b.V) / float64(days["AAPL"][i].V); share < 0.02 || share > 0.03 {
					t.Errorf("%s: IEX volume %d is %.3f of SIP's %d, want about 0.025", b.T, b.V, share, days["AAPL"][i].V)
				}
			}
		}
	}
}

// TestAlpacaBarAlignment: day bars at New York's midnight in UTC, hour
// and 4-hour bars on New York's clock hours in summer and winter, week
// bars on Mondays, month bars on the 1st; an intraday bar cut by start
// is stamped with start.
func TestAlpacaBarAlignment(t *testing.T) {
	t.Parallel()
	ny := newYork(t)
	sim := alpaca(&testClock{t: tuesday}, exchangesim.AlpacaConfig{Plan: exchangesim.AlpacaPaid})
	stamps := func(query string) []time.Time {
		t.Helper()
		p := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?symbols=SPY&limit=10000&"+query))
		var out []time.Time
		for _, b := range p.Bars["SPY"] {
			at, err := time.Parse(time.RFC3339, b.T)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, at)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no bars", query)
		}
		return out
	}
	for _, at := range stamps("timeframe=1Day&start=2026-07-01&end=2026-07-10") {
		if at.Hour() != 4 || at.Minute() != 0 {
			t.Errorf("summer day bar at %s, want 04:00Z (New York midnight)", at)
		}
	}
	for _, at := range stamps("timeframe=1D&start=2026-11-16&end=2026-11-20") {
		if at.Hour() != 5 {
			t.Errorf("winter day bar at %s, want 05:00Z", at)
		}
	}
	if got := stamps("timeframe=1Day&start=2026-11-16T14:00:00Z&end=2026-11-20")[0]; got.Day() != 17 {
		t.Errorf("day bars from Monday 09:00 New York start at %s, want Tuesday's (a day bar is in when its stamp is)", got)
	}
	for _, day := range [][2]string{{"2026-07-07", "2026-07-08"}, {"2026-11-17", "2026-11-18"}} {
		month := day[0]
		hours := stamps("timeframe=1Hour&start=" + day[0] + "&end=" + day[1])
		fours := stamps("timeframe=4Hour&start=" + day[0] + "&end=" + day[1])
		if len(hours) != 16 {
			t.Errorf("%s: %d hour bars, want 04:00 to 19:00 New York = 16", month, len(hours))
		}
		var got []int
		for _, at := range fours {
			got = append(got, at.In(ny).Hour())
		}
		if !slices.Equal(got, []int{4, 8, 12, 16}) {
			t.Errorf("%s: 4Hour bars at New York hours %v, want 4, 8, 12, 16", month, got)
		}
	}
	cut := stamps("timeframe=1Hour&start=2026-11-17T14:30:00Z&end=2026-11-17T17:00:00Z")
	if !cut[0].Equal(time.Date(2026, 11, 17, 14, 30, 0, 0, time.UTC)) || !cut[1].Equal(time.Date(2026, 11, 17, 15, 0, 0, 0, time.UTC)) {
		t.Errorf("hour bars from 09:30 New York stamped %v, want the cut one at 14:30Z, then 15:00Z", cut[:2])
	}
	for _, at := range stamps("timeframe=1Week&start=2026-09-01&end=2026-11-24") {
		if l := at.In(ny); l.Weekday() != time.Monday || l.Hour() != 0 {
			t.Errorf("week bar at %s, want Monday 00:00 New York", l)
		}
	}
	months := stamps("timeframe=3Month&start=2026-01-01&end=2026-11-24")
	if len(months) != 4 || months[1].In(ny).Month() != time.April || months[1].In(ny).Day() != 1 {
		t.Errorf("3-month bars %v, want January, April, July, October 1st", months)
	}
}

// TestAlpacaBarsErrors: bad parameters get Alpaca's bodies; the free
// plan gets SIP only 15 minutes late.
func TestAlpacaBarsErrors(t *testing.T) {
	t.Parallel()
	sim := alpaca(&testClock{t: tuesday}, exchangesim.AlpacaConfig{})
	for query, want := range map[string]struct {
		status int
		msg    string
	}{
		"symbols=AAPL&timeframe=5Hours":               {400, "timeframe"},
		"symbols=AAPL&timeframe=60Min":                {400, "timeframe"},
		"symbols=AAPL&timeframe=5Month":               {400, "timeframe"},
		"symbols=AAPL&timeframe=1Day&limit=0":         {400, "limit"},
		"symbols=AAPL&timeframe=1Day&limit=10001":     {400, "limit"},
		"symbols=AAPL&timeframe=1Day&sort=up":         {400, "sort"},
		"symbols=AAPL&timeframe=1Day&start=yesterday": {400, "start"},
		"symbols=aapl&timeframe=1Day":                 {400, "symbol"},
		"symbols=AAPL&timeframe=1Day&page_token=x":    {400, "page_token"},
		"symbols=AAPL":   {422, "timeframe"},
		"timeframe=1Day": {422, "symbols"},
		"symbols=AAPL&timeframe=1Day&feed=sip&end=2026-11-24T15:00:00Z": {403, "recent SIP data"},
	} {
		alpacaErr(t, alpacaGet(sim, "/v2/stocks/bars?"+query), want.status, want.msg)
	}
	late := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?symbols=AAPL&timeframe=1Min&feed=sip&start=2026-11-24T14:30:00Z&limit=10000"))
	if last := late.Bars["AAPL"][len(late.Bars["AAPL"])-1].T; last != "2026-11-24T14:54:00Z" {
		t.Errorf("free SIP without end: newest bar %s at 15:10:30Z, want the last minute closed by 14:55:30, 14:54", last)
	}
	single := decodeOK[struct {
		Bars   []bar
		Symbol string
	}](t, alpacaGet(sim, "/v2/stocks/BRK.B/bars?timeframe=1Day&start=2026-11-01"))
	if single.Symbol != "BRK.B" || len(single.Bars) != 17 {
		t.Errorf("single-symbol bars: %s with %d bars, want BRK.B with 17 (November's trading days to the 24th)", single.Symbol, len(single.Bars))
	}
}

type snapshot struct {
	LatestTrade struct {
		T string
		P float64
		X string
	} `json:"latestTrade"`
	LatestQuote struct {
		BP float64 `json:"bp"`
		AP float64 `json:"ap"`
	} `json:"latestQuote"`
	MinuteBar    *bar `json:"minuteBar"`
	DailyBar     *bar `json:"dailyBar"`
	PrevDailyBar *bar `json:"prevDailyBar"`
}

// TestAlpacaSnapshots: each snapshot's latest trade, quote and minute
// bar are the newest closed minute's, its day bars today's and the
// previous trading day's, as the bars endpoint has them; unknown
// symbols are left out; the free plan gets no SIP snapshot.
func TestAlpacaSnapshots(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: time.Date(2026, 11, 27, 15, 10, 30, 0, time.UTC)} // the Friday after Thanksgiving
	sim := alpaca(clock, exchangesim.AlpacaConfig{})
	snaps := decodeOK[map[string]snapshot](t, alpacaGet(sim, "/v2/stocks/snapshots?symbols=AAPL,MSFT,ZZZZ"))
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots, want AAPL and MSFT", len(snaps))
	}
	for _, s := range []string{"AAPL", "MSFT"} {
		snap := snaps[s]
		minute := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?symbols="+s+"&timeframe=1Min&sort=desc&limit=1")).Bars[s][0]
		days := decodeOK[barsPage](t, alpacaGet(sim, "/v2/stocks/bars?symbols="+s+"&timeframe=1Day&start=2026-11-20&sort=desc&limit=2")).Bars[s]
		if diff := cmp.Diff([]bar{minute, days[0], days[1]}, []bar{*snap.MinuteBar, *snap.DailyBar, *snap.PrevDailyBar}); diff != "" {
			t.Errorf("%s snapshot bars differ from the bars endpoint's (-bars +snapshot):\n%s", s, diff)
		}
		if snap.DailyBar.T != "2026-11-27T05:00:00Z" || snap.PrevDailyBar.T != "2026-11-25T05:00:00Z" {
			t.Errorf("%s day bars %s and %s, want today's and Wednesday's (Thursday was Thanksgiving)", s, snap.DailyBar.T, snap.PrevDailyBar.T)
		}
		if snap.LatestTrade.P != minute.C || snap.LatestTrade.X != "V" || snap.LatestTrade.T < minute.T ||
			!(snap.LatestQuote.BP < snap.LatestQuote.AP) {
			t.Errorf("%s latest trade %+v and quote %+v, want the minute's close on IEX (V) and a bid under the ask", s, snap.LatestTrade, snap.LatestQuote)
		}
	}
	alpacaErr(t, alpacaGet(sim, "/v2/stocks/snapshots?symbols=AAPL&feed=sip"), 403, "recent SIP data")
}

// TestAlpacaRateLimit: every authenticated response carries the
// X-RateLimit headers; the 201st data request of a key's minute is
// refused 429 and a request after it counted as sent inside the 429's
// window; the Trading API and other keys keep their own budgets; the
// next window admits again; no key, no service.
func TestAlpacaRateLimit(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim := alpaca(clock, exchangesim.AlpacaConfig{Keys: map[string]string{"key": "secret", "other": "s2"}})
	const q = "/v2/stocks/bars/latest?symbols=AAPL"
	reset := strconv.FormatInt(tuesday.Add(time.Minute).Unix(), 10)
	for i := 1; i <= 200; i++ {
		rec := alpacaGet(sim, q)
		if rec.Code != 200 || rec.Header().Get("X-RateLimit-Limit") != "200" ||
			rec.Header().Get("X-RateLimit-Remaining") != strconv.Itoa(200-i) || rec.Header().Get("X-RateLimit-Reset") != reset {
			t.Fatalf("request %d: %d, headers %v", i, rec.Code, rec.Header())
		}
	}
	clock.Set(tuesday.Add(20 * time.Second))
	over := alpacaGet(sim, q)
	alpacaErr(t, over, 429, "rate limit")
	if over.Header().Get("X-RateLimit-Remaining") != "0" || over.Header().Get("X-RateLimit-Reset") != reset {
		t.Errorf("429 headers %v: want Remaining 0 and Reset at the window's end", over.Header())
	}
	alpacaErr(t, alpacaGet(sim, q), 429, "rate limit")
	if rec := alpacaGet(sim, "/v2/clock"); rec.Code != 200 || rec.Header().Get("X-RateLimit-Remaining") != "199" {
		t.Errorf("trading API after the data API's 429: %d, remaining %s; want its own budget", rec.Code, rec.Header().Get("X-RateLimit-Remaining"))
	}
	if rec := alpacaGetAs(sim, q, "other", "s2"); rec.Code != 200 {
		t.Errorf("another key: %d, want its own budget", rec.Code)
	}
	alpacaErr(t, alpacaGetAs(sim, q, "", ""), 401, "not authorized")
	alpacaErr(t, alpacaGetAs(sim, q, "key", "wrong"), 401, "not authorized")
	clock.Set(tuesday.Add(time.Minute))
	if rec := alpacaGet(sim, q); rec.Code != 200 || rec.Header().Get("X-RateLimit-Remaining") != "199" {
		t.Errorf("next window: %d, remaining %s; want 200, 199", rec.Code, rec.Header().Get("X-RateLimit-Remaining"))
	}
	st := sim.Stats().Alpaca
	if st.Data.Limit != 200 || st.Data.PeakRequests != 200 || st.Data.Refused429 != 2 || st.Data.SentDuring429 != 1 ||
		st.Trading.Requests != 1 || st.RESTErrors["429"] != 2 || st.RESTErrors["401"] != 2 {
		t.Errorf("stats %+v: want limit 200, peak 200, two 429s, one sent inside the 429's window, one trading request, two 401s", st)
	}
	paid := alpaca(clock, exchangesim.AlpacaConfig{Plan: exchangesim.AlpacaPaid})
	if rec := alpacaGet(paid, q); rec.Header().Get("X-RateLimit-Limit") != "10000" {
		t.Errorf("paid plan: limit %s, want 10000", rec.Header().Get("X-RateLimit-Limit"))
	}
}

// TestAlpacaURILength: a request target over 8 KiB is refused 414 by
// the front, before the key's budget; one just under is served, so a
// client sizes its symbol batches by URL length.
func TestAlpacaURILength(t *testing.T) {
	t.Parallel()
	sim := alpaca(&testClock{t: tuesday}, exchangesim.AlpacaConfig{})
	path := func(n int) string {
		syms := make([]string, n)
		for i := range syms {
			syms[i] = fmt.Sprintf("S%04d", i)
		}
		return "/v2/stocks/snapshots?symbols=" + strings.Join(syms, ",")
	}
	under, over := path(1350), path(1370) // 6 bytes a symbol: 8,128 and 8,248 bytes
	if len(under) > 8192 || len(over) <= 8192 {
		t.Fatalf("lengths %d, %d", len(under), len(over))
	}
	if rec := alpacaGet(sim, over); rec.Code != http.StatusRequestURITooLong || rec.Header().Get("X-RateLimit-Remaining") != "" {
		t.Errorf("%d-byte URI: %d, headers %v; want 414 without rate headers", len(over), rec.Code, rec.Header())
	}
	if rec := alpacaGet(sim, under); rec.Code != 200 || rec.Header().Get("X-RateLimit-Remaining") != "199" {
		t.Errorf("%d-byte URI: %d, remaining %s; want 200, the first request counted", len(under), rec.Code, rec.Header().Get("X-RateLimit-Remaining"))
	}
	if st := sim.Stats().Alpaca; st.URITooLong != 1 {
		t.Errorf("uri_too_long %d, want 1", st.URITooLong)
	}
}
