package engine

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

// Installation-wide jobs (erasure, `what do you know about me`, export,
// the inbox and consent lists) read every channel's fold. They borrow each
// view and release it: a view the engine held before stays as it was; one
// the job brought in is dropped again, reset and removed from e.channels
// unless something else took it meanwhile. So a job over ten thousand
// channels leaves the engine holding what it held before, not ten thousand
// folds (TestInstallationJobsReleaseTheViewsTheyBorrow).

// borrowing lends ch's view to fn, then releases it.
func (e *Engine) borrowing(ctx context.Context, ch core.ChannelKey, fn func(v *chanView) error) error {
	v, release := e.borrow(ch)
	defer release()
	return fn(v)
}

// borrow returns ch's view, without marking it touched, and its release.
func (e *Engine) borrow(ch core.ChannelKey) (*chanView, func()) {
	held := e.viewLoaded(ch)
	e.chMu.Lock()
	v := e.channels[ch]
	if v == nil {
		v = e.newViewLocked(ch) // untouched: zero touched time
	}
	v.borrows++
	e.chMu.Unlock()
	return v, func() { e.giveBack(v, held) }
}

// giveBack ends one borrow of v. held: the view was loaded before it.
func (e *Engine) giveBack(v *chanView, held bool) {
	e.chMu.Lock()
	v.borrows--
	last := v.borrows == 0
	e.chMu.Unlock()
	if !last || held {
		return
	}
	e.evict(v, e.now(), 0)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.loaded {
		return // live work came in meanwhile: it stays like any busy view
	}
	e.chMu.Lock()
	defer e.chMu.Unlock()
	// Only a view nothing else was handed (view() touches what it hands
	// out) leaves the map: a holder of the pointer folds it again on use,
	// and there must never be two views of one channel.
	if v.borrows == 0 && v.touched.IsZero() && e.channels[v.key] == v {
		delete(e.channels, v.key)
	}
}
