package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/worker"
)

// TestSupersededTicksAreSkipped: a periodic task that starts after its
// tick ended (worker.HeaderNotAfter) is skipped, unless it is the first of
// its series (worker.HeaderSeries) the process starts (or the first after
// that one failed); one within its tick
// and one without the header run, and the live lane runs while every bulk
// slot is held by a long task.
func TestSupersededTicksAreSkipped(t *testing.T) {
	t.Parallel()
	url := redistest.LeaseDB(t)
	now := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	w, err := worker.New(worker.Config{RedisURL: url, Concurrency: 1, LiveConcurrency: 1, Logger: discard(),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		ran = map[string]bool{}
	)
	done := make(chan string, 8)
	release := make(chan struct{})
	w.Handle("probe", asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		mu.Lock()
		ran[string(task.Payload())] = true
		mu.Unlock()
		done <- string(task.Payload())
		if string(task.Payload()) == "late-fails" {
			return errors.New("feed down")
		}
		return nil
	}))
	w.Handle("hog", asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	})

	opt, _ := asynq.ParseRedisURI(url)
	client := asynq.NewClient(opt)
	defer client.Close()
	enqueue := func(task *asynq.Task, queue string) {
		t.Helper()
		if _, err := client.Enqueue(task, asynq.Queue(queue), asynq.MaxRetry(0)); err != nil {
			t.Fatal(err)
		}
	}
	header := func(at time.Time, series string) map[string]string {
		h := map[string]string{worker.HeaderNotAfter: at.Format(time.RFC3339Nano)}
		if series != "" {
			h[worker.HeaderSeries] = series
		}
		return h
	}
	late := now.Add(-time.Second)
	// The bulk lane's only slot is taken for the rest of the test.
	enqueue(asynq.NewTask("hog", nil), worker.QueueDefault)
	enqueue(asynq.NewTaskWithHeaders("probe", []byte("late"), header(late, "")), worker.QueueLive)
	enqueue(asynq.NewTaskWithHeaders("probe", []byte("late-first"), header(late, "tickers:a")), worker.QueueLive)
	enqueue(asynq.NewTaskWithHeaders("probe", []byte("late-again"), header(late, "tickers:a")), worker.QueueLive)
	// A first task that fails leaves the next one of its series first.
	enqueue(asynq.NewTaskWithHeaders("probe", []byte("late-fails"), header(late, "tickers:c")), worker.QueueLive)
	enqueue(asynq.NewTaskWithHeaders("probe", []byte("late-after-failure"), header(late, "tickers:c")), worker.QueueLive)
	enqueue(asynq.NewTaskWithHeaders("probe", []byte("on-time"), header(now.Add(time.Second), "tickers:b")), worker.QueueLive)
	enqueue(asynq.NewTask("probe", []byte("plain")), worker.QueueCritical)

	want := map[string]bool{"late-first": true, "late-fails": true, "late-after-failure": true, "on-time": true, "plain": true}
	for range want {
		select {
		case p := <-done:
			if !want[p] {
				t.Fatalf("task %q ran", p)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("live-lane tasks did not run within 30 s while the bulk lane was busy (ran %v)", ran)
		}
	}
	// The late task was dequeued before or between the others (one live
	// slot, FIFO within a queue): it is done, without running the handler.
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := insp.GetQueueInfo(worker.QueueLive)
		if err == nil && info.Pending == 0 && info.Active == 0 && info.Retry == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live queue not drained: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["late"] || ran["late-again"] {
		t.Fatalf("a task started after its tick ended ran: %v", ran)
	}
}
