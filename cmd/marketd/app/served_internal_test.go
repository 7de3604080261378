package app

import (
	"context"
	"slices"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
)

// TestWarmupSkipsUnservedSources: nothing is scored yet; warming_up waits
// for the markets with an analytics source among the served combinations,
// and not for the others, which are never scheduled.
func TestWarmupSkipsUnservedSources(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	all, err := analyticsWarmup(db, "global", func(domain.Combination) bool { return true })(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all, "crypto/swing") || !slices.Contains(all, "forex/swing") || !slices.Contains(all, "stocks/swing") {
		t.Fatalf("every source served: warming_up %v, want every market", all)
	}
	cfg := Config{Region: "global", Feeds: []string{"binance"}}
	got, err := analyticsWarmup(db, cfg.Region, cfg.served())(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "crypto/swing") || slices.Contains(got, "forex/swing") || slices.Contains(got, "stocks/swing") {
		t.Errorf("binance alone: warming_up %v, want crypto's styles only", got)
	}
	// okx alone: crypto's source is okx spot, which is served and scored.
	cfg.Feeds = []string{"okx"}
	got, err = analyticsWarmup(db, cfg.Region, cfg.served())(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "crypto/swing") || slices.Contains(got, "forex/swing") {
		t.Errorf("okx alone: warming_up %v, want crypto's styles only", got)
	}
}
