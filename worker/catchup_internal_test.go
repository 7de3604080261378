package worker

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The catch-up queue hands out every scored timeframe's job, of every
// combination added, before any display-only one, each group in the order
// added; a display-only job waits while a scored one runs; and a waiting
// worker is handed a job added later, or stops when its context ends.
func TestCatchUpQueueScoredFirst(t *testing.T) {
	t.Parallel()
	q := newCatchUpQueue()
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	okx := domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"}
	q.add([]catchUpJob{{c: spot, tf: "1m"}, {c: spot, tf: "15m", scored: true}, {c: spot, tf: "1h", scored: true}})
	q.add([]catchUpJob{{c: okx, tf: "1m"}})
	q.add([]catchUpJob{{c: okx, tf: "15m", scored: true}})
	var got []string
	for range 5 {
		j, ok := q.next(t.Context())
		if !ok {
			t.Fatal("next gave up with jobs queued")
		}
		got = append(got, j.c.Exchange+"/"+string(j.tf))
		q.done(j)
	}
	want := []string{"binance/15m", "binance/1h", "okx/15m", "binance/1m", "okx/1m"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("jobs taken in order %v, want %v", got, want)
		}
	}

	// While a scored job runs, a display-only one waits for it.
	q.add([]catchUpJob{{c: okx, tf: "4h", scored: true}, {c: okx, tf: "5m"}})
	scored, _ := q.next(t.Context())
	taken := make(chan catchUpJob, 1)
	go func() {
		j, _ := q.next(t.Context())
		taken <- j
	}()
	select {
	case j := <-taken:
		t.Fatalf("%s taken while the scored %s runs", j.tf, scored.tf)
	case <-time.After(200 * time.Millisecond): // a guard: nothing may arrive
	}
	q.done(scored)
	select {
	case j := <-taken:
		if j.tf != "5m" {
			t.Fatalf("waiting worker took %s, want 5m", j.tf)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting worker was not handed the display-only job once the scored one was done")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := q.next(ctx); ok {
		t.Fatal("next returned a job from an empty queue after its context ended")
	}
}
