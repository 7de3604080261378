package feeds_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/archivetest"
)

func newArchive(t *testing.T) (*archivetest.Archive, *feeds.BinanceArchive) {
	t.Helper()
	gen := archivetest.Small()
	srv := httptest.NewServer(gen)
	t.Cleanup(srv.Close)
	return gen, &feeds.BinanceArchive{BaseURL: srv.URL, HTTP: srv.Client()}
}

// TestArchiveSymbolsListsDelisted: the listing (two entries a page)
// gives every symbol of the instrument, the delisted one included.
func TestArchiveSymbolsListsDelisted(t *testing.T) {
	t.Parallel()
	_, a := newArchive(t)
	got, unknown, err := a.Symbols(context.Background(), "spot")
	if err != nil {
		t.Fatal(err)
	}
	want := []feeds.ArchiveSymbol{{"BTCUSDT", "BTC_USDT"}, {"ETHUSDT", "ETH_USDT"}, {"LUNAUSDT", "LUNA_USDT"}}
	if diff := cmp.Diff(want, got); diff != "" || len(unknown) != 0 {
		t.Errorf("symbols (-want +got):\n%s unknown %v", diff, unknown)
	}
}

// TestArchiveFilesAndUnits: a series' files are listed monthly then
// daily; a month in milliseconds and one in microseconds (2025-01, spot)
// parse to the generator's candles.
func TestArchiveFilesAndUnits(t *testing.T) {
	t.Parallel()
	gen, a := newArchive(t)
	ctx := context.Background()
	files, err := a.Files(ctx, "spot", "ETHUSDT", domain.TF1h)
	if err != nil {
		t.Fatal(err)
	}
	// 2024-11, 2024-12, 2025-01 monthly; 2025-01-01..31 and 2025-02-01..14 daily.
	if len(files) != 3+31+14 {
		t.Fatalf("%d files, want 48", len(files))
	}
	if files[0].Period != "2024-11" || files[2].Period != "2025-01" || files[3].Period != "2025-01-01" || files[len(files)-1].Period != "2025-02-14" {
		t.Errorf("files out of order: %v %v %v %v", files[0].Period, files[2].Period, files[3].Period, files[len(files)-1].Period)
	}
	sym := &gen.Symbols[1]
	for _, f := range []feeds.ArchiveFile{files[1], files[2]} {
		got, sum, err := a.Fetch(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum) != 64 {
			t.Errorf("%s: sum %q", f.Key, sum)
		}
		want := gen.Candles(sym, domain.TF1h, f.Start, f.End)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", f.Period, diff)
		}
	}
}

// TestArchiveFuturesHeader: futures files parse with and without their
// header row.
func TestArchiveFuturesHeader(t *testing.T) {
	t.Parallel()
	gen, a := newArchive(t)
	ctx := context.Background()
	files, err := a.Files(ctx, "futures/um", "BTCUSDT", domain.TF1d)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files[:3] { // 2024-11, 2024-12 without, 2025-01 with a header
		got, _, err := a.Fetch(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		if want := gen.Candles(&gen.Symbols[3], domain.TF1d, f.Start, f.End); !cmp.Equal(want, got) {
			t.Errorf("%s: %d candles, want %d equal ones", f.Period, len(got), len(want))
		}
	}
}

// TestArchiveBadChecksumRefused: a file whose SHA-256 is not its
// .CHECKSUM's is refused with ErrArchiveChecksum.
func TestArchiveBadChecksumRefused(t *testing.T) {
	t.Parallel()
	_, a := newArchive(t)
	f := feeds.ArchiveFile{Key: "data/spot/monthly/klines/BTCUSDT/1d/BTCUSDT-1d-2024-12.zip", Period: "2024-12",
		Start: time.Date(2024, 12, 1, 0, 0, 0, 0, time.UTC)}
	if _, _, err := a.Fetch(context.Background(), f); !errors.Is(err, feeds.ErrArchiveChecksum) {
		t.Fatalf("err = %v, want ErrArchiveChecksum", err)
	}
	f.Key = "data/spot/monthly/klines/BTCUSDT/1d/BTCUSDT-1d-2019-12.zip"
	if _, _, err := a.Fetch(context.Background(), f); !errors.Is(err, feeds.ErrArchiveChecksum) {
		t.Fatalf("missing file: err = %v, want ErrArchiveChecksum (no .CHECKSUM)", err)
	}
}

// TestParseArchiveKlines: units told apart, a header skipped only as the
// first line, bad rows refused.
func TestParseArchiveKlines(t *testing.T) {
	t.Parallel()
	ms := "1735603200000,1.5,2,1,1.8,10,1735689599999,0,0,0,0,0\r\n"
	us := "1735689600000000,1.8,2.5,1.7,2,11,1735775999999999,0,0,0,0,0\n"
	got, err := feeds.ParseArchiveKlines([]byte("open_time,open,high,low,close,volume\n" + ms + us))
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Candle{
		{Time: time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC), Open: 1.5, High: 2, Low: 1, Close: 1.8, Volume: 10},
		{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Open: 1.8, High: 2.5, Low: 1.7, Close: 2, Volume: 11},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{ms + "open_time,open\n", "1735603200000,1.5,2\n", ms + "x,1,1,1,1,1\n", "1735603200000,1.5,2,1,NaN,1\n"} {
		if _, err := feeds.ParseArchiveKlines([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseArchiveKlines: outside input never panics, and what parses
// has open times and finite values.
func FuzzParseArchiveKlines(f *testing.F) {
	f.Add([]byte("1735603200000,1.5,2,1,1.8,10,1735689599999,0,0,0,0,0\n"))
	f.Add([]byte("open_time,open\n1735689600000000,1,1,1,1,1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := feeds.ParseArchiveKlines(data)
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.Time.IsZero() {
				t.Fatalf("zero time from %q", data)
			}
		}
	})
}
