package exchangesim

import (
	"math"
	"time"
)

// The stock market model. Every bar is computed on demand from the seed,
// the calendar and the clock; nothing is stored, so 11,500 symbols cost
// no memory and a closed bar never changes.
//
// A trading day is laid out in minutes of the SIP window: minute 0 starts
// at 04:00 New York and the window ends four hours after the close (20:00,
// or 17:00 after a 13:00 early close). SIP bars include the extended hours:
// Alpaca's SIP hour bars run from 04:00 to 19:00 New York ([forum] 11966).
// IEX trades 08:00 to 17:00, its pre- and post-market sessions around the
// regular one ([iex]); after an early close the simulator ends IEX's
// post-market an hour after it, at 14:00 (chosen). Bars exist only for
// minutes with a trade ("bars are only generated when there are 'valid'
// trades", [forum] 8947): liquid symbols trade every regular minute,
// thin ones leave gaps, extended hours are sparser, and IEX, a few
// percent of the volume, sparser still.
//
// Each day has an open, high, low and close (a smooth wave plus daily
// noise, gapping from the previous close); the regular session's path
// runs through them, reaching the high and the low at two of its minutes,
// and the minute bars are read off that path, so the day's bar and its
// minutes agree. The day's volume is spread over the window by a U-shaped
// weight (heavier at the open and close); a minute without a trade passes
// its share to the next trade.

const (
	iexFirstMinute = 4 * 60           // IEX opens at 08:00: minute 240 of the SIP window
	lateTradeShare = 0.02             // the minutes whose bar a late trade corrects
	updatedAfter   = 90 * time.Second // when the corrected bar is out: 30 s after the bar ([forum] 8947)
)

// feedKind is a market-data feed.
type feedKind uint8

const (
	feedSIP feedKind = iota
	feedIEX
)

// dayShape is a day's minute layout: the SIP window's length, the regular
// session's minutes [r0, r1), and cumulative volume weights.
type dayShape struct {
	minutes, r0, r1 int
	cum             []float64 // cum[k]: the weight of minutes [0, k)
}

// newDayShape lays out a day closing at closeMinute (minutes after
// midnight: 960 for 16:00, 780 for 13:00).
func newDayShape(closeMinute int) *dayShape {
	// The window runs from 04:00 to four hours after the close.
	s := &dayShape{minutes: closeMinute + 4*60 - 4*60, r0: 9*60 + 30 - 4*60, r1: closeMinute - 4*60}
	s.cum = make([]float64, s.minutes+1)
	for k := 0; k < s.minutes; k++ {
		w := 0.04 // extended hours
		if k >= s.r0 && k < s.r1 {
			x := (float64(k-s.r0) + 0.5) / float64(s.r1-s.r0)
			w = 0.5 + 2*(2*x-1)*(2*x-1)
		}
		s.cum[k+1] = s.cum[k] + w
	}
	return s
}

// window is the feed's minutes [lo, hi).
func (s *dayShape) window(f feedKind) (lo, hi int) {
	if f == feedIEX {
		return iexFirstMinute, s.r1 + 60
	}
	return 0, s.minutes
}

// stockMarket computes bars.
type stockMarket struct {
	cal           *marketCalendar
	iexShare      float64
	normal, early *dayShape
}

func newStockMarket(cal *marketCalendar, iexShare float64) *stockMarket {
	return &stockMarket{cal: cal, iexShare: iexShare, normal: newDayShape(16 * 60), early: newDayShape(13 * 60)}
}

// stockBar is one bar; t is its documented timestamp, the bucket's start.
type stockBar struct {
	t          time.Time
	o, h, l, c float64
	v, n       int64
	vw         float64
}

// dayModel is one symbol's trading day.
type dayModel struct {
	e     *equity
	d     day
	shape *dayShape
	start time.Time // minute 0: 04:00 New York
	h     uint64    // the day's hash

	prevClose, open, high, low, close, post float64
	rng                                     float64 // the day's relative range
	mh, ml                                  int     // regular minutes (from the open) where the path is at the high and the low
	volume                                  float64 // SIP shares
	iexShare                                float64

	anchors, logs [6]float64 // prevClose, open, high, low, close, post and their logs
	memo          [2]struct {
		k int
		p float64
	} // the last two boundaries: a scan asks for each one twice
}

