package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
)

const (
	maxInvalidCalls = 3        // consecutive malformed tool calls before the run fails
	maxObservation  = 16 << 10 // bytes of a tool result kept in the journal and the view
	maxOptions      = 10       // question options ('0'..'9' in the card token)
	maxLongRetry    = 30 * time.Second
)

// driver interprets one run: it owns the run's replayed state for the
// duration of one drive (one mailbox job), on the thread's one consumer
// goroutine, so nothing else touches rs.
type driver struct {
	e       *Engine
	rs      *RunReplay
	v       *chanView
	s       core.Surface
	grammar bool
	// outage, when set, is kept up to date with where the checklist is, so
	// a journal outage can be shown on it (see driveThroughOutages).
	outage *outageView
	// typing shows the surface's typing indicator while a model call or a
	// tool runs (nil when the surface has none).
	typing *typist
}

// drive loads a run from the journal and carries it as far as it can go:
// to a terminal state, or to a park (approval, budget), or until ctx ends.
// Everything it knows comes from the journal, so the same call resumes a
// run after a crash.
// outage, when not nil, is told where the run's checklist is.
func (e *Engine) drive(ctx context.Context, runID string, resume bool, outage *outageView) (err error) {
	ctx, span := e.runSpan(ctx, runID, spanDrive, e.so.internal...)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool(attrResumed, resume))
	}
	defer func() { endSpan(span, err, e.cfg.Tracing.Content, "drive_error") }()
	for attempt := 1; ; attempt++ {
		err := e.driveOnce(ctx, runID, resume, outage)
		if (errors.Is(err, errRunEnded) || errors.Is(err, errInterrupted)) && attempt < 3 {
			// Cancelled while this drive held the run: start again from
			// the journal, which now ends the run, and show that end.
			continue
		}
		if err != nil {
			return fmt.Errorf("drive run %s: %w", runID, err)
		}
		return nil
	}
}

func (e *Engine) driveOnce(ctx context.Context, runID string, resume bool, outage *outageView) error {
	cmds, err := e.j.ReadRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("read: %w", journalFailed(err))
	}
	turns, err := readTurns(ctx, e.j, cmds)
	if err != nil {
		return fmt.Errorf("read: %w", journalFailed(err))
	}
	rs, err := replayRunWith(cmds, turns)
	if err != nil {
		return err
	}
	s, err := e.surface(rs.Scope.Platform)
	if err != nil {
		return err
	}
	outage.note(rs)
	v, err := e.channel(ctx, rs.Scope.Key())
	if err != nil {
		return journalFailed(err)
	}
	rs.resumed = resume
	if resume {
		rs.driveStart = e.now()
		if len(cmds) > 0 {
			rs.resumeHead = cmds[len(cmds)-1].Seq()
		}
	}
	d := &driver{e: e, rs: rs, v: v, s: s, outage: outage, typing: newTypist(e, s, rs)}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(attrPlatform, rs.Scope.Platform), attribute.String(attrChannel, string(rs.Scope.Key())))
		defer func() { span.SetAttributes(attribute.String(attrStatus, string(rs.Status))) }()
	}
	if isErasureJob(rs) {
		return d.eraseJob(ctx)
	}
	// An unattended run's instruction is never read as a chat command: the
	// grammar acts on what a person typed in the conversation.
	d.grammar = e.offline || !rs.unattended && (chatcommand.Parse(rs.Instruction).Deterministic() || chatcommand.ParseInbox(rs.Instruction).Kind != chatcommand.InboxNone)
	return d.run(ctx, resume)
}

