package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// claimAsync claims only in a goroutine; the returned channel yields the
// release once the claim is granted (or nil and the error).
type granted struct {
	release func()
	err     error
}

func claimAsync(ctx context.Context, r *runClaims, only []string) <-chan granted {
	out := make(chan granted, 1)
	go func() {
		rel, err := r.claim(ctx, only)
		out <- granted{rel, err}
	}()
	return out
}

// waitLive polls until n claims are registered (granted or waiting).
func waitLive(t *testing.T, r *runClaims, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := len(r.live)
		r.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d claims registered, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// notGranted asserts that a registered claim waits: it cannot be granted
// before the claims it waits for are released, so this is no race.
func notGranted(t *testing.T, ch <-chan granted, what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s was granted (err %v); it should wait", what, g.err)
	default:
	}
}

func granted1(t *testing.T, ch <-chan granted, what string) func() {
	t.Helper()
	select {
	case g := <-ch:
		if g.err != nil {
			t.Fatalf("%s: %v", what, g.err)
		}
		return g.release
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not granted", what)
		return nil
	}
}

func TestRunClaimsDisjointRunsGoSideBySide(t *testing.T) {
	ctx := context.Background()
	var r runClaims
	a := granted1(t, claimAsync(ctx, &r, []string{"AAPL", "MSFT"}), "first batch")
	b := granted1(t, claimAsync(ctx, &r, []string{"IBM", "KO"}), "second batch, other symbols")
	// An empty claim (a run that names no symbol) meets nothing.
	granted1(t, claimAsync(ctx, &r, []string{}), "empty claim")()
	a()
	b()
	waitLive(t, &r, 0)
}

func TestRunClaimsOverlappingRunWaits(t *testing.T) {
	ctx := context.Background()
	var r runClaims
	first := granted1(t, claimAsync(ctx, &r, []string{"AAPL", "MSFT"}), "first")
	second := claimAsync(ctx, &r, []string{"MSFT", "IBM"})
	waitLive(t, &r, 2)
	notGranted(t, second, "a run sharing MSFT")
	first()
	granted1(t, second, "the second run after the first ended")()
	waitLive(t, &r, 0)
}

func TestRunClaimsTickWaitsForEveryRunAndRunsAfterItWaitForIt(t *testing.T) {
	ctx := context.Background()
	var r runClaims
	a := granted1(t, claimAsync(ctx, &r, []string{"AAPL"}), "a")
	b := granted1(t, claimAsync(ctx, &r, []string{"IBM"}), "b")
	tick := claimAsync(ctx, &r, nil)
	waitLive(t, &r, 3)
	// A triggered run arriving after the tick waits for it, though no
	// running run holds its symbol: the tick is not starved.
	later := claimAsync(ctx, &r, []string{"KO"})
	waitLive(t, &r, 4)
	notGranted(t, tick, "the tick while a and b run")
	a()
	notGranted(t, tick, "the tick while b runs")
	notGranted(t, later, "a run after the tick")
	b()
	rt := granted1(t, tick, "the tick")
	notGranted(t, later, "a run after the tick, while the tick runs")
	rt()
	granted1(t, later, "the run after the tick")()
	waitLive(t, &r, 0)
}

func TestRunClaimsCancelledWhileWaiting(t *testing.T) {
	var r runClaims
	first := granted1(t, claimAsync(context.Background(), &r, []string{"AAPL"}), "first")
	ctx, cancel := context.WithCancel(context.Background())
	second := claimAsync(ctx, &r, []string{"AAPL"})
	waitLive(t, &r, 2)
	// A third run waits for the first only, not for the cancelled one.
	third := claimAsync(context.Background(), &r, []string{"AAPL"})
	waitLive(t, &r, 3)
	cancel()
	select {
	case g := <-second:
		if !errors.Is(g.err, context.Canceled) || g.release != nil {
			t.Fatalf("cancelled claim: release %v, err %v; want context.Canceled", g.release != nil, g.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled claim did not return")
	}
	waitLive(t, &r, 2) // the cancelled claim is gone
	notGranted(t, third, "the third run while the first runs")
	first()
	granted1(t, third, "the third run")()
	waitLive(t, &r, 0)
}
