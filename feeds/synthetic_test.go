package feeds

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func newTestSynthetic(t *testing.T, seed int64, at time.Time) (*Synthetic, *clock) {
	t.Helper()
	c := &clock{t: at}
	return NewSynthetic(seed, c.now), c
}

func TestSyntheticSupportsEveryCatalogueCombination(t *testing.T) {
	t.Parallel()
	s, _ := newTestSynthetic(t, 1, testNow)
	for _, region := range domain.Regions {
		for _, c := range domain.Catalogue(region) {
			if !s.Supports(c) {
				t.Errorf("synthetic does not support %s (%s)", c, region)
			}
		}
	}
	if s.Supports(domain.Combination{Market: domain.Crypto, Exchange: "kraken", Instrument: "spot"}) {
		t.Error("synthetic supports a combination outside every catalogue")
	}
}

func TestSyntheticUniverse(t *testing.T) {
	t.Parallel()
	s, _ := newTestSynthetic(t, 1, testNow)
	ctx := context.Background()
	count := func(c domain.Combination) []string {
		syms, err := s.Symbols(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, sym := range syms {
			if got, ok := domain.NormalizeSymbol(c.Market, sym); !ok || got != sym {
				t.Errorf("%s: symbol %q is not canonical", c, sym)
			}
		}
		return syms
	}
	spot := count(binanceSpot)
	if len(spot) < 180 || len(spot) > 230 {
		t.Errorf("binance spot has %d symbols, want ≈200", len(spot))
	}
	for _, want := range []string{"BTC_USDT", "ETH_USDT", "SOL_USDT", "ETH_BTC"} {
		if !slices.Contains(spot, want) {
			t.Errorf("binance spot lacks %s", want)
		}
	}
	majors, minors := count(oandaMajor), count(oandaMinor)
	if len(majors) != 7 || len(majors)+len(minors) != 28 {
		t.Errorf("forex: %d majors + %d minors, want 7 + 21", len(majors), len(minors))
	}
	if !slices.Contains(majors, "EUR_USD") || !slices.Contains(minors, "EUR_GBP") || slices.Contains(minors, "EUR_USD") {
		t.Errorf("forex split wrong: majors %v minors %v", majors, minors)
	}
	nq, ny := count(nasdaq), count(nyse)
	if len(nq)+len(ny) < 90 || !slices.Contains(nq, "AAPL") || !slices.Contains(ny, "JPM") || slices.Contains(ny, "AAPL") {
		t.Errorf("stocks: nasdaq %d, nyse %d", len(nq), len(ny))
	}
	coinbase := count(domain.Combination{Market: domain.Crypto, Exchange: "coinbase", Instrument: "spot"})
	if !slices.Contains(coinbase, "BTC_USD") {
		t.Errorf("coinbase spot lacks BTC_USD: %v", coinbase[:5])
	}
}

func TestSyntheticCandlesDeterministic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	since := time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC)
	for _, tf := range domain.Timeframes {
		// Same seed, two instances, two clocks far apart: the closed candles
		// from since must be identical.
		a, _ := newTestSynthetic(t, 7, testNow)
		b, _ := newTestSynthetic(t, 7, testNow.Add(90*24*time.Hour))
		ca, err := a.Candles(ctx, binanceSpot, "ETH_BTC", tf, since, 300)
		if err != nil {
			t.Fatal(err)
		}
		cb, err := b.Candles(ctx, binanceSpot, "ETH_BTC", tf, since, 300)
		if err != nil {
			t.Fatal(err)
		}
		// Drop a still-open last candle of a (b's clock is far later).
		if last := ca[len(ca)-1]; !last.Time.Add(tf.Duration()).Before(testNow) {
			ca = ca[:len(ca)-1]
		}
		if len(ca) == 0 || !slices.EqualFunc(ca, cb[:len(ca)], candleEqual) {
			t.Errorf("%s: closed candles differ between ingests", tf)
		}
		if first := ca[0].Time; first.Before(since) || !first.Before(since.Add(tf.Duration())) || !tf.Truncate(first).Equal(first) {
			t.Errorf("%s: first open %s, want the first aligned open ≥ %s", tf, first, since)
		}
	}
	// Another seed gives another market.
	c, _ := newTestSynthetic(t, 8, testNow)
	x, _ := c.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, since, 10)
	y, _ := newTestSynthetic(t, 7, testNow)
	z, _ := y.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, since, 10)
	if slices.EqualFunc(x, z, candleEqual) {
		t.Error("seeds 7 and 8 produced the same candles")
	}
}

func TestSyntheticLiveCandleAndTickersMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clk := newTestSynthetic(t, 3, testNow)
	t1, _ := s.Tickers(ctx, binanceSpot)
	c1, _ := s.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 3)
	clk.set(testNow.Add(5 * time.Second))
	t2, _ := s.Tickers(ctx, binanceSpot)
	c2, _ := s.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 3)

	moved := 0
	for i := range t1 {
		if t1[i].Price != t2[i].Price {
			moved++
		}
	}
	if moved < len(t1)*3/4 {
		t.Errorf("only %d of %d ticker prices moved in 5 s", moved, len(t1))
	}
	if !candleEqual(c1[0], c2[0]) || !candleEqual(c1[1], c2[1]) {
		t.Error("closed candles changed between ingests 5 s apart")
	}
	if c1[2].Close == c2[2].Close || c2[2].Volume <= c1[2].Volume {
		t.Errorf("live candle did not move: %+v then %+v", c1[2], c2[2])
	}
	if !c2[2].Time.Equal(domain.TF1h.Truncate(testNow)) {
		t.Errorf("live candle opens at %s", c2[2].Time)
	}
	// The ticker price is the live close.
	for _, tk := range t2 {
		if tk.Symbol == "BTC_USDT" && tk.Price != c2[2].Close {
			t.Errorf("ticker price %v, live close %v", tk.Price, c2[2].Close)
		}
	}
}

func TestSyntheticValid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 11, testNow)
	for _, region := range domain.Regions {
		for _, c := range domain.Catalogue(region) {
			tickers, err := s.Tickers(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			syms, _ := s.Symbols(ctx, c)
			if len(tickers) != len(syms) {
				t.Errorf("%s: %d tickers for %d symbols", c, len(tickers), len(syms))
			}
			for _, tk := range tickers {
				if err := tk.Validate(); err != nil || tk.Volume <= 0 {
					t.Errorf("%s: %+v: %v", c, tk, err)
				}
			}
			for _, sym := range syms[:min(len(syms), 5)] {
				for _, tf := range domain.Timeframes {
					cs, err := s.Candles(ctx, c, sym, tf, time.Time{}, 500)
					if err != nil {
						t.Fatal(err)
					}
					if len(cs) != 500 {
						t.Errorf("%s %s %s: %d candles, want 500", c, sym, tf, len(cs))
					}
					if err := domain.ValidateCandles(cs); err != nil {
						t.Errorf("%s %s %s: %v", c, sym, tf, err)
					}
				}
			}
		}
	}
}

func TestSyntheticNoNaNFarFromNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, at := range []time.Time{
		time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 6, 1, 0, 0, 0, 0, time.UTC), // negative Unix times
		time.Date(2099, 12, 31, 23, 59, 59, 999, time.UTC),
	} {
		s, _ := newTestSynthetic(t, -5, at)
		cs, err := s.Candles(ctx, binanceSpot, "SHIB_USDT", domain.TF1d, time.Time{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := domain.ValidateCandles(cs); err != nil {
			t.Errorf("%s: %v", at, err)
		}
	}
}

func TestSyntheticCandleWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 1, testNow) // 14:00:30
	tests := []struct {
		name      string
		since     time.Time
		limit     int
		wantN     int
		wantFirst time.Time
	}{
		{"newest", time.Time{}, 10, 10, testNow.Truncate(time.Hour).Add(-9 * time.Hour)},
		{"since aligned", testNow.Add(-2*time.Hour - 30*time.Second), 10, 3, testNow.Add(-2*time.Hour - 30*time.Second)},
		{"since rounds up", testNow.Add(-150 * time.Minute), 10, 3, testNow.Truncate(time.Hour).Add(-2 * time.Hour)},
		{"limit from since", testNow.Add(-48 * time.Hour).Truncate(time.Hour), 5, 5, testNow.Add(-48 * time.Hour).Truncate(time.Hour)},
		{"future", testNow.Add(time.Hour), 10, 0, time.Time{}},
	}
	for _, tt := range tests {
		cs, err := s.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, tt.since, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != tt.wantN || (tt.wantN > 0 && !cs[0].Time.Equal(tt.wantFirst)) {
			t.Errorf("%s: got %d candles from %v, want %d from %s", tt.name, len(cs), cs, tt.wantN, tt.wantFirst)
		}
	}
	if _, err := s.Candles(ctx, binanceSpot, "NOPE_USDT", domain.TF1h, time.Time{}, 1); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown symbol: %v, want ErrNotFound", err)
	}
	weekly, _ := s.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1w, time.Time{}, 3)
	for _, c := range weekly {
		if c.Time.Weekday() != time.Monday || !domain.TF1w.Truncate(c.Time).Equal(c.Time) {
			t.Errorf("weekly candle opens %s", c.Time)
		}
	}
}

