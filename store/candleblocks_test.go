package store_test

import (
	"context"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// compactAll packs every candle of k before `before` (but its newest), in
// transactions of at most batch candles.
func compactAll(t *testing.T, db *store.DB, k store.CandleKey, before time.Time, batch int) int {
	t.Helper()
	total := 0
	for {
		n, err := db.CompactSeries(context.Background(), k, before, batch)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < batch {
			return total
		}
	}
}

// hotRows counts a series' rows in the candles table.
func hotRows(t *testing.T, db *store.DB, k store.CandleKey) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM candles
		WHERE market = $1 AND exchange = $2 AND symbol = $3 AND timeframe = $4`,
		string(k.Market), k.Exchange, k.Symbol, string(k.Timeframe)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func sameCandles(a, b []domain.Candle) bool {
	return slices.EqualFunc(a, b, func(x, y domain.Candle) bool {
		return x.Time.Equal(y.Time) && math.Float64bits(x.Open) == math.Float64bits(y.Open) &&
			math.Float64bits(x.High) == math.Float64bits(y.High) && math.Float64bits(x.Low) == math.Float64bits(y.Low) &&
			math.Float64bits(x.Close) == math.Float64bits(y.Close) && math.Float64bits(x.Volume) == math.Float64bits(y.Volume)
	})
}

// validRandomCandles are n valid candles of tf from start whose values are
// drawn from tick sizes, random bits and the extremes a float8 column
// takes (the largest and smallest positive values, subnormals, a -0
// volume), with holes.
func validRandomCandles(r *rand.Rand, n int, start time.Time, tf domain.Timeframe) []domain.Candle {
	pick := func() float64 {
		switch r.IntN(4) {
		case 0:
			return float64(1+r.Int64N(1e9)) / math.Pow10(r.IntN(9))
		case 1:
			return math.Float64frombits(r.Uint64()>>2 | 1) // positive, finite
		case 2:
			return []float64{math.MaxFloat64, math.SmallestNonzeroFloat64, 0x1p-1023, 1 << 53, 1e-300, 0.1}[r.IntN(6)]
		default:
			return 100 + float64(r.IntN(10000))/100
		}
	}
	out := make([]domain.Candle, 0, n)
	t := start
	for range n {
		vs := []float64{pick(), pick(), pick(), pick()}
		slices.Sort(vs)
		c := domain.Candle{Time: t, Low: vs[0], Open: vs[1], Close: vs[2], High: vs[3], Volume: pick()}
		if r.IntN(2) == 0 {
			c.Open, c.Close = c.Close, c.Open
		}
		switch r.IntN(10) {
		case 0:
			c.Volume = math.Copysign(0, -1)
		case 1:
			c.Volume = 0
		}
		out = append(out, c)
		t = t.Add(tf.Duration())
		if r.IntN(8) == 0 {
			t = t.Add(time.Duration(1+r.IntN(30)) * tf.Duration())
		}
	}
	return out
}

// Every read path returns, bit for bit, what it returned before the
// candles were packed: Candles and CandlesOf at limits inside the hot
// rows, across the boundary and into the blocks, CachedCandlesOf (full and
// extended), LatestCandleTimes and CandleSymbols; for random series of
// several timeframes whose values include the float8 extremes.
func TestCompactedCandlesReadAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	r := rand.New(rand.NewPCG(37, 26))
	type series struct {
		k     store.CandleKey
		n     int
		start time.Time
	}
	var all []series
	for _, tf := range []domain.Timeframe{domain.TF5m, domain.TF1h, domain.TF1d, domain.TF1w} {
		for _, sym := range []string{"BTC_USDT", "ETH_USDT", "OLD_USDT"} {
			n := 200 + r.IntN(900)
			start := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
			if tf == domain.TF5m {
				start = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
			}
			all = append(all, series{store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: tf}, n, start})
		}
	}
	for _, s := range all {
		if err := db.UpsertCandles(ctx, s.k, validRandomCandles(r, s.n, s.start, s.k.Timeframe)); err != nil {
			t.Fatal(err)
		}
	}
	limits := []int{1, 7, 200, 500, 1000, 5000}
	type read struct {
		candles map[int][]domain.Candle
		of      map[int]map[string][]domain.Candle
		latest  map[string]time.Time
		counts  map[string]int
		symbols []string
	}
	readAll := func(tf domain.Timeframe) read {
		rd := read{candles: map[int][]domain.Candle{}, of: map[int]map[string][]domain.Candle{}}
		syms := []string{"BTC_USDT", "ETH_USDT", "OLD_USDT", "NONE_USDT"}
		for _, l := range limits {
			cs, err := db.Candles(ctx, store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: tf}, l)
			if err != nil {
				t.Fatal(err)
			}
			rd.candles[l] = cs
			if rd.of[l], err = db.CandlesOf(ctx, domain.Crypto, "binance", tf, syms, l); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if rd.latest, err = db.LatestCandleTimes(ctx, domain.Crypto, "binance", tf, syms); err != nil {
			t.Fatal(err)
		}
		if rd.symbols, err = db.CandleSymbols(ctx, domain.Crypto, "binance", tf); err != nil {
			t.Fatal(err)
		}
		if rd.counts, err = db.CandleCounts(ctx, domain.Crypto, "binance", tf, syms, 300); err != nil {
			t.Fatal(err)
		}
		return rd
	}
	before := map[domain.Timeframe]read{}
	for _, tf := range []domain.Timeframe{domain.TF5m, domain.TF1h, domain.TF1d, domain.TF1w} {
		before[tf] = readAll(tf)
	}
	cache := store.NewCandleCache(100)
	if _, _, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT", "ETH_USDT"}, 500); err != nil {
		t.Fatal(err)
	}
	// Pack all but the newest ~100 candles of each series (OLD_USDT: all
	// but its newest, as the mover leaves a series that stopped).
	cuts := map[store.CandleKey]time.Time{}
	for _, s := range all {
		cut := s.start.Add(time.Duration(s.n-100) * s.k.Timeframe.Duration())
		if s.k.Symbol == "OLD_USDT" {
			cut = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		cuts[s.k] = cut
		if moved := compactAll(t, db, s.k, cut, 150); moved == 0 {
			t.Fatalf("%s: nothing packed", s.k)
		}
		if s.k.Symbol == "OLD_USDT" && hotRows(t, db, s.k) != 1 {
			t.Fatalf("%s: %d rows left, want its newest only", s.k, hotRows(t, db, s.k))
		}
	}
	for tf, want := range before {
		got := readAll(tf)
		for _, l := range limits {
			if !sameCandles(got.candles[l], want.candles[l]) {
				t.Errorf("%s Candles limit %d: %d candles differ from the %d before packing", tf, l, len(got.candles[l]), len(want.candles[l]))
			}
			if len(got.of[l]) != len(want.of[l]) {
				t.Errorf("%s CandlesOf limit %d: %d symbols, want %d", tf, l, len(got.of[l]), len(want.of[l]))
			}
			for sym, cs := range want.of[l] {
				if !sameCandles(got.of[l][sym], cs) {
					t.Errorf("%s CandlesOf %s limit %d differs", tf, sym, l)
				}
			}
		}
		if !slices.Equal(got.symbols, want.symbols) {
			t.Errorf("%s CandleSymbols %v, want %v", tf, got.symbols, want.symbols)
		}
		if !maps.Equal(got.counts, want.counts) {
			t.Errorf("%s CandleCounts %v, want %v", tf, got.counts, want.counts)
		}
		for sym, at := range want.latest {
			if !got.latest[sym].Equal(at) {
				t.Errorf("%s LatestCandleTimes %s %v, want %v", tf, sym, got.latest[sym], at)
			}
		}
	}
	// The cache kept 500 candles of 1h before the move: extended or read
	// again in full, it serves what Postgres has.
	for range 2 {
		got, _, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT", "ETH_USDT"}, 500)
		if err != nil {
			t.Fatal(err)
		}
		for sym, cs := range before[domain.TF1h].of[500] {
			if sym != "OLD_USDT" && !sameCandles(got[sym].Candles(), cs) {
				t.Errorf("CachedCandlesOf %s differs after packing", sym)
			}
		}
	}
	// Packing again moves nothing.
	for _, s := range all {
		if n, err := db.CompactSeries(ctx, s.k, cuts[s.k], 100000); err != nil || n != 0 {
			t.Fatalf("%s: a second pass moved %d (%v)", s.k, n, err)
		}
	}
}

// A repair of a packed candle lands: it reads back at once (the row wins
// over the block), the next move packs its value in and leaves no row, and
// the series' version marks the change deep (a scoring cache reads again).
func TestRepairOfPackedCandleLands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := makeCandles(2000, start, domain.TF1h, 0.5)
	if err := db.UpsertCandles(ctx, k, cs); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	compactAll(t, db, k, cut, 500)
	fixed := cs[100]
	fixed.Close, fixed.High = 123.456, 200
	cache := store.NewCandleCache(10)
	if _, _, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT"}, 2000); err != nil {
		t.Fatal(err)
	}
	changed, err := db.UpsertChangedCandles(ctx, map[store.CandleKey][]domain.Candle{k: {fixed}}, nil)
	if err != nil || len(changed) != 1 {
		t.Fatalf("repair changed %v (%v), want the series", changed, err)
	}
	want := slices.Clone(cs)
	want[100] = fixed
	check := func(when string) {
		t.Helper()
		got, err := db.Candles(ctx, k, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if !sameCandles(got, want) {
			t.Fatalf("%s: the series read back differs (%d candles, want %d)", when, len(got), len(want))
		}
		cached, reads, err := db.CachedCandlesOf(ctx, cache, domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT"}, 2000)
		if err != nil {
			t.Fatal(err)
		}
		if !sameCandles(cached["BTC_USDT"].Candles(), want) {
			t.Fatalf("%s: the cached read differs (%+v)", when, reads)
		}
	}
	check("after the repair")
	if n := compactAll(t, db, k, cut, 500); n != 1 {
		t.Fatalf("the next move packed %d rows, want the repaired one", n)
	}
	check("after the repair was packed")
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM candles WHERE symbol = 'BTC_USDT' AND open_time < $1`, cut).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows left before the cut (%v), want 0", rows, err)
	}
	// A repair with the same values as the block's still writes a row (the
	// writer does not read blocks) and changes nothing a reader sees.
	if err := db.UpsertCandles(ctx, k, []domain.Candle{fixed}); err != nil {
		t.Fatal(err)
	}
	check("after a repair with the same values")
}

