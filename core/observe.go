package core

import "time"

// RunMetrics hears what an operator's dashboard counts: runs reaching a
// terminal status and every model call. It is called on run goroutines, so
// an implementation must be cheap and must not block (counters, not I/O).
type RunMetrics interface {
	// RunEnded is told once per run that reaches done, broken or cancelled
	// on this replica.
	RunEnded(status RunStatus)
	// ModelCalled is told of each model call attempt (retries count
	// separately): how long it took, what it used, and its error if any.
	ModelCalled(elapsed time.Duration, usage Usage, err error)
}

type noRunMetrics struct{}

func (noRunMetrics) RunEnded(RunStatus)                      {}
func (noRunMetrics) ModelCalled(time.Duration, Usage, error) {}

// metrics is cfg.Metrics, or one that counts nothing.
func (e *Engine) metrics() RunMetrics {
	if e.cfg.Metrics == nil {
		return noRunMetrics{}
	}
	return e.cfg.Metrics
}

// EngineStats is what the engine holds right now, read at scrape time.
type EngineStats struct {
	// PendingApprovals is how many approvals wait for a decision with their
	// deadline armed on this engine.
	PendingApprovals int
	// Busy is how many threads have work queued or running.
	Busy int
}

// Stats reads the engine's live counts. It takes only the engine's own
// locks (never a channel's), so a scrape cannot wait on a journal append.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EngineStats{PendingApprovals: len(e.expiries), Busy: e.busy}
}
