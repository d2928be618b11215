package engine

import (
	"context"
	"errors"
	"fmt"
)

// ErrDraining is what Deliver returns once Drain has begun: the surface
// must not acknowledge the delivery, so the platform redelivers it (to
// another connection or replica, or to this one after its restart).
var ErrDraining = errors.New("deliver: engine is draining for shutdown; not acknowledged, so the platform redelivers it")

// drainState is guarded by Engine.mu.
type drainState struct {
	on bool
	// delivering counts Deliver calls past the draining check: each may
	// still journal a run and enqueue it, so Drain waits for them too.
	delivering int
}

// Drain is a graceful stop's first half: from now on Deliver refuses new
// work (ErrDraining), and Drain waits until the work in hand has settled:
// every Deliver already admitted has returned and every thread's mailbox
// is empty (runs finished, or parked waiting for a person or a deadline).
// It returns ctx's error if that takes longer than ctx allows. Drain does
// not stop anything: Close does, and whatever is still running then
// resumes from the journal at the next Start.
//
// Seam: when channels are held under leases, this is where a draining
// replica releases them, after the wait below, so that another replica
// takes a channel over only once no run of ours drives it (with runs still
// going when ctx ended, only Close makes that true).
func (e *Engine) Drain(ctx context.Context) error {
	e.mu.Lock()
	if !e.drain.on {
		e.drain.on = true
		e.log.InfoContext(ctx, "engine draining: new deliveries are refused", "busy_threads", e.busy, "delivering", e.drain.delivering)
	}
	e.mu.Unlock()
	if err := e.waitSettled(ctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return nil
}

// Draining reports whether Drain has begun (readiness turns it into a 503).
func (e *Engine) Draining() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.drain.on
}

// admit lets one Deliver in unless the engine is stopped or draining;
// after a nil error the caller must call e.delivered when done.
func (e *Engine) admit() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed || e.runCtx.Err() != nil:
		return errors.New("deliver: engine is stopped")
	case e.drain.on:
		return ErrDraining
	}
	e.drain.delivering++
	return nil
}

func (e *Engine) delivered() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drain.delivering--
	if e.drain.delivering == 0 {
		e.idle.Broadcast()
	}
}

// waitSettled blocks until no Deliver is in progress and no thread has
// work, or ctx ends.
func (e *Engine) waitSettled(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.idle.Broadcast()
	})
	defer stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.busy > 0 || e.drain.delivering > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.idle.Wait()
	}
	return nil
}
