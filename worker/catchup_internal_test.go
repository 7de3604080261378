package worker

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The catch-up queue hands out every scored timeframe's job, of every
// combination added, before any display-only one, each group in the order
// added, and lets a waiting worker go when its context ends.
func TestCatchUpQueueScoredFirst(t *testing.T) {
	t.Parallel()
	q := catchUpQueue{ready: make(chan struct{}, 1)}
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
	}
	want := []string{"binance/15m", "binance/1h", "okx/15m", "binance/1m", "okx/1m"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("jobs taken in order %v, want %v", got, want)
		}
	}

	// A worker waiting on an empty queue gets the next job added, and
	// stops when its context ends.
	taken := make(chan catchUpJob)
	go func() {
		j, _ := q.next(t.Context())
		taken <- j
	}()
	q.add([]catchUpJob{{c: okx, tf: "4h", scored: true}})
	select {
	case j := <-taken:
		if j.tf != "4h" {
			t.Fatalf("waiting worker took %s, want 4h", j.tf)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting worker was not handed the job added")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := q.next(ctx); ok {
		t.Fatal("next returned a job from an empty queue after its context ended")
	}
}
