package engine

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Approval deadlines. A pending approval expires on time whether or not
// anyone clicks or the run is driven: one timer per pending approval, armed
// when it is requested (or found pending at Start) and disarmed when it is
// decided. The timer only enqueues; the expiry itself is journaled on the
// thread's serial consumer, so it cannot race a click or the run.

// armExpiry schedules approval id of channel ch to expire at at.
func (e *Engine) armExpiry(ch core.ChannelKey, thread, id string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if e.expiries == nil {
		e.expiries = map[string]*time.Timer{}
	}
	if _, armed := e.expiries[id]; armed {
		return
	}
	d := max(at.Sub(e.now()), 0)
	e.expiries[id] = time.AfterFunc(d, func() {
		e.mu.Lock()
		delete(e.expiries, id)
		e.mu.Unlock()
		e.enqueue(threadKey{ch, thread}, job{expire: id, expireCh: ch})
	})
}

// disarmExpiry stops the timer of a decided approval.
func (e *Engine) disarmExpiry(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.expiries[id]; t != nil {
		t.Stop()
		delete(e.expiries, id)
	}
}

// stopExpiries stops every timer (Close). Callers hold e.mu.
func (e *Engine) stopExpiriesLocked() {
	for id, t := range e.expiries {
		t.Stop()
		delete(e.expiries, id)
	}
}
