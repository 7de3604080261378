package exchangesim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // America/New_York and the alignment time zones, whatever the host has
)

// oandaPairNames are the CURRENCY instruments of the simulated account: the
// 68 pairs of an fxTrade account, the seven USD majors first so that a
// smaller account (OandaConfig.Pairs) keeps them.
var oandaPairNames = strings.Fields(`EUR_USD GBP_USD USD_JPY USD_CHF AUD_USD USD_CAD NZD_USD
	AUD_CAD AUD_CHF AUD_HKD AUD_JPY AUD_NZD AUD_SGD CAD_CHF CAD_HKD CAD_JPY CAD_SGD CHF_HKD CHF_JPY CHF_ZAR
	EUR_AUD EUR_CAD EUR_CHF EUR_CZK EUR_DKK EUR_GBP EUR_HKD EUR_HUF EUR_JPY EUR_NOK EUR_NZD EUR_PLN EUR_SEK EUR_SGD
	EUR_TRY EUR_ZAR GBP_AUD GBP_CAD GBP_CHF GBP_HKD GBP_JPY GBP_NZD GBP_PLN GBP_SGD GBP_ZAR HKD_JPY NZD_CAD NZD_CHF
	NZD_HKD NZD_JPY NZD_SGD SGD_CHF SGD_JPY TRY_JPY USD_CNH USD_CZK USD_DKK USD_HKD USD_HUF USD_MXN USD_NOK USD_PLN
	USD_SEK USD_SGD USD_THB USD_TRY USD_ZAR ZAR_JPY`)

// oandaOthers are instruments of other types the account lists too (a
// feed must leave them out), with their prices in USD or EUR.
var oandaOthers = []struct {
	name, kind, display string
	price               float64
}{
	{"XAU_USD", "METAL", "Gold", 2650}, {"XAG_USD", "METAL", "Silver", 31}, {"XPT_USD", "METAL", "Platinum", 960},
	{"EU50_EUR", "CFD", "Europe 50", 4900}, {"US30_USD", "CFD", "US Wall St 30", 44000},
	{"DE30_EUR", "CFD", "Germany 30", 19500}, {"SPX500_USD", "CFD", "US SPX 500", 5900}, {"BCO_USD", "CFD", "Brent Crude Oil", 73},
}

// oandaUSD is the simulated value of one unit of each currency in US
// dollars, whence every pair's starting price.
var oandaUSD = map[string]float64{"USD": 1, "EUR": 1.08, "GBP": 1.27, "JPY": 1.0 / 150, "CHF": 1.13, "AUD": 0.66, "CAD": 0.73,
	"NZD": 0.6, "HKD": 0.128, "SGD": 0.74, "ZAR": 0.054, "CZK": 0.043, "DKK": 0.145, "HUF": 0.0027, "NOK": 0.094,
	"PLN": 0.25, "SEK": 0.095, "TRY": 0.03, "CNH": 0.138, "MXN": 0.058, "THB": 0.028}

// oandaPair is one instrument of the simulated account.
type oandaPair struct {
	name, kind, display string
	price0              float64
	precision           int // displayPrecision: decimals of bids and asks
	pipLocation         int
	seed                uint64
	every               time.Duration // how often its quote changes
}

func newOandaPairs(seed int64, n int) []*oandaPair {
	var out []*oandaPair
	for _, name := range oandaPairNames[:n] {
		base, quote, _ := strings.Cut(name, "_")
		out = append(out, newOandaPair(seed, name, "CURRENCY", strings.Replace(name, "_", "/", 1), oandaUSD[base]/oandaUSD[quote]))
	}
	for _, o := range oandaOthers {
		out = append(out, newOandaPair(seed, o.name, o.kind, o.display, o.price))
	}
	return out
}

func newOandaPair(seed int64, name, kind, display string, price float64) *oandaPair {
	p := &oandaPair{name: name, kind: kind, display: display, price0: price, precision: 5, pipLocation: -4,
		seed: mix(uint64(seed), hashString("oanda:"+name))}
	if price >= 10 {
		p.precision, p.pipLocation = 3, -2
	}
	p.every = time.Second * time.Duration(1+mix(p.seed, 7)%4) // 1–4 s
	return p
}

// mid is the pair's midpoint at t: a deterministic function of the seed
// and the time (weekly, daily and 3-hour waves and per-minute noise
// interpolated linearly), smaller moves than the crypto universe's.
func (p *oandaPair) mid(t time.Time) float64 {
	x := float64(t.UnixMilli()) / 60000
	ph := func(k uint64) float64 { return 2 * math.Pi * unit(mix(p.seed, k)) }
	lp := 0.01*math.Sin(2*math.Pi*x/10080+ph(1)) + 0.004*math.Sin(2*math.Pi*x/1440+ph(2)) +
		0.0015*math.Sin(2*math.Pi*x/180+ph(3))
	i := math.Floor(x)
	a, b := 2*unit(mix(p.seed, uint64(int64(i))))-1, 2*unit(mix(p.seed, uint64(int64(i)+1)))-1
	lp += 0.0003 * (a + (b-a)*(x-i))
	return p.price0 * math.Exp(lp)
}

// halfSpread is half the bid-ask spread: about a pip.
func (p *oandaPair) halfSpread() float64 {
	return math.Pow(10, float64(p.pipLocation)) * (0.6 + 0.6*unit(mix(p.seed, 11)))
}

// fmtPrice writes a price with digits decimals, as OANDA's decimal strings.
func fmtPrice(v float64, digits int) string { return strconv.FormatFloat(v, 'f', digits, 64) }

