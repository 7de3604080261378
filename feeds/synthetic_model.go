package feeds

import (
	"hash/fnv"
	"math"
	"time"
)

// The synthetic price model. A log-price path is a pure function of time
// that can be evaluated in O(1) at any instant, so a candle of any
// timeframe, at any date, costs a handful of hash evaluations and never a
// replay from genesis:
//
//   - value-noise octaves with periods 15 s · 8^i (15 s … 364 days), each
//     a linear interpolation between hashed lattice values, with amplitude
//     ∝ √period so increments scale like a random walk (σ·√h);
//   - a regime component: per-path blocks of 3–20 days whose end levels are
//     hashed; a block either trends (a fresh level) or ranges (the previous
//     level is kept), so trends start, reverse and pause per symbol.
//
// An instrument's log price is log(base) + β·F(t) + Σ ±I(t): a market factor
// shared by its market plus one idiosyncratic path per leg (BTC for
// ETH_BTC, EUR and GBP for EUR_GBP), which keeps crosses consistent.

const (
	octaves      = 8                  // 15 s · 8^7 ≈ 364 days
	octaveBase   = 15 * time.Second   // finest period: sub-minute movement of the live price
	regimeSalt   = 0x8f1bbcdcbfa53e0b // lattice salt of the regime component
	rangeChance  = 0.35               // chance a regime block keeps the previous level
	octaveGain   = 0.9                // calibrates Σ octaves to σ_daily (see TestSyntheticVolatility)
	longOctDamp  = 0.4                // the 364-day octave would otherwise dominate the price level
	nanosPerDay  = float64(24 * time.Hour)
	wickFraction = 0.3 // wick beyond sampled extremes, in σ of the candle
)

// path is one hashed log-price path.
type path struct {
	key         uint64
	amps        [octaves]float64
	inv         [octaves]float64 // 8^-i: inverse cell length of octave i in octaveBase units
	offs        [octaves]int64   // per-octave phase in octaveBase units, so symbols do not turn on the same lattice points
	regimeAmp   float64
	regimeBlock int64
	regimeOff   int64
}

func newPath(key uint64, sigmaDay, regimeAmp float64) path {
	p := path{key: key, regimeAmp: regimeAmp}
	for i := range octaves {
		period := int64(octaveBase) << (3 * i)
		p.amps[i] = octaveGain * sigmaDay * math.Sqrt(float64(period)/nanosPerDay)
		p.inv[i] = 1 / float64(int64(1)<<(3*i))
		p.offs[i] = int64(mix64(key^uint64(i)*0x2545f4914f6cdd1d) % (1 << (3 * i)))
	}
	p.amps[octaves-1] *= longOctDamp
	days := 3 + int64(mix64(key^0x5bd1e995)%18) // 3..20 days
	p.regimeBlock = days * int64(24*time.Hour)
	p.regimeOff = int64(unit(mix64(key^0x1b873593)) * float64(p.regimeBlock))
	return p
}

// at is the log-price offset of the path at t (Unix nanoseconds).
func (p *path) at(t int64) float64 {
	c := newCursor(p)
	return c.at(t, 0)
}

// cursor evaluates one path at a sequence of mostly increasing times,
// remembering each octave's lattice cell: coarse cells are reused and a
// step to the next cell hashes one new lattice point, not two. That keeps a
// 1000-candle series well under a millisecond. A cursor belongs to one
// goroutine; the path it reads is immutable.
type cursor struct {
	p      *path
	k      [octaves]int64
	v0, v1 [octaves]float64
	rk     int64
	r0, r1 float64
}

func newCursor(p *path) cursor {
	c := cursor{p: p, rk: math.MinInt64}
	for i := range c.k {
		c.k[i] = math.MinInt64
	}
	return c
}

// at evaluates the path at t from octave first upwards; candles skip the
// octaves far finer than themselves when sampling their high and low.
// Periods are octaveBase·8^i and phases whole multiples of octaveBase, so
// one division gives every octave's lattice index by shifting.
func (c *cursor) at(t int64, first int) float64 {
	p := c.p
	q, r := lattice(t, int64(octaveBase))
	var x float64
	for i := first; i < octaves; i++ {
		shift := uint(3 * i)
		qi := q + p.offs[i]
		k := qi >> shift // arithmetic shift: floor division by 8^i
		if k != c.k[i] {
			salt := p.key + uint64(i)*0xd6e8feb86659fd93
			if k == c.k[i]+1 {
				c.v0[i] = c.v1[i]
			} else {
				c.v0[i] = signedUnit(mix64(salt + uint64(k)*0x9e3779b97f4a7c15))
			}
			c.v1[i] = signedUnit(mix64(salt + uint64(k+1)*0x9e3779b97f4a7c15))
			c.k[i] = k
		}
		f := (float64(qi-k<<shift) + r) * p.inv[i]
		x += p.amps[i] * (c.v0[i] + (c.v1[i]-c.v0[i])*f)
	}
	k, f := lattice(t+p.regimeOff, p.regimeBlock)
	if k != c.rk {
		c.r0, c.r1, c.rk = p.regimeLevel(k), p.regimeLevel(k+1), k
	}
	return x + c.r0 + (c.r1-c.r0)*f
}

// regimeLevel is the level at the start of block k: with rangeChance it
// repeats the previous level (a ranging block), else it is a fresh level
// (a trend towards it). The look-back is bounded, so this stays O(1).
func (p *path) regimeLevel(k int64) float64 {
	for d := int64(0); ; d++ {
		h := mix64(p.key + uint64(k-d)*0x9e3779b97f4a7c15 + regimeSalt)
		if d == 2 || unit(h) >= rangeChance {
			return p.regimeAmp * signedUnit(mix64(h))
		}
	}
}

// lattice splits t into the lattice index and the fraction within the cell.
func lattice(t, period int64) (int64, float64) {
	k := t / period
	if t%period < 0 {
		k--
	}
	return k, float64(t-k*period) / float64(period)
}

// mix64 is splitmix64's finaliser: a cheap, well-mixed 64-bit hash.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) * 0x1p-53 }

// signedUnit maps a hash to [-1, 1).
func signedUnit(h uint64) float64 { return 2*unit(h) - 1 }

// gaussian maps a hash to an approximately standard normal value
// (Irwin–Hall sum of four 16-bit uniforms).
func gaussian(h uint64) float64 {
	s := float64(h&0xffff) + float64(h>>16&0xffff) + float64(h>>32&0xffff) + float64(h>>48)
	return (s/65536 - 2) * math.Sqrt(3)
}

func hashString(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return mix64(h.Sum64())
}
