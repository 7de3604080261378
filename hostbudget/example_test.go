package hostbudget_test

import (
	"context"
	"fmt"
	"time"

	"github.com/marketscreener/market/hostbudget"
)

// A burst of Binance spot klines (weight 2 each) fills the minute's planned
// 80 % of 6,000; the next request is booked at the next minute's start,
// and a 429's Retry-After holds every request after it.
func ExampleBudget_Reserve() {
	budget := hostbudget.New(hostbudget.Options{}) // no Redis: this process alone
	spot := hostbudget.Limit{Name: "binance", Window: time.Minute, Max: 6000}
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 15, 0, 10, 0, time.UTC)
	horizon := now.Add(65 * time.Second)
	for range 2400 {
		budget.Reserve(ctx, spot, 2, now, horizon)
	}
	start, _ := budget.Reserve(ctx, spot, 2, now, horizon)
	fmt.Println("after 4,800 weight:", start.Format(time.TimeOnly))

	budget.Ban(ctx, spot, now, now.Add(90*time.Second), 429)
	_, ok := budget.Reserve(ctx, spot, 2, now, horizon)
	fmt.Println("booked inside a 90 s Retry-After:", ok)
	// Output:
	// after 4,800 weight: 15:01:00
	// booked inside a 90 s Retry-After: false
}
