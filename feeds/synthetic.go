package feeds

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
)

// Synthetic is a deterministic market-data feed for demo mode, load tests
// and end-to-end tests. A closed candle is a pure function of (seed,
// combination, symbol, timeframe, open time), so ingesting it twice stores
// the same values; the current candle and the tickers follow the clock down
// to the second, so prices move between ingests a few seconds apart.
// Per-symbol trending and ranging regimes of 3–20 days make technical
// verdicts change over time. Crypto trades around the clock; stocks trade
// in the NYSE's sessions and currencies in the forex week
// (synthetic_calendar.go): outside them there are no candles and the
// screener rows stand at the last close. Volume follows each market's
// intraday and weekly seasonality.
type Synthetic struct {
	seed      uint64
	now       func() time.Time
	factors   map[domain.Market]*path // one shared market factor per market
	universes map[domain.Combination]*universe
	byMarket  map[domain.Market]map[string]*instrument // first instrument per symbol, for Fundamentals
}

// Per-market model constants.
const (
	cryptoFactorSigma = 0.025 // daily log vol of the crypto market factor
	cryptoFactorTrend = 0.15  // regime amplitude of the crypto market factor
	stockFactorSigma  = 0.009
	stockFactorTrend  = 0.06
	usdFactorSigma    = 0.0035
	usdFactorTrend    = 0.02
	btcDayVolume      = 2.0e9  // USD volume of BTC_USDT on Binance spot per day
	topStockVolume    = 1.2e10 // USD volume of the most traded stock per day
	majorTicksPerDay  = 150000 // OANDA tick volume of EUR_USD per day
	syntheticMaxLimit = 50000  // candles per call, to bound memory
)

// NewSynthetic returns the synthetic feed for seed with its default
// universe; now nil means time.Now. It serves every combination of every
// region's catalogue.
func NewSynthetic(seed int64, now func() time.Time) *Synthetic {
	return NewSyntheticSized(seed, now, 0)
}

// NewSyntheticSized is NewSynthetic with cryptoAssets crypto base assets
// (0 means the default, SyntheticDefaultCryptoAssets). Beyond the fixed
// table, assets get symbols and paths derived from the seed, and each
// crypto combination lists a share of them in proportion to its default
// share, so scale benchmarks can run thousands of symbols without an
// exchange.
func NewSyntheticSized(seed int64, now func() time.Time, cryptoAssets int) *Synthetic {
	if now == nil {
		now = time.Now
	}
	s := &Synthetic{
		seed:      uint64(seed),
		now:       now,
		factors:   map[domain.Market]*path{},
		universes: map[domain.Combination]*universe{},
		byMarket:  map[domain.Market]map[string]*instrument{},
	}
	s.factors[domain.Crypto] = s.newPath("factor", "crypto", cryptoFactorSigma, cryptoFactorTrend)
	s.factors[domain.Stocks] = s.newPath("factor", "stocks", stockFactorSigma, stockFactorTrend)
	s.factors[domain.Forex] = s.newPath("factor", "usd", usdFactorSigma, usdFactorTrend)
	crypto := s.cryptoPaths(cryptoAssets)
	stocks := s.stockPaths()
	forex := s.currencyPaths()
	for _, region := range domain.Regions {
		for _, c := range domain.Catalogue(region) {
			if _, done := s.universes[c]; done {
				continue
			}
			var u *universe
			switch c.Market {
			case domain.Crypto:
				u = s.cryptoUniverse(c, crypto)
			case domain.Forex:
				u = s.forexUniverse(c, forex)
			case domain.Stocks:
				u = s.stockUniverse(c, stocks)
			default:
				continue
			}
			s.universes[c] = u
			if s.byMarket[c.Market] == nil {
				s.byMarket[c.Market] = map[string]*instrument{}
			}
			for _, sym := range u.symbols {
				if _, ok := s.byMarket[c.Market][sym]; !ok {
					s.byMarket[c.Market][sym] = u.bySymbol[sym]
				}
			}
		}
	}
	return s
}

func (s *Synthetic) newPath(kind, name string, sigmaDay, trend float64) *path {
	p := newPath(mix64(s.seed^hashString(kind, name)), sigmaDay, trend)
	return &p
}

// pathAsset pairs a universe row with its idiosyncratic path and factor beta.
type pathAsset struct {
	asset
	p     *path
	beta  float64
	sigma float64 // idiosyncratic daily vol
}

