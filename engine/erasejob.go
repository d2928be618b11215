package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// The erasure job (docs/privacy.md, "How `forget me` runs"). A confirmed
// `forget me` journals, with the click, a run.started whose trigger names
// the request (erasureTrigger + id), in a thread of its own in the DM, so
// the person's next DM message is answered while it works. That run is the
// job: driven like any run by the replica holding the DM channel's lease,
// with the engine's context (never the click delivery's), resumed from the
// journal after a restart (Journal.Unfinished lists it until its
// run.completed). It erases (erasePerson, which may be run again from the
// start: what is erased is skipped), says in the DM how far it got, posts
// what it did, and completes. Its posts are keyed by the run.started's seq,
// so a resumed job posts nothing twice.

// erasureTrigger prefixes the run.started trigger of an erasure job.
const erasureTrigger = "erasure:"

// erasureJobScope is where the job of request id runs: its own thread of
// the DM (a mailbox key and the fold's thread; its posts go to the DM).
func erasureJobScope(dm core.Scope, id string) core.Scope {
	dm.Thread = "erasure-" + id
	return dm
}

// isErasureJob reports whether rs is an erasure job.
func isErasureJob(rs *RunReplay) bool { return strings.HasPrefix(rs.Trigger, erasureTrigger) }

// eraseJob drives an erasure job to its end. An error leaves the run
// unfinished: it is retried, and resumed at the next start.
func (d *driver) eraseJob(ctx context.Context) error {
	rs, e := d.rs, d.e
	if rs.Done() {
		return nil
	}
	id := strings.TrimPrefix(rs.Trigger, erasureTrigger)
	var er *fold.Erasure
	if err := d.v.with(ctx, func() { er = d.v.fold.Erasure(id) }); err != nil {
		return journalFailed(err)
	}
	if er == nil || er.Decision != "confirmed" {
		e.log.WarnContext(ctx, "erasure job without a confirmed request: nothing erased", "run", rs.ID, "erasure", id)
		return d.endErasureJob(ctx)
	}
	dm := rs.Scope
	dm.Thread = ""
	say := func(part int, text string) error {
		out := core.Outbound{Key: core.EffectID(dm.Key(), rs.startSeq, part), Scope: dm, Text: text, Priority: core.PriorityHigh}
		_, err := e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleNotice, keySeq: rs.startSeq})
		return err
	}
	reason := "forget " + er.Person + " asked by " + er.By.ID + " (" + id + ")"
	quarter := 0
	got, err := e.erasePerson(ctx, dm.Platform, er.Person, er.DecidedBy, reason, func(done, total int) {
		if q := done * 4 / total; q > quarter && q < 4 {
			quarter = q
			if err := say(q, fmt.Sprintf("🧹 Erasing: %d%% done (%d of %d steps, two per channel).", q*25, done, total)); err != nil {
				e.log.Warn("erasure progress not posted", "run", rs.ID, "error", err)
			}
		}
	})
	if err != nil {
		e.log.WarnContext(ctx, "erasure job stopped partway: it resumes", "run", rs.ID, "erasure", id, "error", err)
		return err
	}
	if err := say(4, got.text(er.Person, er.By.ID, dm.Platform)); err != nil {
		return err
	}
	e.log.InfoContext(ctx, "person forgotten", "erasure", id, "by", er.By.ID, "channels", len(got.channels))
	return d.endErasureJob(ctx)
}

func (d *driver) endErasureJob(ctx context.Context) error {
	cd, err := d.agent(core.Meta{}, &core.RunCompleted{})
	if err != nil {
		return err
	}
	_, err = d.appendRun(ctx, nil, cd)
	return err
}
