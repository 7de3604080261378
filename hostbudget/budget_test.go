package hostbudget_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/redistest"
)

var spot = hostbudget.Limit{Name: "binance", Window: time.Minute, Max: 6000}

// t0 is a window's start; tests book at fixed times, so nothing depends
// on the wall clock.
var t0 = time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)

// twoProcesses returns two budgets on one Redis prefix, as two worker
// processes of one deployment have.
func twoProcesses(t *testing.T) (a, b *hostbudget.Budget, rdb *redis.Client, prefix string) {
	t.Helper()
	rdb = redistest.Client(t)
	prefix = redistest.Prefix(t)
	a = hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix})
	b = hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix})
	return a, b, rdb, prefix
}

// TestTwoProcessesShareOneBudget: concurrent bookings of two processes
// never put more than the planned 80 % in a window, and the weight that
// does not fit goes to the next windows, none lost.
func TestTwoProcessesShareOneBudget(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoProcesses(t)
	ctx := context.Background()
	horizon := t0.Add(10 * time.Minute)
	var mu sync.Mutex
	perWindow := map[time.Time]int{}
	var wg sync.WaitGroup
	for i := range 3000 { // 6,000 weight of klines: more than a window plans
		budget := a
		if i%2 == 1 {
			budget = b
		}
		wg.Go(func() {
			start, ok := budget.Reserve(ctx, spot, 2, t0.Add(time.Second), horizon)
			if !ok {
				t.Errorf("booking %d refused within 10 minutes", i)
				return
			}
			mu.Lock()
			perWindow[start.Truncate(time.Minute)] += 2
			mu.Unlock()
		})
	}
	wg.Wait()
	planned := a.Planned(spot)
	if planned != 4800 {
		t.Fatalf("planned %d, want 80 %% of 6000", planned)
	}
	total := 0
	for w, used := range perWindow {
		total += used
		if used > planned {
			t.Errorf("window %s holds %d > planned %d", w.Format(time.TimeOnly), used, planned)
		}
	}
	if total != 6000 || perWindow[t0] != planned || perWindow[t0.Add(time.Minute)] != 1200 {
		t.Errorf("bookings by window %v, want 4800 then 1200", perWindow)
	}
}

// TestBanPausesEveryProcess: a 429's Retry-After recorded by one process
// holds the other's bookings until it ends; a shorter ban later does not
// shorten it.
func TestBanPausesEveryProcess(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoProcesses(t)
	ctx := context.Background()
	at := t0.Add(10 * time.Second)
	a.Ban(ctx, spot, at, at.Add(7*time.Second), 429)
	a.Ban(ctx, spot, at, at.Add(3*time.Second), 429)
	start, ok := b.Reserve(ctx, spot, 2, at, at.Add(time.Minute))
	if !ok || !start.Equal(at.Add(7*time.Second)) {
		t.Errorf("start %s ok %v, want the ban's end %s", start, ok, at.Add(7*time.Second))
	}
	if got := b.BannedUntil(ctx, spot); !got.Equal(at.Add(7 * time.Second)) {
		t.Errorf("BannedUntil %s", got)
	}
	// A 418's ban beyond the caller's patience books nothing.
	a.Ban(ctx, spot, at, at.Add(2*time.Hour), 418)
	if start, ok := b.Reserve(ctx, spot, 2, at, at.Add(time.Minute)); ok {
		t.Errorf("booked at %s during a 2 h ban", start)
	}
}

// TestObserveRaisesTheCount: the provider's count replaces a lower local
// one, so weight spent by others on the IP is planned around.
func TestObserveRaisesTheCount(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoProcesses(t)
	ctx := context.Background()
	at := t0.Add(30 * time.Second)
	a.Observe(ctx, spot, at, 4790)
	if start, ok := b.Reserve(ctx, spot, 20, at, at.Add(2*time.Minute)); !ok || !start.Equal(t0.Add(time.Minute)) {
		t.Errorf("start %s ok %v, want the next window", start, ok)
	}
	a.Observe(ctx, spot, at, 100) // lower: ignored
	if start, _ := b.Reserve(ctx, spot, 20, at, at.Add(2*time.Minute)); !start.Equal(t0.Add(time.Minute)) {
		t.Errorf("start %s after a lower count, want the next window still", start)
	}
}

// TestWindowEdgeIsNotBooked: a request booked in the last moments of a
// window goes at the next one's start, so the provider cannot count it
// in a window the budget did not book it in.
func TestWindowEdgeIsNotBooked(t *testing.T) {
	t.Parallel()
	a, _, _, _ := twoProcesses(t)
	at := t0.Add(59*time.Second + 500*time.Millisecond)
	if start, ok := a.Reserve(context.Background(), spot, 2, at, at.Add(time.Minute)); !ok || !start.Equal(t0.Add(time.Minute)) {
		t.Errorf("start %s ok %v, want %s", start, ok, t0.Add(time.Minute))
	}
}

