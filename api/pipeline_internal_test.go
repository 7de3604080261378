package api

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBudgetCtx: the budget context ends at its deadline whether or not
// anyone waited on it before, and follows its parent's cancellation.
func TestBudgetCtx(t *testing.T) {
	t.Parallel()
	// Nobody waits: Err still reports the spent budget.
	lazy := &budgetCtx{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	if !errors.Is(lazy.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline without Done: %v", lazy.Err())
	}
	// A waiter is woken at the deadline.
	waited := &budgetCtx{Context: context.Background(), deadline: time.Now().Add(20 * time.Millisecond)}
	if waited.Err() != nil {
		t.Fatal("spent before its deadline")
	}
	select {
	case <-waited.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if !errors.Is(waited.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v", waited.Err())
	}
	waited.stop()
	// A derived context inherits the deadline; the parent's cancellation
	// reaches it.
	parent, cancel := context.WithCancel(context.Background())
	b := &budgetCtx{Context: parent, deadline: time.Now().Add(time.Hour)}
	child, stopChild := context.WithTimeout(b, 2*time.Hour)
	defer stopChild()
	if d, _ := child.Deadline(); !d.Equal(b.deadline) {
		t.Fatalf("derived deadline %v, want the budget's %v", d, b.deadline)
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the parent's cancellation did not reach a derived context")
	}
	if !errors.Is(b.Err(), context.Canceled) {
		t.Fatalf("Err after the parent's cancellation: %v", b.Err())
	}
	b.stop()
}
