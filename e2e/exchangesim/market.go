package exchangesim

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// symbol is one instrument of the universe.
type symbol struct {
	name, base, quote string
	pair, contract    string // futures: the pair and PERPETUAL or CURRENT_QUARTER
	price0            float64
	seed              uint64
}

// universe is the simulated exchange's instruments, derived from the seed.
type universe struct {
	spot, futures []*symbol
	spotBy        map[string]*symbol
	futuresBy     map[string]*symbol // perpetuals and quarterlies by symbol
	pairBy        map[string]*symbol // quarterlies by pair (continuous klines)
}

// knownBases open the universe so tests and operators see familiar names;
// the rest are SIM0001, SIM0002, ... Perpetuals of the low-priced ones are
// quoted per 1,000 units as Binance does (1000PEPEUSDT, base 1000PEPE).
var knownBases = []string{"BTC", "ETH", "BNB", "SOL", "XRP", "DOGE", "ADA", "TRX", "AVAX", "LINK", "DOT", "TON",
	"SHIB", "LTC", "BCH", "NEAR", "UNI", "APT", "ICP", "ETC", "PEPE", "FIL", "ARB", "OP", "ATOM", "BONK", "FLOKI"}

var perThousand = map[string]bool{"SHIB": true, "PEPE": true, "BONK": true, "FLOKI": true}

// knownPrices keep the familiar names near their usual magnitudes (USDT).
var knownPrices = map[string]float64{"BTC": 90000, "ETH": 3000, "BNB": 600, "SOL": 150, "XRP": 2, "DOGE": 0.2,
	"ADA": 0.6, "TRX": 0.25, "AVAX": 25, "LINK": 15, "DOT": 5, "TON": 3, "SHIB": 0.00001, "LTC": 90, "BCH": 400,
	"NEAR": 3, "UNI": 8, "APT": 6, "ICP": 6, "ETC": 20, "PEPE": 0.00001, "FIL": 3, "ARB": 0.4, "OP": 0.8,
	"ATOM": 4, "BONK": 0.00002, "FLOKI": 0.0001}

func newUniverse(cfg Config) *universe {
	u := &universe{spotBy: map[string]*symbol{}, futuresBy: map[string]*symbol{}, pairBy: map[string]*symbol{}}
	nBases := max(cfg.Perpetual, (cfg.Spot*2+2)/3)
	bases := make([]string, 0, nBases)
	bases = append(bases, knownBases[:min(len(knownBases), nBases)]...)
	for i := 1; len(bases) < nBases; i++ {
		bases = append(bases, fmt.Sprintf("SIM%04d", i))
	}
	prices := map[string]float64{}
	for i, b := range bases {
		h := mix(uint64(cfg.Seed), uint64(i)+1)
		prices[b] = math.Pow(10, -4+6*unit(h))
		if p, ok := knownPrices[b]; ok {
			prices[b] = p
		}
	}
	for _, q := range []string{"USDT", "FDUSD", "USDC", "BTC", "ETH"} {
		for _, b := range bases {
			if len(u.spot) == cfg.Spot {
				break
			}
			p := prices[b]
			if prices[q] > 0 {
				p /= prices[q]
			}
			if b == q || p < 1e-6 { // too small for 8 decimals: not listed
				continue
			}
			s := &symbol{name: b + q, base: b, quote: q, price0: p, seed: mix(uint64(cfg.Seed), hashString(b+q))}
			u.spot = append(u.spot, s)
			u.spotBy[s.name] = s
		}
	}
	for _, b := range bases[:cfg.Perpetual] {
		base, p := b, prices[b]
		if perThousand[b] {
			base, p = "1000"+b, p*1000
		}
		s := &symbol{name: base + "USDT", base: base, quote: "USDT", pair: base + "USDT", contract: "PERPETUAL",
			price0: p * 1.0003, seed: mix(uint64(cfg.Seed), hashString("perp:"+base))}
		u.futures = append(u.futures, s)
		u.futuresBy[s.name] = s
	}
	for _, b := range bases[:min(2, len(bases))] {
		s := &symbol{name: b + "USDT_" + quarterCode(cfg.Now()), base: b, quote: "USDT", pair: b + "USDT", contract: "CURRENT_QUARTER",
			price0: prices[b] * 1.01, seed: mix(uint64(cfg.Seed), hashString("quarter:"+b))}
		u.futures = append(u.futures, s)
		u.futuresBy[s.name] = s
		u.pairBy[s.pair] = s
	}
	return u
}