// Timeframes agree: an hour's open and close are the opens of its first
// and the next hour's minute candles.
func TestSyntheticTimeframesConsistent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 1, testNow)
	from := testNow.Truncate(time.Hour).Add(-3 * time.Hour)
	hours, _ := s.Candles(ctx, binanceSpot, "SOL_USDT", domain.TF1h, from, 2)
	mins, _ := s.Candles(ctx, binanceSpot, "SOL_USDT", domain.TF1m, from, 121)
	if hours[0].Open != mins[0].Open || hours[0].Close != mins[59].Close || hours[1].Open != mins[60].Open {
		t.Errorf("1h %+v vs 1m %+v / %+v", hours[0], mins[0], mins[59])
	}
	var hi, lo, vol float64 = 0, math.Inf(1), 0
	for _, m := range mins[:60] {
		hi, lo, vol = math.Max(hi, m.High), math.Min(lo, m.Low), vol+m.Volume
	}
	if math.Abs(hours[0].High/hi-1) > 0.01 || math.Abs(hours[0].Low/lo-1) > 0.01 {
		t.Errorf("1h high/low %v/%v, minutes %v/%v", hours[0].High, hours[0].Low, hi, lo)
	}
	if r := hours[0].Volume / vol; r < 0.3 || r > 3 {
		t.Errorf("1h volume %v vs Σ 1m %v", hours[0].Volume, vol)
	}
}

// Regimes: over any fortnight some symbols trend up and some down, and a
// symbol's direction changes over months.
func TestSyntheticRegimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 2, testNow)
	syms, _ := s.Symbols(ctx, binanceSpot)
	up, down := 0, 0
	for _, sym := range syms {
		cs, _ := s.Candles(ctx, binanceSpot, sym, domain.TF1d, time.Time{}, 14)
		r := cs[len(cs)-1].Close/cs[0].Open - 1
		switch {
		case r > 0.08:
			up++
		case r < -0.08:
			down++
		}
	}
	if up < 10 || down < 10 {
		t.Errorf("over 14 days %d symbols rose > 8 %% and %d fell > 8 %%; want both ≥ 10", up, down)
	}
	cs, _ := s.Candles(ctx, binanceSpot, "ETH_USDT", domain.TF1d, time.Time{}, 365)
	ups, downs := 0, 0
	for i := 10; i < len(cs); i += 10 {
		switch r := cs[i].Close/cs[i-10].Close - 1; {
		case r > 0.05:
			ups++
		case r < -0.05:
			downs++
		}
	}
	if ups < 3 || downs < 3 {
		t.Errorf("ETH over a year: %d rising and %d falling 10-day windows", ups, downs)
	}
}

// Daily volatility per market is in a realistic band: crypto > stocks > forex.
func TestSyntheticVolatility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 4, testNow)
	vol := func(c domain.Combination) float64 {
		syms, _ := s.Symbols(ctx, c)
		var sum float64
		for _, sym := range syms[:7] {
			cs, _ := s.Candles(ctx, c, sym, domain.TF1d, time.Time{}, 720)
			var sq float64
			for i := 1; i < len(cs); i++ {
				r := math.Log(cs[i].Close / cs[i-1].Close)
				sq += r * r
			}
			sum += math.Sqrt(sq / float64(len(cs)-1))
		}
		return sum / 7
	}
	crypto, stocks, forex := vol(binanceSpot), vol(nasdaq), vol(oandaMajor)
	if crypto < 0.02 || crypto > 0.06 || stocks < 0.007 || stocks > 0.025 || forex < 0.002 || forex > 0.009 {
		t.Errorf("daily vol crypto %.4f stocks %.4f forex %.4f", crypto, stocks, forex)
	}
}

