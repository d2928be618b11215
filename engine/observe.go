package engine

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

type noRunMetrics struct{}

func (noRunMetrics) RunEnded(core.RunStatus)                      {}
func (noRunMetrics) ModelCalled(time.Duration, core.Usage, error) {}

// metrics is cfg.Metrics, or one that counts nothing.
func (e *Engine) metrics() core.RunMetrics {
	if e.cfg.Metrics == nil {
		return noRunMetrics{}
	}
	return e.cfg.Metrics
}

// Stats is what the engine holds right now, read at scrape time.
type Stats struct {
	// PendingApprovals is how many approvals wait for a decision with their
	// deadline armed on this engine.
	PendingApprovals int
	// Busy is how many threads have work queued or running.
	Busy int
}

// Stats reads the engine's live counts. It takes only the engine's own
// locks (never a channel's), so a scrape cannot wait on a journal append.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{PendingApprovals: len(e.expiries), Busy: e.busy}
}
