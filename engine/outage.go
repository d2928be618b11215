package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/replica"
)

// Journal outages. When the database goes away mid-run, a drive fails on a
// journal read or append. Nothing was lost — every step is journaled before
// its effects — so the run waits for the journal and goes on by itself: it
// retries with a capped backoff for as long as its wall-time budget allows,
// and once the outage has lasted OutageNotice it says so on its checklist.

// DefaultOutageNotice is how long a journal outage lasts before a run says
// it is blocked on it.
const DefaultOutageNotice = 10 * time.Second

// maxOutageBackoff caps the wait between retries during an outage, so a run
// continues within seconds of the database's return.
const maxOutageBackoff = 5 * time.Second

// blockedText is what a run's checklist shows while the journal is away.
const blockedText = "⏸ Blocked: the database is unavailable. I'll continue by myself when it is back."

// journalError marks a failure of the journal itself (read, load or
// append), as opposed to the run's own logic.
type journalError struct{ err error }

func (e *journalError) Error() string { return e.err.Error() }
func (e *journalError) Unwrap() error { return e.err }

// journalFailed wraps err as a journal failure; nil and the append
// precondition (errCheckFailed) stay as they are.
func journalFailed(err error) error {
	if err == nil || errors.Is(err, errCheckFailed) || errors.Is(err, replica.ErrLeaseLost) {
		return err
	}
	var je *journalError
	if errors.As(err, &je) {
		return err
	}
	return &journalError{err: err}
}

func isJournalError(err error) bool {
	var je *journalError
	return errors.As(err, &je)
}

// outageView is where a run's checklist is, or would be, as of the last
// state a drive of it loaded: all the retry loop needs to say the run is
// blocked while the journal cannot be read.
type outageView struct {
	known    bool
	platform string
	key      string // the checklist's effect key
	scope    core.Scope
	ref      *core.MessageRef
}

// note records rs's checklist; a nil view (a caller that does not retry
// through outages) records nothing.
func (o *outageView) note(rs *RunReplay) {
	if o == nil || rs == nil || !rs.started {
		return
	}
	*o = outageView{known: true, platform: rs.Scope.Platform, key: rs.checklistEffect(), scope: rs.Scope}
	if ref, ok := rs.Effects[o.key]; ok {
		o.ref = &ref
	}
}

// showOutage puts the blocked notice on the run's checklist: an edit of the
// checklist, or — for a run that has none yet — the checklist itself, posted
// under its own effect key so the run's later post of it is the same
// message. Nothing is journaled: the journal is what is missing.
func (e *Engine) showOutage(ctx context.Context, o outageView) error {
	if !o.known {
		return errors.New("the run was never loaded")
	}
	s, err := e.surface(o.platform)
	if err != nil {
		return err
	}
	out := core.Outbound{Key: o.key, Scope: o.scope, Text: blockedText, Priority: core.PriorityEdit}
	if o.ref != nil {
		if err := s.Update(ctx, *o.ref, out); err != nil {
			return fmt.Errorf("show outage on the checklist: %w", err)
		}
		return nil
	}
	if _, err := s.Post(ctx, out); err != nil {
		return fmt.Errorf("post outage notice: %w", err)
	}
	return nil
}

// driveThroughOutages drives run, retrying: a journal outage for as long as
// the run's wall-time budget allows (telling people after OutageNotice),
// any other failure driveAttempts times.
func (e *Engine) driveThroughOutages(ctx context.Context, run string, resume bool) {
	wait := e.cfg.RetryBackoff
	var view outageView
	var outageSince time.Time
	shown := false
	for attempt := 1; ; {
		err := e.drive(ctx, run, resume || attempt > 1 || !outageSince.IsZero(), &view)
		if errors.Is(err, replica.ErrLeaseLost) {
			// Another replica owns the channel now and resumes the run
			// from the journal; this one must not touch it again.
			if view.known {
				e.lose(view.scope.Key(), "fenced append")
			}
			e.log.WarnContext(ctx, "run handed over: the channel's lease passed to another replica", "run", run, "error", err)
			return
		}
		if err == nil || ctx.Err() != nil {
			if !outageSince.IsZero() && err == nil {
				e.log.InfoContext(ctx, "run continued after the journal came back", "run", run, "outage", time.Since(outageSince).Round(time.Millisecond))
			}
			return
		}
		if isJournalError(err) {
			if outageSince.IsZero() {
				outageSince = time.Now()
				e.log.WarnContext(ctx, "journal unavailable; the run waits for it", "run", run, "error", err)
			}
			out := time.Since(outageSince)
			if out > e.budgets.MaxWall {
				e.log.ErrorContext(ctx, "run stopped: the journal was unavailable for longer than its time budget; the next message, click or restart resumes it",
					"run", run, "outage", out.Round(time.Second), "error", err)
				return
			}
			if !shown && out >= e.cfg.OutageNotice && !e.mayShowOutage(ctx) {
				shown = true // and never later: another replica may be driving the run now
				e.log.InfoContext(ctx, "outage notice withheld: another live replica may have taken the run over", "run", run)
			}
			if !shown && out >= e.cfg.OutageNotice {
				if serr := e.showOutage(ctx, view); serr != nil {
					e.log.WarnContext(ctx, "could not show the outage on the checklist", "run", run, "error", serr)
				} else {
					shown = true
				}
			}
		} else {
			if attempt == driveAttempts {
				// The run stays unfinished in the journal; the next message
				// in its thread, click or Start resumes it.
				e.log.ErrorContext(ctx, "run stopped on an error", "run", run, "attempts", attempt, "error", err)
				return
			}
			e.log.WarnContext(ctx, "run interrupted by an error; retrying", "run", run, "attempt", attempt, "error", err)
			attempt++
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if isJournalError(err) {
			wait = min(wait*2, maxOutageBackoff)
		} else {
			wait *= 4
		}
	}
}