func (d *driver) run(ctx context.Context, resume bool) error {
	rs := d.rs
	if resume {
		if err := d.reissueEdits(ctx); err != nil {
			return err
		}
	}
	if rs.Done() {
		return d.reconcileEnd(ctx)
	}
	switch rs.Status {
	case core.RunBlocked, core.RunNeedsPermission:
		return d.reconcilePause(ctx)
	}
	if rs.Steps == 0 {
		d.ack(ctx, rs.latestHuman())
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.maybeChecklist(ctx); err != nil {
			return err
		}
		if d.openCalls() {
			parked, err := d.interpretCalls(ctx)
			if err != nil || parked || rs.Status != core.RunWorking {
				return err
			}
			if rs.invalidRun >= maxInvalidCalls {
				return d.fail(ctx, core.RunBroken, fmt.Sprintf("the model made %d invalid tool calls in a row", rs.invalidRun))
			}
			if err := d.syncChecklist(ctx, rs.Status); err != nil {
				return err
			}
			continue
		}
		if st := rs.step; st != nil && st.final && !d.pullSteering(ctx) {
			done, err := d.finish(ctx)
			if err != nil || done {
				return err
			}
			continue
		}
		// The checklist shows a step's tool results before the next model
		// call. Normally it already does (see above); after a crash between
		// the last result and the edit that shows it, it catches up here.
		if st := rs.step; st != nil && !st.final {
			if err := d.syncChecklist(ctx, rs.Status); err != nil {
				return err
			}
		}
		if err := d.modelStep(ctx); err != nil {
			return err
		}
		if rs.Status != core.RunWorking {
			return nil
		}
	}
}

func (d *driver) openCalls() bool {
	st := d.rs.step
	if st == nil || st.final {
		return false
	}
	for _, c := range st.calls {
		if !c.completed {
			return true
		}
	}
	return false
}

// pullSteering folds steering messages the ingress journaled for this run
// since the driver last looked, and reports whether any is still unseen by
// the model.
func (d *driver) pullSteering(ctx context.Context) bool {
	var fresh []core.Command
	_ = d.v.with(ctx, func() {
		if r := d.v.fold.Run(d.rs.ID); r != nil {
			for _, c := range r.Steer {
				if !d.rs.knowsHuman(c.ID()) {
					fresh = append(fresh, c)
				}
			}
		}
	})
	for _, c := range fresh {
		if err := d.rs.apply(c); err != nil {
			d.e.log.WarnContext(ctx, "fold steering message", "run", d.rs.ID, "error", err)
			continue
		}
		d.ack(ctx, d.rs.human(c.ID()))
	}
	return len(d.rs.pendingSteering()) > 0
}

// unseenSteeringLocked reports a journaled steering message rs has not
// folded. Callers hold d.v.mu.
func (d *driver) unseenSteeringLocked() bool {
	if r := d.v.fold.Run(d.rs.ID); r != nil {
		for _, c := range r.Steer {
			if !d.rs.knowsHuman(c.ID()) {
				return true
			}
		}
	}
	return false
}

// appendRun appends run-scoped drafts to the run's channel and folds them.
// A run cancelled meanwhile (the ingress journaled its end) takes no
// further step: only the results of work already under way are recorded.
func (d *driver) appendRun(ctx context.Context, check func() error, drafts ...core.Draft) ([]core.Command, error) {
	guard := func() error {
		if !d.rs.Done() && !onlyResults(drafts) {
			if r := d.v.fold.Run(d.rs.ID); r != nil && r.Status.Terminal() {
				return errRunEnded
			}
		}
		if check != nil {
			return check()
		}
		return nil
	}
	cmds, err := d.v.append(ctx, guard, drafts...)
	if err != nil {
		if isJournalError(err) {
			d.outage.note(d.rs) // the checklist may have been posted since the drive began
		}
		return nil, err
	}
	for _, c := range cmds {
		if err := d.rs.apply(c); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

var errRunEnded = errors.New("the run was ended meanwhile")

func onlyResults(drafts []core.Draft) bool {
	for _, d := range drafts {
		if d.Kind() != core.KindToolCompleted {
			return false
		}
	}
	return true
}

// ended reports whether the run was ended outside this drive (cancelled).
func (d *driver) ended(ctx context.Context) bool {
	var end bool
	_ = d.v.with(ctx, func() {
		if r := d.v.fold.Run(d.rs.ID); r != nil && r.Status.Terminal() && !d.rs.Done() {
			end = true
		}
	})
	return end
}

func (d *driver) agent(m core.Meta, p core.Payload) (core.Draft, error) {
	return d.e.b.Agent(d.rs.ID, d.rs.Scope, m, p)
}
