package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// A symbol its feed stops listing leaves the analytics list and the top
// setups, keeps its report, and comes back when listed again; one listed
// by another combination of the market stays; recording the same list
// twice changes nothing.
func TestDelistedAssetsLeaveTheLists(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	nyse := domain.Combination{Market: domain.Stocks, Exchange: "nyse", Instrument: "stock"}
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	var recs []store.AnalyticsRecord
	for i, sym := range []string{"BRK.B", "MOVED", "OLDCO"} {
		r := analyticsRecord(sym, 40+i, analytics.VerdictGrowth, t0)
		r.Market, r.Exchange = domain.Stocks, "nyse"
		recs = append(recs, r)
	}
	if _, err := db.SaveAnalytics(ctx, recs, nil); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		list, err := db.AnalyticsList(ctx, domain.Stocks, analytics.Swing)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range list {
			out = append(out, r.Symbol)
		}
		top, err := db.TopSetups(ctx, []domain.Market{domain.Stocks}, "", analytics.Swing, 10)
		if err != nil || len(top) != len(out) {
			t.Fatalf("top setups %d, %v; want the %d listed", len(top), err, len(out))
		}
		return out
	}
	if got := listed(); !slices.Equal(got, []string{"BRK.B", "MOVED", "OLDCO"}) {
		t.Fatalf("before any list: %v, want every report (no listing known is listed)", got)
	}
	sync := func(c domain.Combination, at time.Time, want [2]int, syms ...string) {
		t.Helper()
		l, d, err := db.SyncListings(ctx, c, syms, at)
		if err != nil || l != want[0] || d != want[1] {
			t.Fatalf("sync %s %v: listed %d, delisted %d, %v; want %v", c, syms, l, d, err, want)
		}
	}
	sync(nyse, t0, [2]int{3, 0}, "BRK.B", "MOVED", "OLDCO")
	sync(nyse, t0, [2]int{0, 0}, "BRK.B", "MOVED", "OLDCO")
	sync(nyse, t0.Add(24*time.Hour), [2]int{0, 2}, "BRK.B")
	sync(nasdaq, t0.Add(24*time.Hour), [2]int{1, 0}, "MOVED")
	if got := listed(); !slices.Equal(got, []string{"BRK.B", "MOVED"}) {
		t.Errorf("after OLDCO's delisting: %v, want BRK.B and MOVED (now on nasdaq)", got)
	}
	if rep, err := db.AnalyticsReport(ctx, domain.Stocks, "OLDCO", analytics.Swing); err != nil || rep.OverallScore != 42 {
		t.Errorf("the delisted asset's report: %+v, %v; want it kept", rep, err)
	}
	sync(nyse, t0.Add(48*time.Hour), [2]int{1, 0}, "BRK.B", "OLDCO")
	if got := listed(); !slices.Equal(got, []string{"BRK.B", "MOVED", "OLDCO"}) {
		t.Errorf("relisted: %v", got)
	}
}
