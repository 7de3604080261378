package exchangesim_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
)

// TestArchiveServed: with ArchiveMonths the simulator serves the spot
// universe's archive under /archive, readable by feeds.BinanceArchive.
func TestArchiveServed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	a := serveArchive(t, now, 2, 12)
	ctx := context.Background()
	syms, _, err := a.Symbols(ctx, "spot")
	if err != nil || len(syms) != 12 {
		t.Fatalf("symbols %v, %v; want 12", syms, err)
	}
	files, err := a.Files(ctx, "spot", syms[0].Exchange, domain.TF4h)
	if err != nil || len(files) != 2+9 { // 2026-01, 2026-02, 2026-03-01..09
		t.Fatalf("files %d, %v; want 11", len(files), err)
	}
	cs, _, err := a.Fetch(ctx, files[1])
	if err != nil || len(cs) != 28*6 {
		t.Fatalf("2026-02 4h: %d candles, %v; want 168", len(cs), err)
	}
}

// TestArchiveDelistedBeyondTheUniverse: more archive symbols than spot
// pairs adds archive-only pairs, delisted before the current month.
func TestArchiveDelistedBeyondTheUniverse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	a := serveArchive(t, now, 24, 40)
	ctx := context.Background()
	syms, _, err := a.Symbols(ctx, "spot")
	if err != nil || len(syms) != 40 {
		t.Fatalf("symbols %d, %v; want 40", len(syms), err)
	}
	gone := 0
	for _, s := range syms {
		if !strings.HasPrefix(s.Exchange, "GONE") {
			continue
		}
		gone++
		files, err := a.Files(ctx, "spot", s.Exchange, domain.TF1d)
		if err != nil || len(files) < 12 {
			t.Fatalf("%s: %d files, %v; want a year or more of monthly files", s.Exchange, len(files), err)
		}
		last := files[len(files)-1]
		if cs, _, err := a.Fetch(ctx, last); err != nil || len(cs) == 0 || !cs[len(cs)-1].Time.Before(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("%s: its last file %v (%d candles, %v) runs into the current month", s.Exchange, last, len(cs), err)
		}
	}
	if gone != 10 {
		t.Errorf("%d archive-only symbols, want 10", gone)
	}
}

// serveArchive serves a 30-pair simulator's archive of months and
// symbols and returns its reader.
func serveArchive(t *testing.T, now time.Time, months, symbols int) *feeds.BinanceArchive {
	t.Helper()
	sim := exchangesim.New(exchangesim.Config{Spot: 30, Perpetual: 2, ArchiveMonths: months, ArchiveSymbols: symbols, Now: func() time.Time { return now }})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &feeds.BinanceArchive{BaseURL: srv.URL + "/archive", HTTP: srv.Client()}
}
