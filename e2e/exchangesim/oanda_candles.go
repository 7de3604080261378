package exchangesim

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Candlestick granularities and their alignment (developer.oanda.com/
// rest-live-v20/instrument-df/, CandlestickGranularity): S5–M1 minute
// alignment, M2–H1 hour alignment, H2–D day alignment (to dailyAlignment
// in alignmentTimezone), W aligned to weeklyAlignment, M to the first day
// of the month.
var oandaGranularities = map[string]time.Duration{
	"S5": 5 * time.Second, "S10": 10 * time.Second, "S15": 15 * time.Second, "S30": 30 * time.Second,
	"M1": time.Minute, "M2": 2 * time.Minute, "M4": 4 * time.Minute, "M5": 5 * time.Minute, "M10": 10 * time.Minute,
	"M15": 15 * time.Minute, "M30": 30 * time.Minute, "H1": time.Hour, "H2": 2 * time.Hour, "H3": 3 * time.Hour,
	"H4": 4 * time.Hour, "H6": 6 * time.Hour, "H8": 8 * time.Hour, "H12": 12 * time.Hour, "D": 24 * time.Hour,
	"W": 7 * 24 * time.Hour, "M": 0,
}

// The documented defaults and bounds of GET /v3/instruments/{instrument}/
// candles (developer.oanda.com/rest-live-v20/instrument-ep/): price M,
// granularity S5, count 500 (at most 5000), dailyAlignment 17 (0–23) in
// America/New_York, weeklyAlignment Friday, includeFirst true.
const (
	oandaDefaultCount = 500
	oandaMaxCount     = 5000
)

// oandaGrid is the candle boundaries of one request's granularity and
// alignment.
type oandaGrid struct {
	name    string
	d       time.Duration // 0 for months
	loc     *time.Location
	hour    int          // dailyAlignment
	weekday time.Weekday // weeklyAlignment
}

// floor is the open time of the candle holding t.
func (g oandaGrid) floor(t time.Time) time.Time {
	switch {
	case g.name == "M":
		lt := t.In(g.loc)
		m := time.Date(lt.Year(), lt.Month(), 1, g.hour, 0, 0, 0, g.loc)
		if m.After(t) {
			m = time.Date(lt.Year(), lt.Month()-1, 1, g.hour, 0, 0, 0, g.loc)
		}
		return m
	case g.name == "W":
		d := g.dayStart(t)
		for d.In(g.loc).Weekday() != g.weekday {
			d = g.addDays(d, -1)
		}
		return d
	case g.d > time.Hour: // day alignment: H2 … D
		d := g.dayStart(t)
		return d.Add(t.Sub(d) / g.d * g.d)
	}
	return t.Truncate(g.d) // minute and hour alignment
}

// next is the open time of the candle after the one opening at t0.
func (g oandaGrid) next(t0 time.Time) time.Time {
	switch {
	case g.name == "M":
		lt := t0.In(g.loc)
		return time.Date(lt.Year(), lt.Month()+1, 1, g.hour, 0, 0, 0, g.loc)
	case g.name == "W":
		return g.addDays(t0, 7)
	case g.d > time.Hour:
		n := t0.Add(g.d)
		if day := g.addDays(g.dayStart(t0), 1); n.After(day) {
			return day // the day's last candle is cut at the next day (a DST day has 23 or 25 hours)
		}
		return n
	}
	return t0.Add(g.d)
}

// prev is the open time of the candle before the one opening at t0.
func (g oandaGrid) prev(t0 time.Time) time.Time { return g.floor(t0.Add(-time.Nanosecond)) }

// dayStart is the latest dailyAlignment hour in the zone at or before t.
func (g oandaGrid) dayStart(t time.Time) time.Time {
	lt := t.In(g.loc)
	d := time.Date(lt.Year(), lt.Month(), lt.Day(), g.hour, 0, 0, 0, g.loc)
	if d.After(t) {
		d = time.Date(lt.Year(), lt.Month(), lt.Day()-1, g.hour, 0, 0, 0, g.loc)
	}
	return d
}

func (g oandaGrid) addDays(t time.Time, n int) time.Time {
	lt := t.In(g.loc)
	return time.Date(lt.Year(), lt.Month(), lt.Day()+n, g.hour, 0, 0, 0, g.loc)
}

// oandaCandleQuery is a parsed candles request.
type oandaCandleQuery struct {
	grid                oandaGrid
	bid, ask, mid       bool
	count               int
	from, to            time.Time
	hasCount, hasFrom   bool
	hasTo, includeFirst bool
	unixTimes           bool // Accept-Datetime-Format: UNIX
	granularity         string
}

// parseOandaCandleQuery reads the documented parameters; a refusal is the
// 400's errorMessage ("" when the query is good).
func parseOandaCandleQuery(r *http.Request) (oandaCandleQuery, string) {
	q := r.URL.Query()
	c := oandaCandleQuery{count: oandaDefaultCount, includeFirst: true, unixTimes: r.Header.Get("Accept-Datetime-Format") == "UNIX"}
	c.granularity = orDefault(q.Get("granularity"), "S5")
	d, ok := oandaGranularities[c.granularity]
	if !ok {
		return c, invalid("granularity")
	}
	price := orDefault(q.Get("price"), "M")
	if strings.Trim(price, "MBA") != "" {
		return c, invalid("price")
	}
	c.mid, c.bid, c.ask = strings.Contains(price, "M"), strings.Contains(price, "B"), strings.Contains(price, "A")
	hour, err := strconv.Atoi(orDefault(q.Get("dailyAlignment"), "17"))
	if err != nil || hour < 0 || hour > 23 {
		return c, invalid("dailyAlignment")
	}
	loc, err := time.LoadLocation(orDefault(q.Get("alignmentTimezone"), "America/New_York"))
	if err != nil {
		return c, invalid("alignmentTimezone")
	}
	wd, ok := weekdays[orDefault(q.Get("weeklyAlignment"), "Friday")]
	if !ok {
		return c, invalid("weeklyAlignment")
	}
	c.grid = oandaGrid{name: c.granularity, d: d, loc: loc, hour: hour, weekday: wd}
	if v := q.Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, invalid("count")
		}
		if n > oandaMaxCount {
			return c, "Maximum value for 'count' exceeded"
		}
		c.count, c.hasCount = n, true
	}
	if v := q.Get("from"); v != "" {
		if c.from, err = parseOandaTime(v); err != nil {
			return c, invalid("from")
		}
		c.hasFrom = true
	}
	if v := q.Get("to"); v != "" {
		if c.to, err = parseOandaTime(v); err != nil {
			return c, invalid("to")
		}
		c.hasTo = true
	}
	if v := q.Get("includeFirst"); v != "" {
		if c.includeFirst, err = strconv.ParseBool(v); err != nil {
			return c, invalid("includeFirst")
		}
	}
	switch {
	case c.hasFrom && c.hasTo && c.hasCount:
		// "Count should not be specified if both the start and end
		// parameters are provided" (instrument-ep).
		return c, "Cannot specify 'count' when both 'from' and 'to' are specified"
	case c.hasFrom && c.hasTo && c.to.Before(c.from):
		return c, invalid("to")
	}
	return c, ""
}

