package worker_test

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
	"github.com/marketscreener/market/worker"
)

// TestRescoringWaitsForTheCloses: Wait returns at once with no close
// under way; with one, only once it has ended and Quiet has passed; a
// close that never ends holds it MaxWait; a cancelled context ends it.
func TestRescoringWaitsForTheCloses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var nilR *worker.Rescoring
	if d := nilR.Wait(ctx); d != 0 {
		t.Fatalf("a nil Rescoring waited %v", d)
	}
	nilR.Begin()()

	const quiet = 30 * time.Millisecond
	r := &worker.Rescoring{Quiet: quiet, MaxWait: time.Hour}
	if d := r.Wait(ctx); d >= quiet {
		t.Fatalf("nothing under way: waited %v", d)
	}

	end := r.Begin()
	second := r.Begin()
	returned := make(chan time.Time, 1)
	go func() { r.Wait(ctx); returned <- time.Now() }()
	for r.Waiting() != 1 {
		time.Sleep(time.Millisecond) // poll: the waiter is counted once it waits
	}
	end()
	end() // a second call does nothing
	if r.Active() != 1 {
		t.Fatalf("active after one of two ended: %d, want 1", r.Active())
	}
	ended := time.Now()
	second()
	if got := <-returned; got.Before(ended.Add(quiet)) {
		t.Fatalf("Wait returned %v after the last close ended, want %v or more", got.Sub(ended), quiet)
	}
	if r.Waiting() != 0 || r.Active() != 0 {
		t.Fatalf("after: waiting %d, active %d", r.Waiting(), r.Active())
	}

	capped := &worker.Rescoring{Quiet: quiet, MaxWait: 50 * time.Millisecond}
	defer capped.Begin()() // never ends while it waits
	if d := capped.Wait(ctx); d < 50*time.Millisecond {
		t.Fatalf("a close that does not end: waited %v, want MaxWait (50ms)", d)
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Begin(); r.Wait(cctx); close(done) }()
	for r.Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

// activeDuringSaves records how many closes the Rescoring counted while
// each save ran.
type activeDuringSaves struct {
	*store.DB
	r    *worker.Rescoring
	mu   sync.Mutex // a run saves on several connections at once
	seen []int
}

func (s *activeDuringSaves) SaveAnalytics(ctx context.Context, recs []store.AnalyticsRecord, prev map[string]store.AnalyticsRecord) (int, error) {
	s.mu.Lock()
	s.seen = append(s.seen, s.r.Active())
	s.mu.Unlock()
	return s.DB.SaveAnalytics(ctx, recs, prev)
}

// taken is what the saves saw since the last call.
func (s *activeDuringSaves) taken() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

// TestScorerTellsOfACloseRun: a run that rescores a close (500 assets or
// more whose candle ended) is a close under way for the Rescoring while it
// runs; the run that scores the same assets for the first time is not.
func TestScorerTellsOfACloseRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	src := domain.AnalyticsSources("global", domain.Crypto, nil)[0]
	style := analytics.DefaultStyle
	close0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	syms := make([]string, 500)
	for i := range syms {
		syms[i] = fmt.Sprintf("R%04d_USDT", i)
	}
	seedCloseUniverse(t, db, src, []analytics.Style{style}, syms, close0)
	r := &worker.Rescoring{}
	saves := &activeDuringSaves{DB: db, r: r}
	sc := &worker.Scorer{Store: saves, Region: "global", Logger: discard(), Rescoring: r}
	run := func(now time.Time) {
		t.Helper()
		sc.Now = func() time.Time { return now }
		saves.taken()
		if n, _, err := sc.ScoreSymbols(ctx, domain.Crypto, style, syms); err != nil || n != len(syms) {
			t.Fatalf("scored %d of %d: %v", n, len(syms), err)
		}
	}
	run(close0.Add(time.Minute))
	if seen := saves.taken(); slices.Max(seen) != 0 || r.Active() != 0 {
		t.Fatalf("the first scoring: closes under way during its saves %v, after %d; want none", seen, r.Active())
	}
	at := close0.Add(style.Timeframe().Duration())
	appendCloseCandles(t, db, src, []analytics.Style{style}, syms, at)
	run(at.Add(time.Second))
	if seen := saves.taken(); slices.Min(seen) != 1 || r.Active() != 0 {
		t.Fatalf("the close's run: closes under way during its saves %v, after %d; want 1 during, none after", seen, r.Active())
	}
}
