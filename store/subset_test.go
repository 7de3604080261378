package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// A triggered scoring reads only the assets it scores: TickersOf,
// ScoredState and FundamentalsRaw answer for the given symbols only, and
// for none when given none (never for the whole market); given nil,
// ScoredState and FundamentalsRaw answer for every asset. ScoredState
// carries what scoring compares; FundamentalsRaw decodes on demand.
func TestReadsOfGivenSymbolsOnly(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	if err := db.ReplaceTickers(ctx, spot, []domain.Ticker{{Symbol: "BTC_USDT", Price: 1, Volume: 1, UpdatedAt: now},
		{Symbol: "ETH_USDT", Price: 2, Volume: 1, UpdatedAt: now}, {Symbol: "SOL_USDT", Price: 3, Volume: 1, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	if err := db.UpsertFundamentals(ctx, domain.Crypto, map[string]map[string]float64{
		"BTC_USDT": {"x": 1}, "ETH_USDT": {"x": 2}, "SOL_USDT": {"x": 3}}, now); err != nil {
		t.Fatal(err)
	}
	var recs []store.AnalyticsRecord
	for _, sym := range []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"} {
		recs = append(recs, analyticsRecord(sym, 15, analytics.VerdictNeutral, now))
	}
	if _, err := db.SaveAnalytics(ctx, recs, nil); err != nil {
		t.Fatal(err)
	}
	some := []string{"SOL_USDT", "BTC_USDT", "XRP_USDT"}
	ts, err := db.TickersOf(ctx, spot, some)
	if err != nil || len(ts) != 2 || ts[0].Symbol != "BTC_USDT" || ts[1].Symbol != "SOL_USDT" || ts[1].Price != 3 {
		t.Fatalf("tickers of %v: %+v (%v)", some, ts, err)
	}
	as, err := db.ScoredState(ctx, domain.Crypto, recs[0].Style, some)
	slices.SortFunc(as, func(a, b store.AnalyticsRecord) int { return strings.Compare(a.Symbol, b.Symbol) })
	if err != nil || len(as) != 2 || as[0].Symbol != "BTC_USDT" || as[1].Symbol != "SOL_USDT" {
		t.Fatalf("scored state of %v: %+v (%v)", some, as, err)
	}
	want := recs[0]
	if got := as[0]; got.OverallScore != want.OverallScore || got.Verdict != want.Verdict || !got.CandleTime.Equal(want.CandleTime) ||
		got.CandleClose != want.CandleClose || !got.UpdatedAt.Equal(want.UpdatedAt) || got.Market != domain.Crypto || got.Style != want.Style {
		t.Fatalf("scored state of BTC_USDT: %+v, want the stored report's %+v", got, want)
	}
	fs, err := db.FundamentalsRaw(ctx, domain.Crypto, now, some)
	if err != nil || len(fs) != 2 || fs["SOL_USDT"].Inputs != nil || !fs["BTC_USDT"].UpdatedAt.Equal(now) {
		t.Fatalf("fundamentals of %v: %+v (%v), want two, undecoded", some, fs, err)
	}
	if in, err := fs["SOL_USDT"].Decoded(); err != nil || in["x"] != 3 {
		t.Fatalf("SOL_USDT's fundamentals decoded: %v (%v), want x = 3", in, err)
	}
	if as, err := db.ScoredState(ctx, domain.Crypto, recs[0].Style, []string{}); err != nil || len(as) != 0 {
		t.Fatalf("scored state of no symbols: %+v (%v)", as, err)
	}
	if as, err := db.ScoredState(ctx, domain.Crypto, recs[0].Style, nil); err != nil || len(as) != 3 {
		t.Fatalf("scored state of every asset: %+v (%v)", as, err)
	}
	if fs, err := db.FundamentalsRaw(ctx, domain.Crypto, now, nil); err != nil || len(fs) != 3 {
		t.Fatalf("fundamentals of every asset: %+v (%v)", fs, err)
	}
	if ts, err := db.TickersOf(ctx, spot, nil); err != nil || len(ts) != 0 {
		t.Fatalf("tickers of no symbols: %+v (%v)", ts, err)
	}
	if fs, err := db.FundamentalsRaw(ctx, domain.Crypto, now, []string{}); err != nil || len(fs) != 0 {
		t.Fatalf("fundamentals of no symbols: %+v (%v)", fs, err)
	}
	if all, err := db.Tickers(ctx, spot); err != nil || len(all) != 3 {
		t.Fatalf("every ticker: %+v (%v)", all, err)
	}
}
