package core

// Hooks for the external tests (package core_test).

// EvictIdle runs one eviction pass now (the engine's goroutine runs it on a
// ticker) and returns how many channels it dropped.
func (e *Engine) EvictIdle() int { return e.evictIdle() }

// Loaded reports whether the engine holds a fold of ch.
func (e *Engine) Loaded(ch ChannelKey) bool {
	e.chMu.Lock()
	v := e.channels[ch]
	e.chMu.Unlock()
	return v != nil && v.isLoaded()
}