// The indexes of dayModel.anchors and logs.
const (
	logPrev = iota
	logOpen
	logHigh
	logLow
	logClose
	logPost
)

// model is e's day d, or false when e has no data that day.
func (mk *stockMarket) model(e *equity, d day) (*dayModel, bool) {
	if d < dataStart || d < e.listed || e.delisted != 0 && d > e.delisted || !mk.cal.isTradingDay(d) {
		return nil, false
	}
	shape := mk.normal
	if mk.cal.isEarlyClose(d) {
		shape = mk.early
	}
	m := &dayModel{e: e, d: d, shape: shape, start: d.at(4, 0), h: mix(e.seed, uint64(d)), iexShare: mk.iexShare}
	m.prevClose = math.Exp(e.logClose(mk.cal.prev(d)))
	m.close = math.Exp(e.logClose(d))
	m.open = m.prevClose * math.Exp(0.004*gauss(mix(m.h, 1)))
	m.rng = 0.005 + 0.015*unit(mix(m.h, 2))
	m.high = max(m.open, m.close) * math.Exp(m.rng*unit(mix(m.h, 3)))
	m.low = min(m.open, m.close) * math.Exp(-m.rng*unit(mix(m.h, 4)))
	regular := shape.r1 - shape.r0
	m.mh = 1 + int(mix(m.h, 5)%uint64(regular-1))
	m.ml = 1 + int(mix(m.h, 6)%uint64(regular-1))
	if m.ml == m.mh {
		m.ml = m.ml%(regular-1) + 1
	}
	m.post = m.close * math.Exp(0.003*gauss(mix(m.h, 7)))
	m.volume = e.volume0 * math.Exp(0.35*gauss(mix(m.h, 8)))
	m.anchors = [6]float64{m.prevClose, m.open, m.high, m.low, m.close, m.post}
	for i, p := range m.anchors {
		m.logs[i] = math.Log(p)
	}
	m.memo[0].k, m.memo[1].k = -1, -1
	return m, true
}

// logClose is the log of e's close on day d: yearly, seasonal and weekly
// waves plus a daily noise of 0.8 % (a day's move is about 1.2 %).
func (e *equity) logClose(d day) float64 {
	x := float64(d)
	ph := func(k uint64) float64 { return 2 * math.Pi * unit(mix(e.seed, k)) }
	return math.Log(e.price0) + 0.22*math.Sin(2*math.Pi*x/365.25+ph(1)) + 0.07*math.Sin(2*math.Pi*x/52+ph(2)) +
		0.012*math.Sin(2*math.Pi*x/9+ph(3)) + 0.008*gauss(mix(e.seed, uint64(d)*16+4))
}

// gauss maps a hash to a roughly normal number (mean 0, deviation 1)
// from three uniforms.
func gauss(h uint64) float64 {
	const m = 1 << 21
	s := float64(h&(m-1))/m + float64((h>>21)&(m-1))/m + float64((h>>42)&(m-1))/m
	return (s - 1.5) * 2
}

// boundary is the price at the start of minute k (k = the window's length
// for its end): a bridge from the previous close to the open over the
// pre-market, through the open, the high, the low and the close over the
// regular session (held inside the day's range), and from the close to
// a post-market level after it.
func (m *dayModel) boundary(k int) float64 {
	slot := &m.memo[k&1]
	if slot.k != k {
		slot.k, slot.p = k, m.path(k)
	}
	return slot.p
}

func (m *dayModel) path(k int) float64 {
	s := m.shape
	const extSigma = 0.0004
	switch {
	case k <= s.r0:
		return m.bridge(k, 0, logPrev, s.r0, logOpen, extSigma)
	case k >= s.r1:
		return m.bridge(k, s.r1, logClose, s.minutes, logPost, extSigma)
	}
	j, n := k-s.r0, s.r1-s.r0
	type anchor struct{ at, price int }
	first, second := anchor{m.mh, logHigh}, anchor{m.ml, logLow}
	if second.at < first.at {
		first, second = second, first
	}
	a, b := anchor{0, logOpen}, first
	switch {
	case j >= second.at:
		a, b = second, anchor{n, logClose}
	case j >= first.at:
		a, b = first, second
	}
	sigma := m.rng * 0.6 / math.Sqrt(float64(n))
	return min(max(m.bridge(k, a.at+s.r0, a.price, b.at+s.r0, b.price, sigma), m.low), m.high)
}

