package engine

// OpsMetrics is what an operator's alerts count beyond core.RunMetrics: a
// Config.Metrics that also implements it hears of these (optional, so
// existing RunMetrics need not stub them).
type OpsMetrics interface {
	// JournalAppendFailed is told of each append the journal refused
	// with an error (not a head that moved and was planned again).
	JournalAppendFailed()
	// LeaseLost is told each time a channel's lease passed to another
	// replica: many in a short time is leases flapping.
	LeaseLost()
}

// ops is cfg.Metrics as OpsMetrics, or nil.
func (e *Engine) ops() OpsMetrics {
	m, _ := e.cfg.Metrics.(OpsMetrics)
	return m
}