// TestRedisDownFallsBackToALocalShare: with Redis unreachable, a process
// books within a quarter of the planned budget and still honours the bans
// it has seen.
func TestRedisDownFallsBackToALocalShare(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	b := hostbudget.New(hostbudget.Options{Redis: dead, Prefix: "unused:"})
	ctx := context.Background()
	at := t0.Add(time.Second)
	booked := 0
	for {
		start, ok := b.Reserve(ctx, spot, 100, at, at.Add(time.Minute))
		if !ok || !start.Equal(at) {
			break
		}
		booked += 100
	}
	if booked != 1200 {
		t.Errorf("booked %d in the window without Redis, want a quarter of 4800", booked)
	}
	b.Ban(ctx, spot, at, at.Add(5*time.Minute), 418)
	if start, ok := b.Reserve(ctx, spot, 2, at, at.Add(time.Minute)); ok {
		t.Errorf("booked at %s during a ban without Redis", start)
	}
}

// TestBanOnlyHost: a host without a weight budget books everything at
// once but still waits out its bans.
func TestBanOnlyHost(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoProcesses(t)
	ctx := context.Background()
	oanda := hostbudget.Limit{Name: "oanda"}
	at := t0.Add(time.Second)
	for range 1000 {
		if start, ok := a.Reserve(ctx, oanda, 1, at, at); !ok || !start.Equal(at) {
			t.Fatalf("start %s ok %v on a host without a budget", start, ok)
		}
	}
	a.Ban(ctx, oanda, at, at.Add(2*time.Second), 429)
	if start, ok := b.Reserve(ctx, oanda, 1, at, at.Add(time.Minute)); !ok || !start.Equal(at.Add(2*time.Second)) {
		t.Errorf("start %s ok %v, want the ban's end", start, ok)
	}
}

// fill books weight-2 requests of ctx's class from at, concurrently, until
// the window holding at refuses them, and returns the weight booked.
func fill(t *testing.T, ctx context.Context, b *hostbudget.Budget, at time.Time) int {
	t.Helper()
	var mu sync.Mutex
	booked := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				// The horizon is at: only the window holding at is asked.
				if _, ok := b.Reserve(ctx, spot, 2, at, at); !ok {
					return
				}
				mu.Lock()
				booked += 2
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return booked
}

// TestBulkLeavesTheUrgentShare: bulk bookings of two processes, racing,
// stop at 75 % of the planned weight of a window, and the rest is still
// there for urgent ones of either process; urgent work may take a whole
// window, and bulk work then gets none of it.
func TestBulkLeavesTheUrgentShare(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoProcesses(t)
	bulk := hostbudget.WithClass(context.Background(), hostbudget.Bulk)
	urgent := context.Background()
	at := t0.Add(5 * time.Second)
	var wg sync.WaitGroup
	var fromA, fromB int
	wg.Go(func() { fromA = fill(t, bulk, a, at) })
	wg.Go(func() { fromB = fill(t, bulk, b, at) })
	wg.Wait()
	if fromA+fromB != 3600 {
		t.Errorf("bulk booked %d + %d in a window, want 75 %% of 4800", fromA, fromB)
	}
	if got := fill(t, urgent, b, at); got != 1200 {
		t.Errorf("urgent booked %d beside the bulk work, want the other 1200", got)
	}

	next := t0.Add(time.Minute + 5*time.Second)
	if got := fill(t, urgent, a, next); got != 4800 {
		t.Errorf("urgent booked %d in an empty window, want all 4800", got)
	}
	if got := fill(t, bulk, b, next); got != 0 {
		t.Errorf("bulk booked %d in a window urgent work filled", got)
	}
	if hostbudget.ClassOf(bulk) != hostbudget.Bulk || hostbudget.ClassOf(urgent) != hostbudget.Urgent {
		t.Error("ClassOf does not read WithClass's class, or the default is not Urgent")
	}
}

// TestBulkShareWithoutRedis: each process's own budget, while Redis does
// not answer, keeps the same split of its quarter.
func TestBulkShareWithoutRedis(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	b := hostbudget.New(hostbudget.Options{Redis: dead, Prefix: "unused:"})
	at := t0.Add(time.Second)
	if got := fill(t, hostbudget.WithClass(context.Background(), hostbudget.Bulk), b, at); got != 900 {
		t.Errorf("bulk booked %d without Redis, want 75 %% of a quarter of 4800", got)
	}
	if got := fill(t, context.Background(), b, at); got != 300 {
		t.Errorf("urgent booked %d beside it, want the other 300", got)
	}
}