// bridge interpolates the log price from anchor price pa at minute ka to
// pb at kb (indexes of logs) with noise that vanishes at both ends; at
// the anchors it is their prices exactly.
func (m *dayModel) bridge(k, ka, pa, kb, pb int, sigma float64) float64 {
	if k <= ka {
		return m.anchors[pa]
	}
	if k >= kb {
		return m.anchors[pb]
	}
	x := float64(k-ka) / float64(kb-ka)
	lp := m.logs[pa]*(1-x) + m.logs[pb]*x + sigma*math.Sqrt(float64((k-ka)*(kb-k))/float64(kb-ka))*gauss(mix(m.h, uint64(k)*8+2))
	return math.Exp(lp)
}

// prices are minute k's open, high, low and close, unrounded.
func (m *dayModel) prices(k int) (o, h, l, c float64) {
	o, c = m.boundary(k), m.boundary(k+1)
	w := m.rng * 0.12 * unit(mix(m.h, uint64(k)*8+3))
	h, l = max(o, c)*(1+w), min(o, c)*(1-w)
	if k >= m.shape.r0 && k < m.shape.r1 {
		h, l = min(h, m.high), max(l, m.low)
	}
	return o, h, l, c
}

// active is whether minute k has a trade on the feed. The regular
// session's first and last minutes and the minutes at the high and the
// low always do, on both feeds, so the day's bar is its minutes' bar.
func (m *dayModel) active(k int, f feedKind) bool {
	s := m.shape
	lo, hi := s.window(f)
	if k < lo || k >= hi {
		return false
	}
	if k == s.r0 || k == s.r1-1 || k == s.r0+m.mh || k == s.r0+m.ml {
		return true
	}
	regular := k >= s.r0 && k < s.r1
	q := m.e.liquidity
	if !regular {
		q *= 0.2
	}
	if unit(mix(m.h, uint64(k)*8+4)) >= q {
		return false
	}
	if f == feedSIP {
		return true
	}
	qi := 0.3
	if regular {
		qi += 0.7 * m.e.liquidity
	}
	return unit(mix(m.h, uint64(k)*8+5)) < qi
}

// late is whether a trade of minute k is reported after its bar went out.
func (m *dayModel) late(k int) bool { return unit(mix(m.h, uint64(k)*8+6)) < lateTradeShare }

// lastActiveBefore is the feed's last minute with a trade before k, or
// the window's start minus one.
func (m *dayModel) lastActiveBefore(k int, f feedKind) int {
	lo, _ := m.shape.window(f)
	for j := k - 1; j >= lo; j-- {
		if m.active(j, f) {
			return j
		}
	}
	return lo - 1
}

// cumVolume is the feed's volume of minutes [lo, x): the day's volume
// (IEX's a fixed share of SIP's) times the minutes' weight.
func (m *dayModel) cumVolume(f feedKind, x int) int64 {
	s := m.shape
	lo, hi := s.window(f)
	v := m.volume
	if f == feedIEX {
		v *= m.iexShare
	}
	return int64(v * (s.cum[x] - s.cum[lo]) / (s.cum[hi] - s.cum[lo]))
}

// closed is how many of the window's minutes have closed at now.
func (m *dayModel) closed(now time.Time) int {
	if now.Before(m.start) {
		return 0
	}
	return int(now.Sub(m.start) / time.Minute)
}

func (m *dayModel) minuteTime(k int) time.Time { return m.start.Add(time.Duration(k) * time.Minute) }

// minuteBar is active minute k's bar as it stands at now; prev is the
// feed's previous active minute, whose trade took the volume before k.
// A minute with a late trade is published without it and corrected
// updatedAfter its start.
func (m *dayModel) minuteBar(k, prev int, f feedKind, now time.Time) stockBar {
	o, h, l, c := m.prices(k)
	v := max(1, m.cumVolume(f, k+1)-m.cumVolume(f, prev+1))
	b := stockBar{t: m.minuteTime(k), o: o, h: h, l: l, c: c, v: v, n: m.trades(v), vw: (o + h + l + c) / 4}
	if m.late(k) && v >= 2 {
		dv := max(1, v/10)
		if now.Before(b.t.Add(updatedAfter)) {
			b.v, b.n = v-dv, max(1, b.n-1)
		} else {
			b.vw = (b.vw*float64(v-dv) + c*float64(dv)) / float64(v)
		}
	}
	return b.rounded()
}