// quarterCode is the YYMMDD of the current quarter's last Friday, as in
// BTCUSDT_261225.
func quarterCode(now time.Time) string {
	now = now.UTC()
	end := time.Date(now.Year(), time.Month((int(now.Month())-1)/3*3+4), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
	for end.Weekday() != time.Friday {
		end = end.AddDate(0, 0, -1)
	}
	return end.Format("060102")
}

// price is the symbol's price at t: a deterministic function of the seed
// and the time alone (weekly, daily and 3-hour waves plus per-minute noise
// interpolated linearly), so any candle can be computed without history
// and a closed one never changes.
func (s *symbol) price(t time.Time) float64 {
	x := float64(t.UnixMilli()) / 60000 // minutes
	ph := func(k uint64) float64 { return 2 * math.Pi * unit(mix(s.seed, k)) }
	lp := 0.10*math.Sin(2*math.Pi*x/10080+ph(1)) + 0.03*math.Sin(2*math.Pi*x/1440+ph(2)) +
		0.01*math.Sin(2*math.Pi*x/180+ph(3))
	i := math.Floor(x)
	a, b := 2*unit(mix(s.seed, uint64(int64(i))))-1, 2*unit(mix(s.seed, uint64(int64(i)+1)))-1
	lp += 0.004 * (a + (b-a)*(x-i))
	return s.price0 * math.Exp(lp)
}

// candle is one kline of the symbol.
type candle struct {
	open, close                time.Time // open time; close time (open + interval − 1 ms)
	o, h, l, c, volume, quoteV float64
	trades                     int64
}

// candleAt computes the candle opening at t0 as it stands at now: a
// closed one from its whole interval, the current one up to now (its
// close, high, low and volume move; its open does not).
func (s *symbol) candleAt(t0 time.Time, iv interval, now time.Time) candle {
	t1 := iv.next(t0)
	end := t1
	if now.Before(end) {
		end = now
	}
	k := candle{open: t0, close: t1.Add(-time.Millisecond), o: s.price(t0)}
	k.h, k.l = k.o, k.o
	step := t1.Sub(t0) / 60
	for ts := t0.Add(step); ts.Before(end); ts = ts.Add(step) {
		p := s.price(ts)
		k.h, k.l = max(k.h, p), min(k.l, p)
	}
	k.c = s.price(end)
	k.h, k.l = max(k.h, k.c), min(k.l, k.c)
	quote := (1e3 + 1e5*unit(mix(s.seed, uint64(t0.UnixMilli())))) * t1.Sub(t0).Minutes() // traded value in the quote asset
	k.quoteV = quote * float64(end.Sub(t0)) / float64(t1.Sub(t0))
	k.volume = k.quoteV / ((k.o + k.c) / 2)
	k.trades = int64(k.volume/3) + 1
	return k
}

// row is the kline's documented array: open time, "open", "high", "low",
// "close", "volume", close time, "quote volume", trades, "taker buy base",
// "taker buy quote", "0".
func (k candle) row() []any {
	return []any{k.open.UnixMilli(), num(k.o), num(k.h), num(k.l), num(k.c), num(k.volume), k.close.UnixMilli(),
		num(k.quoteV), k.trades, num(k.volume / 2), num(k.quoteV / 2), "0"}
}

// interval is a kline interval.
type interval struct {
	name string
	d    time.Duration // 0 for months
}

var intervals = func() map[string]interval {
	m := map[string]interval{}
	for _, v := range []struct {
		n string
		d time.Duration
	}{{"1m", time.Minute}, {"3m", 3 * time.Minute}, {"5m", 5 * time.Minute}, {"15m", 15 * time.Minute},
		{"30m", 30 * time.Minute}, {"1h", time.Hour}, {"2h", 2 * time.Hour}, {"4h", 4 * time.Hour},
		{"6h", 6 * time.Hour}, {"8h", 8 * time.Hour}, {"12h", 12 * time.Hour}, {"1d", 24 * time.Hour},
		{"3d", 72 * time.Hour}, {"1w", 7 * 24 * time.Hour}, {"1M", 0}} {
		m[v.n] = interval{v.n, v.d}
	}
	return m
}()

// monday is the first Monday 00:00 UTC after the epoch: weekly klines
// open on Mondays.
var monday = time.Date(1970, 1, 5, 0, 0, 0, 0, time.UTC)

// truncate is the open time of the interval holding t (UTC).
func (iv interval) truncate(t time.Time) time.Time {
	t = t.UTC()
	switch {
	case iv.d == 0:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	case iv.name == "1w":
		return monday.Add(t.Sub(monday) / iv.d * iv.d)
	}
	return t.Truncate(iv.d)
}

func (iv interval) next(t0 time.Time) time.Time {
	if iv.d == 0 {
		return t0.AddDate(0, 1, 0)
	}
	return t0.Add(iv.d)
}

func (iv interval) prev(t0 time.Time) time.Time {
	if iv.d == 0 {
		return t0.AddDate(0, -1, 0)
	}
	return t0.Add(-iv.d)
}

// num is a decimal string as Binance writes prices and quantities.
func num(v float64) string { return string(appendDecimal(nil, v)) }

// appendDecimal appends v as the simulator writes its prices and volumes.
func appendDecimal(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'f', 8, 64) }

// mix is splitmix64 of a and b: the simulator's only source of chance.
func mix(a, b uint64) uint64 {
	z := a ^ (b+0x9e3779b97f4a7c15)*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

func hashString(s string) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}
