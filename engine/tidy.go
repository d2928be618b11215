package engine

import (
	"context"
	"errors"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// A tidy thread (ARCHITECTURE.md section 6, "Acknowledge within seconds"):
// a reaction on the person's message before the first model call; the
// checklist only once the run does tool work or has not answered within
// ChecklistDelay; a run that answers in one step posts only its answer.
//
// Whether a run shows a checklist is a function of its journal (and the
// clock, for a run still waiting for its first answer), so a run resumed
// after a crash decides as the crashed one did: it posts the checklist
// again, with the same idempotency key, exactly when the first one may
// have been posted, and never a checklist the first one could not have.
//
// Two exceptions keep a thread from showing an empty plan above an answer:
// on a surface that streams, the delay alone starts no stream (the surface
// shows the wait, and the answer streams on its own), and a plain
// checklist that lists nothing when the answer comes is edited into the
// answer (runend.go, emptyChecklist).

// DefaultChecklistDelay is how long a run may take to answer before it
// shows its checklist.
const DefaultChecklistDelay = 3 * time.Second

// needsChecklist reports whether rs shows a checklist: it has one already,
// a model step asked for tools, or its first answer came (or, with none
// yet, now is) delay or more after the run started.
func (rs *RunReplay) needsChecklist(delay time.Duration, now time.Time) bool {
	if _, ok := rs.Effects[rs.checklistEffect()]; ok || rs.toolWork {
		return true
	}
	if !rs.answeredAt.IsZero() {
		// An answer an earlier drive journaled keeps its history (a slow
		// answer has its checklist); one this drive got counts from it.
		from := rs.StartedAt
		if rs.answeredSeq > rs.resumeHead {
			from = rs.checklistFrom()
		}
		return rs.answeredAt.Sub(from) >= delay
	}
	return now.Sub(rs.checklistFrom()) >= delay
}

// checklistFrom is when the checklist delay started: the run's start, or
// a resumed drive's. A run taken over from a dead replica is older than
// the delay, and its checklist (keyed to run.started, so in doubt) would
// first be looked for on the platform, which Slack paces to one read a
// second for the whole workspace: every channel of a dead replica waited
// its turn in that line for answers the model gave at once.
func (rs *RunReplay) checklistFrom() time.Time {
	if rs.driveStart.After(rs.StartedAt) { // set by a resumed drive only
		return rs.driveStart
	}
	return rs.StartedAt
}

// maybeChecklist posts the checklist when the run needs one. Grammar runs
// answer at once and never show one.
func (d *driver) maybeChecklist(ctx context.Context) error {
	if d.grammar || !d.rs.needsChecklist(d.e.cfg.ChecklistDelay, d.e.now()) || d.waitsForAStream(ctx) {
		return nil
	}
	return d.ensureChecklist(ctx)
}

// waitsForAStream reports whether the run would start its checklist as a
// stream with nothing to list in it: a stream's plan is only its tasks, so
// a slow answer with none would get an empty plan above it. The surface
// shows the wait itself (Slack's thread status), and the answer streams on
// its own; the stream starts once the run does tool work.
func (d *driver) waitsForAStream(ctx context.Context) bool {
	rs := d.rs
	if _, ok := rs.Effects[rs.checklistEffect()]; ok || rs.toolWork {
		return false
	}
	return d.wantsStream(ctx) != nil
}

// ack reacts to a person's message. It is not journaled: reacting twice is
// a no-op on every platform, and a failed reaction costs nothing but the
// acknowledgement.
func (d *driver) ack(ctx context.Context, h *humanMsg) {
	if h == nil || h.msgID == "" {
		return
	}
	if err := d.s.React(ctx, core.MessageRef{Scope: h.scope, ID: h.msgID}, core.AckReaction); err != nil && ctx.Err() == nil {
		d.e.log.WarnContext(ctx, "acknowledging reaction failed", "run", d.rs.ID, "error", err)
	}
}

// callModelAcked makes the step's model call; when the run has no
// checklist yet, it posts one if the call is still running once the run is
// ChecklistDelay old. The call runs on its own goroutine, which reads
// nothing of the run, so the driver may post meanwhile. A cancel of the run
// interrupts the call (errInterrupted).
func (d *driver) callModelAcked(ctx context.Context, v core.View) (core.Reply, error) {
	rs, delay := d.rs, d.e.cfg.ChecklistDelay
	mctx, stop := d.e.interruptible(ctx, rs.ID)
	defer stop()
	if d.ended(ctx) {
		return core.Reply{}, errInterrupted // cancelled before the call could be interrupted
	}
	remaining := d.e.budgets.MaxWall - rs.activeTime(d.e.now())
	interrupted := func(r core.Reply, err error) (core.Reply, error) {
		if err != nil && errors.Is(context.Cause(mctx), errInterrupted) {
			return core.Reply{}, errInterrupted
		}
		return r, err
	}
	if d.grammar || rs.needsChecklist(delay, d.e.now()) || !rs.answeredAt.IsZero() || d.waitsForAStream(ctx) {
		// Shown already (or due, and shown by the loop), or a later turn
		// of a run that answered quickly: nothing to time.
		return interrupted(d.callModel(mctx, v, rs.ID, remaining))
	}
	type result struct {
		reply core.Reply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		r, err := d.callModel(mctx, v, rs.ID, remaining)
		done <- result{r, err}
	}()
	for {
		wait := delay - d.e.now().Sub(rs.checklistFrom())
		if wait <= 0 {
			// By the engine's clock the run is due, but the timer can run
			// ahead of a clock that is not the wall (tests): check again
			// after another delay.
			wait = delay
		}
		t := time.NewTimer(wait)
		select {
		case res := <-done:
			t.Stop()
			return interrupted(res.reply, res.err)
		case <-t.C:
		}
		if !rs.needsChecklist(delay, d.e.now()) {
			d.e.log.DebugContext(ctx, "checklist not due yet by the engine's clock", "run", rs.ID)
			continue
		}
		if err := d.ensureChecklist(ctx); err != nil {
			stop()
			<-done
			return core.Reply{}, err
		}
		res := <-done
		return interrupted(res.reply, res.err)
	}
}