func (m *dayModel) trades(v int64) int64 {
	return max(1, int64(math.Round(float64(v)/m.e.tradeSize)))
}

// aggregate is the feed's bar of minutes [k0, k1) closed at now, or false
// when none of them traded.
func (m *dayModel) aggregate(k0, k1 int, f feedKind, now time.Time) (stockBar, bool) {
	lo, hi := m.shape.window(f)
	k0, k1 = max(k0, lo), min(k1, hi, m.closed(now))
	var agg barAgg
	if k0 >= k1 {
		return stockBar{}, false
	}
	prev := m.lastActiveBefore(k0, f)
	for k := k0; k < k1; k++ {
		if m.active(k, f) {
			agg.add(m.minuteBar(k, prev, f, now))
			prev = k
		}
	}
	return agg.bar()
}

// daily is the feed's day bar as it stands at now, stamped at New York's
// midnight ("2022-04-11T04:00:00Z", [docs-md] historical.md). Its open,
// high, low and close are the regular session's and its volume the
// whole window's (Alpaca's AAPL day bar of 2023-03-06 has the session's
// low while its 08:00 hour bar went lower, [forum] 11966). It exists
// once the session's first minute has closed; VWAP is the typical price
// (high + low + close) / 3 (chosen, to keep a day's bar one computation).
func (m *dayModel) daily(f feedKind, now time.Time) (stockBar, bool) {
	s := m.shape
	lo, hi := s.window(f)
	closed := min(m.closed(now), hi)
	if closed <= s.r0 {
		return stockBar{}, false
	}
	b := stockBar{t: m.d.midnight(), o: m.open, h: m.high, l: m.low, c: m.close}
	if closed < s.r1 {
		b.h, b.l = m.open, m.open
		for k := s.r0; k < closed; k++ {
			if m.active(k, f) {
				_, h, l, c := m.prices(k)
				b.h, b.l, b.c = max(b.h, h), min(b.l, l), c
			}
		}
	}
	b.v = max(0, m.cumVolume(f, max(lo, m.lastActiveBefore(closed, f)+1)))
	b.n = m.trades(b.v)
	b.vw = (b.h + b.l + b.c) / 3
	return b.rounded(), true
}

// latestMinute is the feed's last closed minute bar at now within the
// day, or false.
func (m *dayModel) latestMinute(f feedKind, now time.Time) (stockBar, bool) {
	_, hi := m.shape.window(f)
	k := m.lastActiveBefore(min(m.closed(now), hi), f)
	lo, _ := m.shape.window(f)
	if k < lo {
		return stockBar{}, false
	}
	return m.minuteBar(k, m.lastActiveBefore(k, f), f, now), true
}

// roundPrice rounds to the cent, or to 1/100 of a cent under a dollar
// (the tick sizes of SEC Rule 612).
func roundPrice(p float64) float64 {
	if p >= 1 {
		return math.Round(p*100) / 100
	}
	return math.Round(p*10000) / 10000
}

// rounded rounds the prices (monotone, so high and low still bound the
// open and close) and the VWAP to six places inside the bar.
func (b stockBar) rounded() stockBar {
	b.o, b.h, b.l, b.c = roundPrice(b.o), roundPrice(b.h), roundPrice(b.l), roundPrice(b.c)
	b.vw = min(max(math.Round(b.vw*1e6)/1e6, b.l), b.h)
	return b
}

// barAgg merges consecutive bars into one.
type barAgg struct {
	b  stockBar
	pv float64 // Σ volume × VWAP
	ok bool
}

func (a *barAgg) add(x stockBar) {
	a.pv += x.vw * float64(x.v)
	if !a.ok {
		a.b, a.ok = x, true
		return
	}
	a.b.h, a.b.l, a.b.c = max(a.b.h, x.h), min(a.b.l, x.l), x.c
	a.b.v += x.v
	a.b.n += x.n
}

func (a *barAgg) bar() (stockBar, bool) {
	if !a.ok {
		return stockBar{}, false
	}
	b := a.b
	if b.v > 0 {
		b.vw = min(max(math.Round(a.pv/float64(b.v)*1e6)/1e6, b.l), b.h)
	}
	return b, true
}
