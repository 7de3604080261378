package archiveimport_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/archiveimport"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/archivetest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

var spot = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}

type testBundle struct {
	gen *archivetest.Archive
	a   *feeds.BinanceArchive
	db  *store.DB
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	gen := archivetest.Small()
	srv := httptest.NewServer(gen)
	t.Cleanup(srv.Close)
	return &testBundle{gen: gen, a: &feeds.BinanceArchive{BaseURL: srv.URL, HTTP: srv.Client()}, db: storetest.New(t)}
}

func (b *testBundle) options() archiveimport.Options {
	return archiveimport.Options{
		Combination: spot,
		Timeframes:  []domain.Timeframe{domain.TF1d, domain.TF4h, domain.TF1h},
		From:        time.Date(2024, 11, 1, 0, 0, 0, 0, time.UTC),
		To:          time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC),
		Concurrency: 2,
		BatchRows:   500,
		Now:         func() time.Time { return b.gen.Now },
	}
}

func key(sym string, tf domain.Timeframe) store.CandleKey {
	return store.CandleKey{Market: domain.Crypto, Exchange: "binance", Symbol: sym, Timeframe: tf}
}

func (b *testBundle) stored(t *testing.T, db *store.DB, k store.CandleKey) []domain.Candle {
	t.Helper()
	cs, err := db.Candles(context.Background(), k, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestImportSmallArchive: the generated tree's every quirk: milliseconds
// and microseconds (2025-01) stored at the same open times, monthly files
// then the current month's daily ones, the bad checksum refused and the
// rest loaded, the gap and the refused month reported, the delisted
// symbol recorded as delisted with its candles kept.
func TestImportSmallArchive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rep, err := archiveimport.Run(ctx, b.a, b.db, "spot", b.options())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Series != 9 || rep.SeriesDone != 9 {
		t.Errorf("series %d, done %d, want 9", rep.Series, rep.SeriesDone)
	}
	// BTC and ETH: 3 months and 14 days a timeframe; LUNA 2 months; one refused.
	if want := 2*3*(3+14) + 3*2 - 1; rep.Files != want {
		t.Errorf("files loaded %d, want %d", rep.Files, want)
	}
	if len(rep.Refused) != 1 || !strings.HasSuffix(rep.Refused[0].Key, "BTCUSDT-1d-2024-12.zip") {
		t.Errorf("refused %+v, want BTCUSDT 1d 2024-12", rep.Refused)
	}
	from, to := b.options().From, b.gen.Now.AddDate(0, 0, -1).Add(24*time.Hour)
	eth := &b.gen.Symbols[1]
	if diff := cmp.Diff(b.gen.Candles(eth, domain.TF1h, from, to), b.stored(t, b.db, key("ETH_USDT", domain.TF1h))); diff != "" {
		t.Errorf("ETH_USDT 1h (-want +got):\n%s", diff)
	}
	btc := b.stored(t, b.db, key("BTC_USDT", domain.TF1d))
	if len(btc) != 30+31+14 || btc[29].Time.Day() != 30 || btc[30].Time.Month() != time.January {
		t.Errorf("BTC_USDT 1d: %d candles, want November, January and February 1-14 (December refused)", len(btc))
	}
	d := func(m time.Month, day, h int) time.Time { return time.Date(2024, m, day, h, 0, 0, 0, time.UTC) }
	want := []archiveimport.Gap{
		{Series: key("BTC_USDT", domain.TF1d), From: d(12, 1, 0), To: d(12, 31, 0), Missing: 31},
		{Series: key("ETH_USDT", domain.TF1d), From: d(12, 10, 0), To: d(12, 12, 0), Missing: 3},
		{Series: key("ETH_USDT", domain.TF1h), From: d(12, 10, 0), To: d(12, 12, 23), Missing: 72},
		{Series: key("ETH_USDT", domain.TF4h), From: d(12, 10, 0), To: d(12, 12, 20), Missing: 18},
	}
	if diff := cmp.Diff(want, rep.Gaps); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	if !slices.Equal(rep.Delisted, []string{"LUNA_USDT"}) {
		t.Errorf("delisted %v, want LUNA_USDT", rep.Delisted)
	}
	var delistedAt time.Time
	if err := b.db.Pool.QueryRow(ctx, `SELECT delisted_at FROM listings WHERE market = 'crypto' AND exchange = 'binance'
		AND instrument = 'spot' AND symbol = 'LUNA_USDT'`).Scan(&delistedAt); err != nil {
		t.Fatal(err)
	}
	if !delistedAt.Equal(time.Date(2024, 12, 20, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("LUNA_USDT delisted at %s, want 2024-12-20", delistedAt)
	}
	if luna := b.stored(t, b.db, key("LUNA_USDT", domain.TF1d)); len(luna) != 30+19 {
		t.Errorf("LUNA_USDT keeps %d daily candles, want 49", len(luna))
	}
}

// TestImportResumesAndIsIdempotent: an import cancelled partway and run
// again stores exactly what one uninterrupted run stores; a third run
// loads and writes nothing, and still reports the gaps.
func TestImportResumesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	o := b.options()
	batches := 0
	o.Progress = func(p archiveimport.Progress) {
		if !p.Finished {
			if batches++; batches == 3 {
				cancel()
			}
		}
	}
	first, err := archiveimport.Run(ctx, b.a, b.db, "spot", o)
	if err == nil || first.Files == 0 {
		t.Fatalf("interrupted run: err %v after %d files, want context.Canceled after some", err, first.Files)
	}
	o.Progress = nil
	second, err := archiveimport.Run(context.Background(), b.a, b.db, "spot", o)
	if err != nil {
		t.Fatal(err)
	}
	if second.Skipped < first.Files || second.Files+second.Skipped != 2*3*(3+14)+3*2-1 {
		t.Errorf("resumed run loaded %d and skipped %d after %d loaded", second.Files, second.Skipped, first.Files)
	}
	clean := storetest.New(t)
	if _, err := archiveimport.Run(context.Background(), b.a, clean, "spot", o); err != nil {
		t.Fatal(err)
	}
	for _, sym := range []string{"BTC_USDT", "ETH_USDT", "LUNA_USDT"} {
		for _, tf := range o.Timeframes {
			if diff := cmp.Diff(b.stored(t, clean, key(sym, tf)), b.stored(t, b.db, key(sym, tf))); diff != "" {
				t.Errorf("%s %s: resumed differs from one run (-one +resumed):\n%s", sym, tf, diff)
			}
		}
	}
	third, err := archiveimport.Run(context.Background(), b.a, b.db, "spot", o)
	if err != nil {
		t.Fatal(err)
	}
	// The refused file is tried again, and refused again.
	if third.Files != 0 || third.Written != 0 || len(third.Refused) != 1 || len(third.Gaps) != 4 {
		t.Errorf("third run: %d files, %d written, %d refused, %d gaps; want 0, 0, 1, 4", third.Files, third.Written, len(third.Refused), len(third.Gaps))
	}
	// --recheck downloads every file again: none was replaced, none is reloaded.
	o.Recheck = true
	rechecked, err := archiveimport.Run(context.Background(), b.a, b.db, "spot", o)
	if err != nil {
		t.Fatal(err)
	}
	if rechecked.Files != 0 || rechecked.Skipped != third.Skipped || rechecked.Candles != 0 {
		t.Errorf("recheck: %d files reloaded, %d unchanged; want 0 and %d", rechecked.Files, rechecked.Skipped, third.Skipped)
	}
}

// TestImportSymbolsAndRetention: --symbols limits the import (an unknown
// one is reported), and a timeframe's start drops older candles.
func TestImportSymbolsAndRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.options()
	o.Symbols = []string{"ETH_USDT", "DOGE_USDT"}
	o.Starts = map[domain.Timeframe]time.Time{domain.TF1h: time.Date(2025, 2, 10, 0, 0, 0, 0, time.UTC)}
	rep, err := archiveimport.Run(context.Background(), b.a, b.db, "spot", o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Series != 3 || !slices.Equal(rep.Missing, []string{"DOGE_USDT"}) {
		t.Errorf("series %d, missing %v; want 3 and DOGE_USDT", rep.Series, rep.Missing)
	}
	if got := b.stored(t, b.db, key("ETH_USDT", domain.TF1h)); len(got) != 5*24 {
		t.Errorf("ETH_USDT 1h from 2025-02-10: %d candles, want 120", len(got))
	}
	if got := b.stored(t, b.db, key("BTC_USDT", domain.TF1d)); len(got) != 0 {
		t.Errorf("BTC_USDT loaded without being asked: %d candles", len(got))
	}
}