func (s *Synthetic) cryptoPaths(n int) []pathAsset {
	var out []pathAsset
	for _, a := range s.cryptoAssets(n) {
		h := mix64(s.seed ^ hashString("crypto", a.name))
		sigma, beta, trend := 0.022+0.022*unit(h), 0.8+0.6*unit(mix64(h)), 0.12+0.1*unit(mix64(h+1))
		switch a.name {
		case "BTC":
			sigma, beta, trend = 0.012, 1, 0.08
		case "ETH":
			sigma, beta, trend = 0.018, 1.1, 0.1
		}
		out = append(out, pathAsset{asset: a, p: s.newPath("crypto", a.name, sigma, trend), beta: beta, sigma: sigma})
	}
	return out
}

func (s *Synthetic) stockPaths() map[string][]pathAsset {
	out := map[string][]pathAsset{}
	for exchange, table := range syntheticStockTables {
		for _, a := range parseAssets(table) {
			h := mix64(s.seed ^ hashString("stocks", a.name))
			sigma, beta := 0.01+0.012*unit(h), 0.6+0.9*unit(mix64(h))
			out[exchange] = append(out[exchange], pathAsset{asset: a, p: s.newPath("stocks", a.name, sigma, 0.07), beta: beta, sigma: sigma})
		}
	}
	return out
}

func (s *Synthetic) currencyPaths() map[string]pathAsset {
	out := map[string]pathAsset{}
	for _, a := range parseAssets(syntheticCurrencies) {
		pa := pathAsset{asset: a}
		if a.name != "USD" {
			h := mix64(s.seed ^ hashString("forex", a.name))
			pa.sigma, pa.beta = 0.003+0.002*unit(h), 0.6+0.6*unit(mix64(h))
			pa.p = s.newPath("forex", a.name, pa.sigma, 0.025)
		}
		out[a.name] = pa
	}
	return out
}

func (s *Synthetic) cryptoUniverse(c domain.Combination, assets []pathAsset) *universe {
	shape := cryptoShapeOf(c)
	shape.count = scaledCount(shape.count, len(assets))
	u := &universe{bySymbol: map[string]*instrument{}}
	btc := assets[0]
	factor := cryptoFactorSigma
	add := func(a pathAsset, quote string, volShare float64) {
		in := &instrument{
			symbol: a.name + "_" + quote, market: domain.Crypto, logBase: math.Log(a.price),
			beta: a.beta, legs: []leg{{a.p, 1}}, sigmaDay: math.Hypot(a.beta*factor, a.sigma),
			dayVolume: max(btcDayVolume*shape.volScale*volShare*math.Pow(float64(a.rank), -1.1), 2e4),
			unit:      unitBase, baseAsset: a.name, quote: quote, rank: a.rank,
		}
		if quote == "BTC" {
			in.logBase -= math.Log(btc.price)
			in.beta -= btc.beta
			in.legs = append(in.legs, leg{btc.p, -1})
			in.sigmaDay = math.Hypot(in.beta*factor, math.Hypot(a.sigma, btc.sigma))
			in.dayVolume /= btc.price
		}
		s.finish(c, in, shape.basis)
		u.add(in)
	}
	for i, a := range assets {
		if i < shape.count {
			add(a, shape.quote, 1)
		}
	}
	for i, a := range assets[1:] {
		if i < shape.btcCrosses {
			add(a, "BTC", 0.05)
		}
	}
	for i, a := range assets {
		if i < shape.usdc {
			add(a, "USDC", 0.15)
		}
	}
	return u
}

func (s *Synthetic) forexUniverse(c domain.Combination, ccy map[string]pathAsset) *universe {
	pairs := syntheticForexMajors
	volShare := 1.0
	if c.Instrument == "minor" {
		pairs, volShare = syntheticForexMinors, 0.4
	}
	u := &universe{bySymbol: map[string]*instrument{}}
	for i, sym := range strings.Fields(pairs) {
		baseCcy, quoteCcy, _ := strings.Cut(sym, "_")
		b, q := ccy[baseCcy], ccy[quoteCcy]
		in := &instrument{
			symbol: sym, market: domain.Forex, logBase: math.Log(b.price / q.price),
			// A currency's USD value falls when the USD factor rises.
			beta:      q.beta - b.beta,
			sigmaDay:  math.Hypot((q.beta-b.beta)*usdFactorSigma, math.Hypot(b.sigma, q.sigma)),
			dayVolume: majorTicksPerDay * volShare * math.Pow(float64(i+1), -0.5),
			unit:      unitTicks, baseAsset: baseCcy, quote: quoteCcy,
		}
		if b.p != nil {
			in.legs = append(in.legs, leg{b.p, 1})
		}
		if q.p != nil {
			in.legs = append(in.legs, leg{q.p, -1})
		}
		s.finish(c, in, 0)
		u.add(in)
	}
	return u
}