func TestSyntheticCrossesConsistent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 5, testNow)
	find := func(ts []domain.Ticker, sym string) float64 {
		for _, t := range ts {
			if t.Symbol == sym {
				return t.Price
			}
		}
		return math.NaN()
	}
	majors, _ := s.Tickers(ctx, oandaMajor)
	minors, _ := s.Tickers(ctx, oandaMinor)
	implied := find(majors, "EUR_USD") / find(majors, "GBP_USD")
	if got := find(minors, "EUR_GBP"); math.Abs(got/implied-1) > 1e-4 {
		t.Errorf("EUR_GBP %v, EUR_USD/GBP_USD %v", got, implied)
	}
	if got := find(majors, "USD_JPY"); got < 80 || got > 250 {
		t.Errorf("USD_JPY %v", got)
	}
}

func TestSyntheticFundamentals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestSynthetic(t, 6, testNow)
	var _ FundamentalsProvider = s
	tests := []struct {
		m    domain.Market
		sym  string
		keys []string
	}{
		{domain.Crypto, "BTC_USDT", []string{FundamentalFundingRate, FundamentalOpenInterestChg, FundamentalVolumeToMcap}},
		{domain.Stocks, "AAPL", []string{FundamentalPE, FundamentalSectorPE, FundamentalRevenueGrowth, FundamentalDebtToEquity}},
		{domain.Forex, "EUR_USD", []string{FundamentalRateDiff, FundamentalInflationDiff}},
	}
	for _, tt := range tests {
		got, err := s.Fundamentals(ctx, tt.m, tt.sym)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := s.Fundamentals(ctx, tt.m, tt.sym)
		for _, k := range tt.keys {
			v, ok := got[k]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v != again[k] {
				t.Errorf("%s %s: %s = %v (present %v)", tt.m, tt.sym, k, v, ok)
			}
		}
	}
	if _, err := s.Fundamentals(ctx, domain.Stocks, "NOPE"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown symbol: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r, err := New(Config{Names: []string{"synthetic"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, region := range domain.Regions {
		if _, un := Served([]string{NameSynthetic}, region); len(un) > 0 {
			t.Errorf("%s: synthetic leaves %v unserved", region, un)
		}
	}
	r, err = New(Config{Names: []string{" Binance", "coinbase", "synthetic"}, OandaToken: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		c    domain.Combination
		want string
	}{
		{binanceSpot, "binance"},
		{domain.Combination{Market: domain.Crypto, Exchange: "coinbase", Instrument: "spot"}, "coinbase"},
		{oandaMajor, "synthetic"}, // oanda not configured: the next provider that can serve it
	} {
		p, ok := r.For(tt.c)
		if !ok || p.Name() != tt.want {
			t.Errorf("For(%s) = %v, want %s", tt.c, p, tt.want)
		}
	}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Names: []string{"bloomberg"}}, `unknown feed "bloomberg"`},
		{Config{Names: []string{"oanda"}}, "oanda: needs an API token"},
		{Config{Names: []string{"alpaca"}, AlpacaKeyID: "k"}, "alpaca: needs a key id and secret"},
		{Config{}, "no feed configured"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v) = %v, want %q", tt.cfg.Names, err, tt.want)
		}
	}
}

func BenchmarkSyntheticCandles1000(b *testing.B) {
	s := NewSynthetic(42, func() time.Time { return testNow })
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Candles(ctx, binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 1000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSyntheticTickers(b *testing.B) {
	s := NewSynthetic(42, func() time.Time { return testNow })
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Tickers(ctx, binanceSpot); err != nil {
			b.Fatal(err)
		}
	}
}

// A cancelled context fails a candle read, as a real provider's request
// fails: a worker shutting down mid-read stops at its next call.
func TestSyntheticCandlesStopOnCancel(t *testing.T) {
	t.Parallel()
	s, _ := newTestSynthetic(t, 7, testNow)
	ctx, cancel := context.WithCancel(context.Background())
	if cs, err := s.Candles(ctx, binanceSpot, "ETH_BTC", domain.TF1h, time.Time{}, 10); err != nil || len(cs) == 0 {
		t.Fatalf("before the cancel: %d candles, %v", len(cs), err)
	}
	cancel()
	if cs, err := s.Candles(ctx, binanceSpot, "ETH_BTC", domain.TF1h, time.Time{}, 10); !errors.Is(err, context.Canceled) || cs != nil {
		t.Fatalf("after the cancel: %d candles, %v; want context.Canceled", len(cs), err)
	}
}