// oandaMarket is the simulated market's calendar: forex trades from
// Sunday 17:00 to Friday 17:00 New York time ("Trading is available from
// approximately 5p.m. Sunday to 5p.m. Friday (New York time)", OANDA's
// hours of operation; oanda.com/us-en/trading/hours-of-operation/). The
// daily five-minute break at 17:00 is not simulated.
type oandaMarket struct{ ny *time.Location }

func newOandaMarket() oandaMarket {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(fmt.Sprintf("exchangesim: the embedded time zone database has no America/New_York: %v", err)) // time/tzdata is imported
	}
	return oandaMarket{ny: ny}
}

// closed reports whether the market is closed at t.
func (m oandaMarket) closed(t time.Time) bool {
	lt := t.In(m.ny)
	switch lt.Weekday() {
	case time.Saturday:
		return true
	case time.Friday:
		return lt.Hour() >= 17
	case time.Sunday:
		return lt.Hour() < 17
	}
	return false
}

// at17 is 17:00 New York of the day of t moved by days.
func (m oandaMarket) at17(t time.Time, days int) time.Time {
	lt := t.In(m.ny)
	return time.Date(lt.Year(), lt.Month(), lt.Day()+days, 17, 0, 0, 0, m.ny)
}

// lastClose is the weekly close at or before t (t in a closed period).
func (m oandaMarket) lastClose(t time.Time) time.Time {
	back := map[time.Weekday]int{time.Friday: 0, time.Saturday: -1, time.Sunday: -2}[t.In(m.ny).Weekday()]
	return m.at17(t, back)
}

// nextOpen is the weekly open after t (t in a closed period).
func (m oandaMarket) nextOpen(t time.Time) time.Time {
	ahead := map[time.Weekday]int{time.Friday: 2, time.Saturday: 1, time.Sunday: 0}[t.In(m.ny).Weekday()]
	return m.at17(t, ahead)
}

// nextClose is the weekly close after t (t in an open period).
func (m oandaMarket) nextClose(t time.Time) time.Time {
	wd := t.In(m.ny).Weekday()
	return m.at17(t, (int(time.Friday)-int(wd)+7)%7)
}

// openSpans are the parts of [a, b) when the market is open.
func (m oandaMarket) openSpans(a, b time.Time) [][2]time.Time {
	var out [][2]time.Time
	for cur := a; cur.Before(b); {
		if m.closed(cur) {
			cur = m.nextOpen(cur)
			continue
		}
		end := m.nextClose(cur)
		if end.After(b) {
			end = b
		}
		out = append(out, [2]time.Time{cur, end})
		cur = end
	}
	return out
}

// quoteTime is when the pair's quote in force at t was made: its last
// change (every p.every) before t, or before the close while the market
// is closed.
func (m oandaMarket) quoteTime(p *oandaPair, t time.Time) time.Time {
	if m.closed(t) {
		t = m.lastClose(t).Add(-time.Nanosecond)
	}
	return t.Truncate(p.every)
}

// ticksPerMinute is the pair's tick volume of minute i (Unix minutes) of
// an open market: busier in the London and New York hours.
func ticksPerMinute(p *oandaPair, i int64) float64 {
	hour := (i / 60) % 24
	activity := 0.3
	if hour >= 7 && hour < 21 {
		activity = 1
	}
	return math.Floor(activity * (20 + 80*unit(mix(p.seed, uint64(i)^0x5eed))))
}

// oandaBar is one candle of the pair.
type oandaBar struct {
	open                       time.Time
	o, h, l, c, volume         float64
	spread                     float64
	complete                   bool
	hasPrices                  bool
	firstPrice, lastPriceAtEnd time.Time
}

// bar computes the candle [t0, t1) as it stands at now: over the times the
// market was open (a candle with none has no prices and is not served),
// its mid open, high, low and close, and its tick volume.
func (m oandaMarket) bar(p *oandaPair, t0, t1, now time.Time) oandaBar {
	end := t1
	if now.Before(end) {
		end = now
	}
	b := oandaBar{open: t0, complete: !t1.After(now), spread: 2 * p.halfSpread()}
	spans := m.openSpans(t0, end)
	if len(spans) == 0 {
		return b
	}
	b.hasPrices = true
	first, last := spans[0][0], spans[len(spans)-1][1].Add(-time.Nanosecond)
	b.o, b.c = p.mid(m.quoteTime(p, first)), p.mid(m.quoteTime(p, last))
	b.h, b.l = max(b.o, b.c), min(b.o, b.c)
	for _, s := range spans {
		step := max(s[1].Sub(s[0])/60, p.every)
		for ts := s[0]; ts.Before(s[1]); ts = ts.Add(step) {
			v := p.mid(m.quoteTime(p, ts))
			b.h, b.l = max(b.h, v), min(b.l, v)
		}
		b.volume += tickVolume(p, s[0], s[1])
	}
	b.volume = max(1, math.Round(b.volume))
	return b
}

// tickVolume is the pair's tick count over [a, b), partial minutes pro rata.
func tickVolume(p *oandaPair, a, b time.Time) float64 {
	var v float64
	for i := a.Unix() / 60; i*60 < b.Unix()+1; i++ {
		lo, hi := time.Unix(i*60, 0), time.Unix((i+1)*60, 0)
		if lo.Before(a) {
			lo = a
		}
		if hi.After(b) {
			hi = b
		}
		if hi.After(lo) {
			v += ticksPerMinute(p, i) * hi.Sub(lo).Minutes()
		}
	}
	return v
}