func (s *Synthetic) stockUniverse(c domain.Combination, byExchange map[string][]pathAsset) *universe {
	u := &universe{bySymbol: map[string]*instrument{}}
	assets := byExchange[c.Exchange]
	for _, a := range assets {
		in := &instrument{
			symbol: a.name, market: domain.Stocks, logBase: math.Log(a.price),
			beta: a.beta, legs: []leg{{a.p, 1}}, sigmaDay: math.Hypot(a.beta*stockFactorSigma, a.sigma),
			dayVolume: topStockVolume * math.Pow(float64(a.rank), -0.8),
			unit:      unitShares, baseAsset: a.name, sector: a.sector,
		}
		s.finish(c, in, 0)
		u.add(in)
	}
	return u
}

// finish sets what depends on the combination: rounding, candle-noise salt
// and the derivatives basis.
func (s *Synthetic) finish(c domain.Combination, in *instrument, basis float64) {
	level := math.Exp(in.logBase)
	in.scale = priceScale(in.market, level)
	// Base volumes keep as many decimals as the price has digits, like
	// exchange lot sizes: 0.00001 BTC, 1 SHIB.
	in.volScale = math.Pow(10, math.Max(0, math.Min(8, math.Ceil(math.Log10(level)))))
	in.salt = mix64(s.seed ^ hashString(c.String(), in.symbol))
	if basis != 0 {
		in.basis = basis * (0.5 + unit(in.salt))
	}
}

// Name implements Provider.
func (s *Synthetic) Name() string { return NameSynthetic }

// Supports implements Provider: every combination of every region.
func (s *Synthetic) Supports(c domain.Combination) bool { return syntheticServes(c) }

// Symbols implements Provider.
func (s *Synthetic) Symbols(_ context.Context, c domain.Combination) ([]string, error) {
	u, ok := s.universes[c]
	if !ok {
		return nil, unsupported(NameSynthetic, c)
	}
	return append([]string(nil), u.symbols...), nil
}

// Tickers implements Provider: price now, change over 24 h, and the volume
// of the last 24 hourly candles in quote currency (ticks for forex). A
// market that trades in sessions is quoted as of its last traded instant:
// while it is closed its rows stand at the last close, stamped with it;
// a stock's change is against the previous session's close, as the US
// exchanges quote it.
func (s *Synthetic) Tickers(_ context.Context, c domain.Combination) ([]domain.Ticker, error) {
	u, ok := s.universes[c]
	if !ok {
		return nil, unsupported(NameSynthetic, c)
	}
	now := s.now().UTC()
	out := make([]domain.Ticker, 0, len(u.symbols))
	for _, sym := range u.symbols {
		out = append(out, s.ticker(u.bySymbol[sym], now))
	}
	return out, nil
}

func (s *Synthetic) ticker(in *instrument, now time.Time) domain.Ticker {
	e := in.evaluator(s.factors[in.market])
	prevAt := now.Add(-24 * time.Hour)
	if src := sessionsOf(in.market); src != nil {
		ss, open := marketState(src, now)
		if !open {
			now = ss.Close
		}
		if in.market == domain.Stocks {
			prevAt = src.before(ss.Open).Close
		}
	}
	nowNs := now.UnixNano()
	hour := int64(time.Hour)
	last := domain.TF1h.Truncate(now).UnixNano()
	prev := in.round(math.Exp(e.logPrice(prevAt.UnixNano(), 0)))
	var volume float64
	lp := e.logPrice(last-23*hour, 0)
	for t0 := last - 23*hour; t0 <= last; t0 += hour {
		var quoteVol float64
		_, lp, quoteVol = s.candle(&e, domain.TF1h, t0, hour, nowNs, lp)
		volume += quoteVol
	}
	price := in.round(math.Exp(lp)) // the current candle closes at the price of now
	return domain.Ticker{
		Symbol:    in.symbol,
		Price:     price,
		ChangePct: math.Round((price/prev-1)*1e6) / 1e4,
		Volume:    math.Round(volume*100) / 100,
		UpdatedAt: now,
	}
}

