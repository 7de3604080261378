package hostbudget_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
)

// The host budgets under the Redis-backed counters' outage policy, on a
// real redis-server of the test's own, frozen (SIGSTOP) and then killed
// (SIGKILL): each process books in its own share of the budget, the
// outage is logged once when it starts and once when it ends, and ends
// without traffic once Redis answers; the budget is shared again.
func TestHostBudgetFollowsTheOutagePolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	opts, err := rediskeys.BackgroundClientOptions(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := opts.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	var logs redistest.LogBuffer
	b := hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: "p:", Headroom: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	other := hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: "p:", Headroom: 1})
	l := hostbudget.Limit{Name: "h", Window: time.Minute, Max: 100} // a local share of 25
	ctx := context.Background()
	// book fills the window at `at` with weight-5 requests and returns the weight booked.
	book := func(bud *hostbudget.Budget, at time.Time) (booked int) {
		for range 30 {
			if _, ok := bud.Reserve(ctx, l, 5, at, at); !ok {
				break
			}
			booked += 5
		}
		return booked
	}
	// Windows well ahead of now, one per step, so none ends during the test.
	base := time.Now().Truncate(time.Minute).Add(10 * time.Minute).Add(5 * time.Second)
	for i, fault := range []struct {
		name         string
		break_, heal func()
	}{
		{"paused", srv.Pause, srv.Resume},
		{"killed", srv.Kill, srv.Start},
	} {
		during, after := base.Add(time.Duration(4*i)*time.Minute), base.Add(time.Duration(4*i+1)*time.Minute)
		fault.break_()
		if got := book(b, during); got != 25 || !b.Degraded() {
			t.Fatalf("%s: booked %d during the outage, want the local share 25; degraded %v", fault.name, got, b.Degraded())
		}
		fault.heal()
		for deadline := time.Now().Add(15 * time.Second); b.Degraded(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the outage did not end after Redis came back", fault.name)
			}
		}
		if got := book(b, after); got != 100 {
			t.Fatalf("%s: booked %d after the outage, want the planned 100", fault.name, got)
		}
		if got := book(other, after); got != 0 {
			t.Fatalf("%s: another process booked %d in the window this one filled: not shared", fault.name, got)
		}
		if n, m := logs.Count("redis counter outage:"), logs.Count("redis counter outage over"); n != i+1 || m != i+1 {
			t.Fatalf("%s: outage logged %d times, its end %d times; want %d each:\n%s", fault.name, n, m, i+1, logs.String())
		}
	}
}