// TestClockSkewSharesOneWindow: a process whose clock runs 3 s ahead (its
// callers pass its own times) books in the same windows as one whose clock
// is right, because both number them on Redis's clock: the skewed one
// cannot drop the current window's count by believing it past, and the
// other cannot book that window full again. The window starts each is
// answered are on its own clock.
func TestClockSkewSharesOneWindow(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const skew = 3 * time.Second
	ahead := hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix, Now: func() time.Time { return time.Now().Add(skew) }})
	right := hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix})
	// Two-second windows: the skewed clock is always a window or two
	// ahead, past the current one.
	l := hostbudget.Limit{Name: "skewed", Window: 2 * time.Second, Max: 10}
	ctx := context.Background()
	planned := right.Planned(l) // 8
	now := time.Now()
	if _, ok := right.Reserve(ctx, l, planned, now, now.Add(time.Minute)); !ok {
		t.Fatal("the right clock's booking refused")
	}
	aheadStart, ok := ahead.Reserve(ctx, l, planned, now.Add(skew), now.Add(skew+time.Minute))
	if !ok {
		t.Fatal("the skewed clock's booking refused")
	}
	// The right clock's window was full: the skewed one's booking went to a
	// later window, whose start it is told on its own clock.
	if !aheadStart.After(now.Add(skew)) {
		t.Errorf("the skewed process was told to start at once (%s on its clock): it booked a window the other had filled", aheadStart.Sub(now.Add(skew)))
	}
	// And the right clock's current window still counts its booking.
	start, ok := right.Reserve(ctx, l, 1, now, now.Add(time.Minute))
	if !ok || !start.After(now) {
		t.Errorf("a booking after both started at %s (ok %v): the filled window was dropped", start.Sub(now), ok)
	}
}

// TestTickWindowIsLive: on a host whose polls tick every minute, the
// window that opens each minute is kept for Live requests: Bulk books
// none of it (a Bulk request asked for there starts in the next window),
// Urgent a third of it, Live the rest; the minute's other windows are
// split as usual. The same holds in one process's own budget without
// Redis, and with a process clock off Redis's (ticks are on the callers'
// clock).
func TestTickWindowIsLive(t *testing.T) {
	t.Parallel()
	l := hostbudget.Limit{Name: "alpaca-data", Window: 10 * time.Second, Max: 112, Tick: time.Minute}
	bulk := hostbudget.WithClass(context.Background(), hostbudget.Bulk)
	live := hostbudget.WithClass(context.Background(), hostbudget.Live)
	urgent := context.Background()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	const skew = 7 * time.Second
	for _, c := range []struct {
		name    string
		b       *hostbudget.Budget
		skew    time.Duration
		planned int // of a window, in this budget
	}{
		{"shared", hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix}), 0, 89},
		{"clock ahead", hostbudget.New(hostbudget.Options{Redis: rdb, Prefix: prefix + "skew:", Now: func() time.Time { return time.Now().Add(skew) }}), skew, 89},
		{"without Redis", hostbudget.New(hostbudget.Options{Redis: dead, Prefix: "unused:"}), 0, 22},
	} {
		// A minute on the budget's own clock: the windows of a skewed
		// process are Redis's, so its tick's window starts 3 s before the
		// tick and ends 7 s after it.
		minute := time.Now().Add(c.skew).Truncate(time.Minute).Add(2 * time.Minute)
		in := minute.Add(time.Second)
		if start, ok := c.b.Reserve(bulk, l, 1, in, in.Add(time.Minute)); !ok || start.Sub(minute) < 3*time.Second {
			t.Errorf("%s: bulk work asked for in a tick's window starts at %v (%v), want in the next window", c.name, start.Sub(minute), ok)
		}
		urgents := fillLimit(t, urgent, c.b, l, in)
		lives := fillLimit(t, live, c.b, l, in)
		if want := c.planned / 3; urgents != want || lives != c.planned-want {
			t.Errorf("%s: the tick's window took %d urgent and %d live, want %d and %d", c.name, urgents, lives, want, c.planned-want)
		}
		mid := minute.Add(30 * time.Second)
		if bulks, urgents := fillLimit(t, bulk, c.b, l, mid), fillLimit(t, urgent, c.b, l, mid); bulks != c.planned*3/4 || bulks+urgents != c.planned {
			t.Errorf("%s: a window within the minute took %d bulk and %d urgent, want 75 %% and the rest of %d", c.name, bulks, urgents, c.planned)
		}
	}
}

// fillLimit books weight 1 on l at at (the window holding it only) until
// it is full for ctx's class, and returns how much it booked.
func fillLimit(t *testing.T, ctx context.Context, b *hostbudget.Budget, l hostbudget.Limit, at time.Time) int {
	t.Helper()
	n := 0
	for n < 10000 {
		if _, ok := b.Reserve(ctx, l, 1, at, at); !ok {
			return n
		}
		n++
	}
	t.Fatal("no end to the bookings")
	return n
}