// Candles implements Provider. A cancelled ctx fails it, as it fails a
// real provider's request: a caller stopping mid-read (a worker shutting
// down) stops at its next call, not after generating the rest.
func (s *Synthetic) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u, ok := s.universes[c]
	if !ok {
		return nil, unsupported(NameSynthetic, c)
	}
	in, ok := u.bySymbol[symbol]
	if !ok {
		return nil, unknownSymbol(NameSynthetic, c, symbol)
	}
	dur := tf.Duration()
	if dur <= 0 {
		return nil, domain.Errorf(domain.EINVALID, "feeds: synthetic: unknown timeframe %q", tf)
	}
	if limit <= 0 {
		limit = 1000
	}
	limit = min(limit, syntheticMaxLimit)
	now := s.now().UTC()
	last := tf.Truncate(now)
	first := last.Add(-time.Duration(limit-1) * dur)
	if !since.IsZero() {
		first = tf.Truncate(since)
		if first.Before(since) {
			first = first.Add(dur)
		}
	}
	if src := sessionsOf(in.market); src != nil {
		ws := windowsBefore(src, tf, now, limit)
		if !since.IsZero() {
			ws = windowsFrom(src, tf, first, now, limit)
		}
		return s.windowSeries(in, tf, ws, now), nil
	}
	if first.After(last) {
		return []domain.Candle{}, nil
	}
	n := min(int(last.Sub(first)/dur)+1, limit)
	return s.series(in, tf, first.UnixNano(), int64(dur), n, now.UnixNano()), nil
}

// series generates n consecutive candles from open time first; each close
// is the next open, so the path is evaluated once per boundary.
func (s *Synthetic) series(in *instrument, tf domain.Timeframe, first, dur int64, n int, now int64) []domain.Candle {
	e := in.evaluator(s.factors[in.market])
	out := make([]domain.Candle, n)
	lp := e.logPrice(first, 0)
	for i := range out {
		out[i], lp, _ = s.candle(&e, tf, first+int64(i)*dur, dur, now, lp)
	}
	return out
}

// candle builds the candle opening at t0 whose open log price is lpOpen. A
// candle still open at now closes at the price of now, and only the path
// samples already in the past count towards its high and low. It returns
// the candle, the log price at its end (the next open) and its volume in
// quote currency. Only the last candle of a series can still be open, so
// the returned log price is the close either way.
func (s *Synthetic) candle(e *evaluator, tf domain.Timeframe, t0, dur, now int64, lpOpen float64) (domain.Candle, float64, float64) {
	in := e.in
	closeAt, elapsed := t0+dur, 1.0
	if now < closeAt {
		closeAt, elapsed = now, float64(now-t0)/float64(dur)
	}
	// Samples first, then the close: the cursors then move forward only.
	h := mix64(in.salt + uint64(t0)*0x9e3779b97f4a7c15 + uint64(dur))
	detail := sampleDetail(dur)
	hi, lo := lpOpen, lpOpen
	season := 0.0
	for j := range candleSamples {
		ts := t0 + int64((float64(j)+unit(mix64(h+uint64(j))))/candleSamples*float64(dur))
		season += seasonality(in.market, ts)
		if ts > closeAt {
			continue
		}
		l := e.logPrice(ts, detail)
		hi, lo = math.Max(hi, l), math.Min(lo, l)
	}
	lpClose := e.logPrice(closeAt, 0)
	hi, lo = math.Max(hi, lpClose), math.Min(lo, lpClose)
	sigma := in.sigmaDay * math.Sqrt(float64(dur)/nanosPerDay)
	wick := wickFraction * sigma * math.Sqrt(elapsed)
	hi += wick * math.Abs(gaussian(mix64(h+7)))
	lo -= wick * math.Abs(gaussian(mix64(h+8)))

	o, c := in.round(math.Exp(lpOpen)), in.round(math.Exp(lpClose))
	candle := domain.Candle{
		Time: time.Unix(0, t0).UTC(),
		Open: o, High: in.round(math.Exp(hi)), Low: in.round(math.Exp(lo)), Close: c,
	}
	quoteVol := s.volume(in, tf, t0, dur, season/candleSamples, math.Abs(lpClose-lpOpen)/sigma, h) * elapsed
	candle.Volume = in.toUnits(quoteVol, (o+c)/2)
	return candle, lpClose, quoteVol
}