// While movers pack a series in small transactions, readers of every kind
// see each candle once: no duplicate, no hole at the boundary, the values
// as written; a writer of the open candle goes on meanwhile.
func TestCompactionUnderConcurrentReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF15m}
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const n = 6000
	cs := makeCandles(n, start, domain.TF15m, 0.1)
	if err := db.UpsertCandles(ctx, k, cs); err != nil {
		t.Fatal(err)
	}
	cut := cs[n-50].Time
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan string, 16)
	fail := func(msg string) {
		select {
		case errs <- msg:
		default:
		}
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				got, err := db.Candles(ctx, k, n)
				if err != nil {
					fail(err.Error())
					return
				}
				// The open candle's writer changes only the newest.
				if len(got) != n || !sameCandles(got[:n-1], cs[:n-1]) {
					fail("a read during the move differs from the series")
					return
				}
				of, err := db.CandlesOf(ctx, k.Market, k.Exchange, k.Timeframe, []string{k.Symbol}, 1000)
				if err != nil || !sameCandles(of[k.Symbol][:999], cs[n-1000:n-1]) {
					fail("CandlesOf during the move differs from the series")
					return
				}
				latest, err := db.LatestCandleTimes(ctx, k.Market, k.Exchange, k.Timeframe, []string{k.Symbol})
				if err != nil || !latest[k.Symbol].Equal(cs[n-1].Time) {
					fail("LatestCandleTimes during the move")
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // the open candle, written as the push feeds do
		defer wg.Done()
		last := cs[n-1]
		for i := 0; !done.Load(); i++ {
			c := last
			c.Close = last.Close + float64(i%7)/100
			c.High = max(c.High, c.Close)
			if err := db.UpsertCandles(ctx, k, []domain.Candle{c}); err != nil {
				fail(err.Error())
				return
			}
		}
	}()
	var moved atomic.Int64
	var movers sync.WaitGroup
	for range 2 { // two movers of one series take turns
		movers.Add(1)
		go func() {
			defer movers.Done()
			for {
				m, err := db.CompactSeries(ctx, k, cut, 97)
				if err != nil {
					fail(err.Error())
					return
				}
				moved.Add(int64(m))
				if m == 0 {
					return
				}
			}
		}()
	}
	movers.Wait()
	for reads.Load() < 10 && len(errs) == 0 {
		time.Sleep(time.Millisecond) // a few reads after the move too
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if moved.Load() != n-50 {
		t.Errorf("moved %d candles, want %d", moved.Load(), n-50)
	}
}

// Retention deletes the blocks whose newest candle is past the cut-off and
// keeps the others whole.
func TestDeleteCandleBlocksBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "BTC_USDT", Timeframe: domain.TF1h}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := makeCandles(24*90, start, domain.TF1h, 0.3) // January to March
	if err := db.UpsertCandles(ctx, k, cs); err != nil {
		t.Fatal(err)
	}
	compactAll(t, db, k, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 10000)
	blocks, candles, err := db.DeleteCandleBlocksBefore(ctx, domain.TF1h, time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC), 10)
	if err != nil || blocks != 1 || candles != 31*24 {
		t.Fatalf("deleted %d blocks, %d candles (%v), want January's: 1, 744", blocks, candles, err)
	}
	got, err := db.Candles(ctx, k, 10000)
	if err != nil || !sameCandles(got, cs[31*24:]) {
		t.Fatalf("after retention: %d candles (%v), want February on", len(got), err)
	}
}

