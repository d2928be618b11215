package core

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	if err == nil || errors.Is(err, errCheckFailed) {
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

// blockedRun is what the engine needs to tell people a run is blocked
// without reading the journal: where its checklist is, or would be.
type blockedRun struct {
	platform string
	key      string // the checklist's effect key
	scope    Scope
	ref      *MessageRef
}

// noteOutage remembers where run's checklist is, from the driver's last
// good state, for showOutage.
func (e *Engine) noteOutage(rs *RunReplay) {
	if rs == nil || !rs.started {
		return
	}
	b := blockedRun{platform: rs.Scope.Platform, key: rs.checklistEffect(), scope: rs.Scope}
	if ref, ok := rs.Effects[b.key]; ok {
		b.ref = &ref
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.blocked == nil {
		e.blocked = map[string]blockedRun{}
	}
	e.blocked[rs.ID] = b
}

func (e *Engine) forgetOutage(run string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.blocked, run)
}

// showOutage puts the blocked notice on the run's checklist: an edit of the
// checklist, or — for a run that has none yet — the checklist itself, posted
// under its own effect key so the run's later post of it is the same
// message. Nothing is journaled: the journal is what is missing.
func (e *Engine) showOutage(ctx context.Context, run string) error {
	e.mu.Lock()
	b, ok := e.blocked[run]
	e.mu.Unlock()
	if !ok {
		return nil
	}
	s, err := e.surface(b.platform)
	if err != nil {
		return err
	}
	out := Outbound{Key: b.key, Scope: b.scope, Text: blockedText, Priority: PriorityEdit}
	if b.ref != nil {
		if err := s.Update(ctx, *b.ref, out); err != nil {
			return fmt.Errorf("show outage on the checklist of %s: %w", run, err)
		}
		return nil
	}
	if _, err := s.Post(ctx, out); err != nil {
		return fmt.Errorf("post outage notice for %s: %w", run, err)
	}
	return nil
}

// driveThroughOutages drives run, retrying: a journal outage for as long as
// the run's wall-time budget allows (telling people after OutageNotice),
// any other failure driveAttempts times.
func (e *Engine) driveThroughOutages(ctx context.Context, run string, resume bool) {
	defer e.forgetOutage(run)
	wait := e.cfg.RetryBackoff
	var outageSince time.Time
	shown := false
	for attempt := 1; ; {
		err := e.drive(ctx, run, resume || attempt > 1 || !outageSince.IsZero())
		if err == nil || ctx.Err() != nil {
			if !outageSince.IsZero() && err == nil {
				e.log.Info("run continued after the journal came back", "run", run, "outage", time.Since(outageSince).Round(time.Millisecond))
			}
			return
		}
		if isJournalError(err) {
			if outageSince.IsZero() {
				outageSince = time.Now()
				e.log.Warn("journal unavailable; the run waits for it", "run", run, "error", err)
			}
			out := time.Since(outageSince)
			if out > e.budgets.MaxWall {
				e.log.Error("run stopped: the journal was unavailable for longer than its time budget; the next message, click or restart resumes it",
					"run", run, "outage", out.Round(time.Second), "error", err)
				return
			}
			if !shown && out >= e.cfg.OutageNotice {
				if serr := e.showOutage(ctx, run); serr != nil {
					e.log.Warn("could not show the outage on the checklist", "run", run, "error", serr)
				} else {
					shown = true
				}
			}
			wait = min(max(wait, e.cfg.RetryBackoff), maxOutageBackoff)
		} else {
			if attempt == driveAttempts {
				// The run stays unfinished in the journal; the next message
				// in its thread, click or Start resumes it.
				e.log.Error("run stopped on an error", "run", run, "attempts", attempt, "error", err)
				return
			}
			e.log.Warn("run interrupted by an error; retrying", "run", run, "attempt", attempt, "error", err)
			attempt++
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait *= 2
		if isJournalError(err) {
			wait = min(wait, maxOutageBackoff)
		}
	}
}