// volume is the quote-currency volume of a whole candle: the symbol's daily
// volume, scaled by the candle's length, the market's seasonality, how far
// price moved (activity) and log-normal noise that shrinks for long candles.
func (s *Synthetic) volume(in *instrument, tf domain.Timeframe, t0, dur int64, season, move float64, h uint64) float64 {
	if dur >= int64(24*time.Hour) {
		season = dailySeasonality(in.market, t0, dur)
	}
	activity := 0.6 + 0.5*math.Min(move, 4)
	sn := 0.45 / (1 + 0.25*math.Log2(float64(dur)/float64(time.Minute)))
	noise := math.Exp(sn*gaussian(mix64(h+9)) - sn*sn/2)
	return in.dayVolume * float64(dur) / nanosPerDay * season * activity * noise
}

// evaluator computes one instrument's log price with a cursor per path.
type evaluator struct {
	in     *instrument
	factor cursor
	legs   [2]cursor
}

func (in *instrument) evaluator(f *path) evaluator {
	e := evaluator{in: in, factor: newCursor(f)}
	for i, l := range in.legs {
		e.legs[i] = newCursor(l.p)
	}
	return e
}

// logPrice is the instrument's log price at t (Unix nanoseconds), without
// the octaves below first.
func (e *evaluator) logPrice(t int64, first int) float64 {
	in := e.in
	x := in.logBase + in.basis
	if in.beta != 0 {
		x += in.beta * e.factor.at(t, first)
	}
	for i, l := range in.legs {
		x += l.sign * e.legs[i].at(t, first)
	}
	return x
}

// candleSamples is how many points inside a candle, at hashed positions,
// feed its high and low (on top of open, close and a wick).
const candleSamples = 2

// sampleDetail is the first octave worth evaluating inside a candle of
// length dur: octaves under 1/32 of the candle barely move its extremes.
func sampleDetail(dur int64) int {
	first := 0
	for first < octaves-1 && int64(octaveBase)<<(3*(first+1)) <= dur/32 {
		first++
	}
	return first
}

// round keeps six significant digits (cents for stocks); it is monotone,
// so it never breaks high ≥ open, close ≥ low.
func (in *instrument) round(v float64) float64 {
	return math.Max(math.Round(v*in.scale), 1) / in.scale
}

// toUnits converts a quote-currency volume to the unit candles report.
func (in *instrument) toUnits(quoteVol, price float64) float64 {
	switch in.unit {
	case unitTicks:
		return math.Round(quoteVol)
	case unitShares:
		return math.Round(quoteVol / price)
	}
	return math.Round(quoteVol/price*in.volScale) / in.volScale
}

// seasonality is the relative trading intensity at t (mean ≈ 1 over a week
// day): crypto peaks with the US/EU overlap and slows at weekends; forex
// peaks with London/New York and all but stops at weekends; stocks trade in
// the New York session (09:30–16:00 local time, whatever its UTC offset)
// with a U-shaped open and close.
func seasonality(m domain.Market, t int64) float64 {
	secs, _ := lattice(t, int64(time.Second))
	day, frac := lattice(secs, 86400)
	hour := frac * 24
	weekday := time.Weekday((day%7 + 11) % 7) // 1970-01-01 was a Thursday
	weekend := weekday == time.Saturday || weekday == time.Sunday
	switch m {
	case domain.Crypto:
		v := 1 + 0.35*math.Cos(2*math.Pi*(hour-15)/24)
		if weekend {
			v *= 0.75
		}
		return v
	case domain.Forex:
		if weekend {
			return 0.02
		}
		return 1 + 0.6*math.Cos(2*math.Pi*(hour-13)/24)
	}
	local := time.Unix(0, t).In(domain.NewYork())
	hour = float64(local.Hour()) + float64(local.Minute())/60 + float64(local.Second())/3600
	if wd := local.Weekday(); wd == time.Saturday || wd == time.Sunday || hour < 9.5 || hour >= 16 {
		return 0.03
	}
	x := (hour-9.5)/6.5*2 - 1 // -1 at the open, +1 at the close
	return 3.2 * (0.8 + 1.2*x*x)
}

// dailySeasonality is the mean intensity of a day or week candle.
func dailySeasonality(m domain.Market, t0, dur int64) float64 {
	weekendLevel := 0.03
	if m == domain.Crypto {
		weekendLevel = 0.75
	}
	if dur > int64(24*time.Hour) {
		return (5 + 2*weekendLevel) / 7
	}
	wd := time.Unix(0, t0).UTC().Weekday()
	if wd == time.Saturday || wd == time.Sunday {
		return weekendLevel
	}
	return 1
}

// InProcess reports whether p is computed in process (the synthetic feed):
// reading it costs no request and no network, so its candles can be read
// at every close as if they were pushed (feeds/push.Local).
func InProcess(p Provider) bool {
	_, ok := p.(*Synthetic)
	return ok
}