// A move into the blocks is no change of the series: its version stays
// (migration 00028), so a scorer's cached read goes on extending its kept
// candles instead of reading the series in full, with the same values;
// any other delete still moves the version.
func TestCompactionLeavesTheSeriesVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	k := store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: "ETH_USDT", Timeframe: domain.TF1h}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := makeCandles(1000, start, domain.TF1h, 0.5)
	if err := db.UpsertCandles(ctx, k, cs); err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		t.Helper()
		vs, err := db.CandleSeriesVersions(ctx, k.Market, k.Exchange, k.Timeframe, []string{k.Symbol})
		if err != nil {
			t.Fatal(err)
		}
		return vs[k.Symbol].Version
	}
	cache := store.NewCandleCache(10)
	if _, _, err := db.CachedCandlesOf(ctx, cache, k.Market, k.Exchange, k.Timeframe, []string{k.Symbol}, 500); err != nil {
		t.Fatal(err)
	}
	before := version()
	if n := compactAll(t, db, k, start.Add(900*time.Hour), 300); n != 900 {
		t.Fatalf("moved %d candles, want 900", n)
	}
	if v := version(); v != before {
		t.Fatalf("the move took the version from %d to %d, want it unchanged", before, v)
	}
	got, reads, err := db.CachedCandlesOf(ctx, cache, k.Market, k.Exchange, k.Timeframe, []string{k.Symbol}, 500)
	if err != nil {
		t.Fatal(err)
	}
	if reads.Extended != 1 || reads.Full != 0 || !sameCandles(got[k.Symbol].Candles(), cs[500:]) {
		t.Fatalf("the cached read after the move: %+v, the newest 500 equal: %v", reads, sameCandles(got[k.Symbol].Candles(), cs[500:]))
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM candles WHERE symbol = $1 AND open_time = $2`, k.Symbol, cs[950].Time); err != nil {
		t.Fatal(err)
	}
	if v := version(); v == before {
		t.Fatal("a delete that is not a move left the version as it was")
	}
}

// CandleSymbols lists, per market, exchange and timeframe, the symbols
// with a candle of that timeframe, hot or packed only, each once, sorted:
// never a symbol with candles of other timeframes or exchanges only.
func TestCandleSymbolsOfATimeframe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	r := rand.New(rand.NewPCG(37, 27))
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(m domain.Market, exchange, sym string, tf domain.Timeframe) store.CandleKey {
		t.Helper()
		k := store.CandleKey{Market: m, Exchange: exchange, Symbol: sym, Timeframe: tf}
		if err := db.UpsertCandles(ctx, k, validRandomCandles(r, 40, start, tf)); err != nil {
			t.Fatal(err)
		}
		return k
	}
	put(domain.Crypto, "binance", "BTC_USDT", domain.TF1h)
	put(domain.Crypto, "binance", "BTC_USDT", domain.TF1d)
	put(domain.Crypto, "binance", "ETH_USDT", domain.TF1h)
	put(domain.Crypto, "binance", "AAA_USDT", domain.TF1d)
	put(domain.Crypto, "binance", "ZZZ_USDT", domain.TF5m)
	put(domain.Crypto, "okx", "OKX_USDT", domain.TF1d)
	put(domain.Stocks, "binance", "XYZ", domain.TF1d)
	// Packed whole, its last hot row deleted: in candle_blocks only.
	packed := put(domain.Crypto, "binance", "PACKED_USDT", domain.TF1d)
	compactAll(t, db, packed, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), 150)
	if _, err := db.Pool.Exec(ctx, `DELETE FROM candles WHERE symbol = 'PACKED_USDT'`); err != nil {
		t.Fatal(err)
	}
	// Packed in part: in both tables.
	both := put(domain.Crypto, "binance", "BOTH_USDT", domain.TF1d)
	compactAll(t, db, both, start.AddDate(0, 0, 20), 150)
	for _, c := range []struct {
		m        domain.Market
		exchange string
		tf       domain.Timeframe
		want     []string
	}{
		{domain.Crypto, "binance", domain.TF1d, []string{"AAA_USDT", "BOTH_USDT", "BTC_USDT", "PACKED_USDT"}},
		{domain.Crypto, "binance", domain.TF1h, []string{"BTC_USDT", "ETH_USDT"}},
		{domain.Crypto, "binance", domain.TF5m, []string{"ZZZ_USDT"}},
		{domain.Crypto, "binance", domain.TF4h, nil},
		{domain.Crypto, "okx", domain.TF1d, []string{"OKX_USDT"}},
		{domain.Stocks, "binance", domain.TF1d, []string{"XYZ"}},
		{domain.Forex, "oanda", domain.TF1d, nil},
	} {
		got, err := db.CandleSymbols(ctx, c.m, c.exchange, c.tf)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s/%s %s: %v, want %v", c.m, c.exchange, c.tf, got, c.want)
		}
	}
}
