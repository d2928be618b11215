package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
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

// errLeaseStale refuses an effect whose lease may have lapsed. It is a
// journal outage to the retry loop: when renewals succeed again the drive
// goes on; if the lease did pass, the next fenced append hands it over.
var errLeaseStale = errors.New("channel lease not renewed in time (the database is unreachable?): not acting on the platform, another replica may have taken the channel over")

func (o *ownership) presence() string { return core.PresencePrefix + o.holder }

// actMargin is how much of a lease must remain for a drive to start an
// effect.
func (o *ownership) actMargin() time.Duration { return o.ttl / 4 }

// mayAct reports whether the drive ctx belongs to may act on the platform
// now: nil outside a lease (embedded mode, a notice not tied to a drive),
// errLeaseLost when the channel passed to another replica, a journal error
// wrapping errLeaseStale when the lease may have lapsed.
func (e *Engine) mayAct(ctx context.Context) error {
	o := e.own
	f, _ := ctx.Value(fenceKey{}).(*core.Fence)
	if o == nil || f == nil {
		return nil
	}
	ch := core.ChannelKey(strings.TrimPrefix(f.Name, core.ChannelLeasePrefix))
	o.mu.Lock()
	cur, owned := o.owned[ch]
	until := o.until[ch]
	o.mu.Unlock()
	if !owned || cur.Token != f.Token {
		return fmt.Errorf("%w: %s", errLeaseLost, ch)
	}
	if time.Until(until) < o.actMargin() {
		return &journalError{err: fmt.Errorf("channel %s: %w", ch, errLeaseStale)}
	}
	return nil
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
	if !errors.Is(err, errLeaseStale) {
		return false
	}
	o := e.own
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peers == 0
}

// countPeers renews this replica's presence lease and counts the other
// live ones.
func (e *Engine) countPeers(ctx context.Context) {
	o := e.own
	if _, _, err := o.leases.Acquire(ctx, o.presence(), o.holder, o.ttl); err != nil {
		return // renewLeases already logged the database's state
	}
	live, err := o.leases.Live(ctx, core.PresencePrefix)
	if err != nil {
		return
	}
	n := 0
	for _, name := range live {
		if name != o.presence() {
			n++
		}
	}
	o.mu.Lock()
	o.peers = n
	o.mu.Unlock()
}

// keepFromRunning remembers a tool call mayAct refused before it ran, so
// this process's retry runs it rather than taking it for interrupted (a
// replica resuming it from the journal still does: the safe side).
func (e *Engine) keepFromRunning(call string) {
	if o := e.own; o != nil {
		o.mu.Lock()
		o.unrun[call] = true
		o.mu.Unlock()
	}
}

// keptFromRunning reports (once) whether call was kept from running.
func (e *Engine) keptFromRunning(call string) bool {
	o := e.own
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := o.unrun[call]
	delete(o.unrun, call)
	return kept
}
