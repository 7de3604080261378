package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// Two writers of the same fundamentals rows at once (a refresh every
// minute beside another), repeatedly: they take the rows in one order, so
// neither is ever a deadlock's victim (40P01).
func TestConcurrentFundamentalsWritersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	rows := map[string]map[string]float64{}
	for i := range 200 {
		rows[fmt.Sprintf("SYM%03d_USDT", i)] = map[string]float64{"funding_rate": float64(i)}
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for round := range 15 {
		concurrently(t, func(int) error {
			return db.UpsertFundamentals(ctx, domain.Crypto, rows, at.Add(time.Duration(round)*time.Minute))
		})
	}
}

// Two scoring runs saving the same reports in opposite orders,
// repeatedly: SaveAnalytics locks them in the primary key's order.
func TestConcurrentAnalyticsSavesInOppositeOrdersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for round := range 15 {
		var recs []store.AnalyticsRecord
		for i := range 200 {
			recs = append(recs, analyticsRecord(fmt.Sprintf("SYM%03d_USDT", i), i%50, analytics.VerdictNeutral, t0.Add(time.Duration(round)*time.Minute)))
		}
		reversed := slices.Clone(recs)
		slices.Reverse(reversed)
		concurrently(t, func(w int) error {
			run := recs
			if w == 1 {
				run = reversed
			}
			_, err := db.SaveAnalytics(ctx, run, nil)
			return err
		})
	}
}

// concurrently runs two writers at once and fails the test on an error.
func concurrently(t *testing.T, write func(writer int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	start := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[w] = write(w)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
