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

// A catch-up's klines pages, booked as bulk work, stop at 75 % of the
// minute's planned 4,800; the ticker refresh (weight 80, urgent by
// default) still goes in the same minute.
func ExampleWithClass() {
	budget := hostbudget.New(hostbudget.Options{})
	spot := hostbudget.Limit{Name: "binance", Window: time.Minute, Max: 6000}
	now := time.Date(2026, 11, 26, 15, 0, 10, 0, time.UTC)
	horizon := now.Add(65 * time.Second)
	catchUp := hostbudget.WithClass(context.Background(), hostbudget.Bulk)
	pages := 0
	for {
		start, _ := budget.Reserve(catchUp, spot, 2, now, horizon)
		if start.After(now) {
			fmt.Println("catch-up pages this minute:", pages, "then from", start.Format(time.TimeOnly))
			break
		}
		pages++
	}
	start, _ := budget.Reserve(context.Background(), spot, 80, now, horizon)
	fmt.Println("ticker refresh at", start.Format(time.TimeOnly))
	// Output:
	// catch-up pages this minute: 1800 then from 15:01:00
	// ticker refresh at 15:00:10
}
