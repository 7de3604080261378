package worker

import (
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
)

// RunNowCounts is how many tasks RunNow ran and how many queued copies it
// enqueued (runs that failed or did not start).
func (w *Worker) RunNowCounts() (ran, copies int64) { return w.nowRuns.Load(), w.nowCopies.Load() }

// OnRunNow sets a function told each task id RunNow takes (before Run).
func (w *Worker) OnRunNow(f func(taskID string)) { w.onRunNow = f }

// TakeHistorySlots takes every display-only history slot of in and the
// 1m tasks' one, as loads under way would; the returned function gives them
// back.
func (in *Ingester) TakeHistorySlots() func() {
	var releases []func()
	for {
		r, ok := in.historySlot()
		if !ok {
			break
		}
		releases = append(releases, r)
	}
	for {
		t := in.takeHistoryTurn(domain.TF1m)
		if !t.ok {
			break
		}
		releases = append(releases, t.release)
	}
	return func() {
		for _, r := range releases {
			r()
		}
	}
}

// LiveRead is liveRead: whether the task's poll reads just-closed candles.
func (in *Ingester) LiveRead(t *asynq.Task, c domain.Combination, tf domain.Timeframe) bool {
	return in.liveRead(t, c, tf)
}

// BoundMinuteHistory sets how long a 1m task loads new series' history and
// how many series it reads between two looks at the clock.
func (in *Ingester) BoundMinuteHistory(d time.Duration, chunk int) {
	in.minuteHistoryFor, in.minuteHistoryChunk = d, chunk
}

// BulkChunks is bulkChunks: the calls a bulk read of symbols is split into.
var BulkChunks = bulkChunks

// The tests' runs may be slow (the race detector, a busy machine): a
// lighter run waits for a denser one as long as it takes.
func init() { maxOrderWait = time.Minute }