var weekdays = map[string]time.Weekday{"Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday, "Sunday": time.Sunday}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// invalid is v20's message for a bad parameter value.
func invalid(param string) string { return "Invalid value specified for '" + param + "'" }

// parseOandaTime reads a DateTime parameter in either documented format:
// RFC 3339, or Unix seconds with up to nine decimals.
func parseOandaTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return time.Time{}, errors.New("bad time")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
}

// fmtOandaTime writes a DateTime in the format the request asked for
// (RFC 3339 with nine decimals, as OANDA writes them, or Unix seconds).
func fmtOandaTime(t time.Time, unix bool) string {
	if unix {
		return strconv.FormatInt(t.Unix(), 10) + "." + leftPad(strconv.Itoa(t.Nanosecond()), 9)
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

func leftPad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// candles are the candles the query selects at now, oldest first: from
// `from` forward (count of them, or up to `to`), back from `to`, or the
// newest count; candles without a price (the market closed throughout)
// are skipped, as OANDA has none for the weekend.
func (m oandaMarket) candles(p *oandaPair, c oandaCandleQuery, now time.Time) []oandaBar {
	g := c.grid
	var out []oandaBar
	// maxSteps bounds the walk: a weekend is skipped in one step, so only
	// the candles themselves and a few jumps are visited.
	maxSteps := 2*oandaMaxCount + 64
	if c.hasFrom {
		t0 := g.floor(c.from)
		if !c.includeFirst {
			t0 = g.next(t0) // the candle covered by from is left out
		}
		for steps := 0; steps < maxSteps && t0.Before(now); steps++ {
			if c.hasTo && !t0.Before(c.to) || !c.hasTo && len(out) == c.count {
				break
			}
			t1 := g.next(t0)
			if b := m.bar(p, t0, t1, now); b.hasPrices {
				out = append(out, b)
			} else if m.closed(t0) {
				t1 = g.floor(m.nextOpen(t0))
				if !t1.After(t0) {
					t1 = g.next(t0)
				}
			}
			t0 = t1
		}
		if c.hasTo && len(out) > oandaMaxCount {
			out = out[:oandaMaxCount]
		}
		return out
	}
	end := now
	if c.hasTo && c.to.Before(end) {
		end = c.to
	}
	t0 := g.floor(end)
	if c.hasTo && t0.Equal(end) {
		t0 = g.prev(t0) // to is exclusive
	}
	for steps := 0; steps < maxSteps && len(out) < c.count; steps++ {
		if b := m.bar(p, t0, g.next(t0), now); b.hasPrices {
			out = append(out, b)
		} else if m.closed(t0) {
			if back := g.floor(m.lastClose(t0).Add(-time.Nanosecond)); back.Before(t0) {
				t0 = back
				continue
			}
		}
		t0 = g.prev(t0)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
