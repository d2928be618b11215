package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// noticeHorizon bounds how far back a pass reports: a restart does not
// re-check every skip of last year.
const noticeHorizon = 7 * 24 * time.Hour

// notify sends n once (per process here; NotifyOwner checks the DM's
// journal across processes).
func (s *Scheduler) notify(ctx context.Context, n core.OwnerNotice) error {
	if s.noticed[n.Key] || s.eng == nil {
		return nil
	}
	if err := s.eng.NotifyOwner(ctx, n); err != nil {
		return fmt.Errorf("routine owner notice %s: %w", n.Key, err)
	}
	s.noticed[n.Key] = true
	return nil
}

// noticeSkip tells the owner a slot did not fire and why.
// A coalesced slot is not reported: its catch-up firing says how many
// slots were missed.
func (s *Scheduler) noticeSkip(ctx context.Context, r *Routine, f *Firing) error {
	if f.Coalesced || s.cfg.Clock().Sub(f.At) > noticeHorizon {
		return nil
	}
	return s.notify(ctx, core.OwnerNotice{Where: r.Scope, Owner: r.Owner, Key: "routine-skipped:" + f.CmdID, Cause: f.CmdID,
		Title: fmt.Sprintf("⏭️ Routine %s skipped its %s slot", r.ID, slotIn(f.Slot, r.TZ)),
		Body:  "Nothing was posted for this slot: " + f.Reason + ". The next slot fires as usual.",
		Fields: []core.CardField{{Label: "Routine", Value: fmt.Sprintf("`%s` (%s) — %s", r.Spec, r.TZ, firstLine(r.Instruction, 120))},
			{Label: "Missed", Value: fmt.Sprintf("%d slot(s)", f.Missed+1)}}})
}

// noticeUndelivered tells the owner a firing's post never arrived: it is
// not reported as done anywhere.
func (s *Scheduler) noticeUndelivered(ctx context.Context, r *Routine, f *Firing) error {
	if s.cfg.Clock().Sub(f.At) > noticeHorizon {
		return nil
	}
	run := "no run (digest)"
	if f.Started {
		run = "run " + f.RunID + ": " + f.RunStatus
	}
	return s.notify(ctx, core.OwnerNotice{Where: r.Scope, Owner: r.Owner, Key: "routine-undelivered:" + f.CmdID, Cause: f.CmdID,
		Title: fmt.Sprintf("⚠️ Routine %s: the %s post never arrived", r.ID, slotIn(f.Slot, r.TZ)),
		Body: fmt.Sprintf("The slot fired but its post failed and kept failing for %s; I stopped retrying. `routines` shows it as post FAILED; `routine run %s` tries again now.",
			s.cfg.Grace, r.ID),
		Fields: []core.CardField{{Label: "Run", Value: run}}})
}

func slotIn(t time.Time, tz string) string {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	return t.In(loc).Format("Mon 2 Jan 15:04 MST")
}
