package engine

import (
	"context"
	"errors"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/replica"
)

// Acting on the platform under a lease. The journal fences a deposed
// replica's appends, but a post or a tool call reaches Slack, Discord or a
// web API, which know no fence: a replica cut off from the database keeps
// its in-memory view, and once its lease may have passed to another
// replica, acting would double what the new owner does (the second answer
// of a run resumed elsewhere). So a drive performs an effect only while its
// lease surely lasts: until the start of its last successful acquire or
// renewal plus the TTL (the database set the expiry later than that), less
// a margin for the effect itself. Renewals every TTL/4 keep a healthy
// replica far from it.

// mayAct reports whether the drive ctx belongs to may act on the platform
// now: nil outside a lease (embedded mode, a notice not tied to a drive),
// replica.ErrLeaseLost when the channel passed to another replica, a journal error
// wrapping replica.ErrLeaseStale when the lease may have lapsed.
func (e *Engine) mayAct(ctx context.Context) error {
	f := replica.FenceOf(ctx)
	if e.own == nil || f == nil {
		return nil
	}
	err := e.own.MayAct(*f)
	if errors.Is(err, replica.ErrLeaseStale) {
		// A journal outage to the retry loop: when renewals succeed again
		// the drive goes on; if the lease did pass, the next fenced append
		// hands it over.
		return &journalError{err: err}
	}
	return err
}

// guardActs gives what a drive hands a surface the lease check, so that
// an adapter that holds an effect back (its write queue paces a chat, or
// waits out a rate limit) checks again when the effect's turn comes: the
// check before the wait proves nothing about the lease after it.
func (e *Engine) guardActs(ctx context.Context) context.Context {
	if e.own == nil {
		return ctx
	}
	return core.WithActGuard(ctx, func() error { return e.mayAct(ctx) })
}

// mayShowOutage reports whether a drive may put the blocked notice on its
// checklist: while its lease lasts, or when no other replica was alive at
// the last check to take the channel over (a single replica tells people
// it waits for the database; one of several stays silent, since another
// may already drive the run and own its checklist).
func (e *Engine) mayShowOutage(ctx context.Context) bool {
	err := e.mayAct(ctx)
	if err == nil {
		return true
	}
	return errors.Is(err, replica.ErrLeaseStale) && e.own.Alone()
}

// keepFromRunning remembers a tool call mayAct refused before it ran, so
// this process's retry runs it rather than taking it for interrupted (a
// replica resuming it from the journal still does: the safe side).
func (e *Engine) keepFromRunning(call string) {
	if e.own != nil {
		e.unrunMu.Lock()
		e.unrun[call] = true
		e.unrunMu.Unlock()
	}
}

// keptFromRunning reports (once) whether call was kept from running.
func (e *Engine) keptFromRunning(call string) bool {
	e.unrunMu.Lock()
	defer e.unrunMu.Unlock()
	kept := e.unrun[call]
	delete(e.unrun, call)
	return kept
}
