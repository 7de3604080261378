package worker

// RunNowCounts is how many tasks RunNow ran and how many queued copies it
// deleted after a success.
func (w *Worker) RunNowCounts() (ran, deleted int64) { return w.nowRuns.Load(), w.nowDeleted.Load() }

// OnRunNow sets a function told each task id RunNow takes (before Run).
func (w *Worker) OnRunNow(f func(taskID string)) { w.onRunNow = f }
