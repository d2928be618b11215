package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

func (d *driver) cardEffect(a *runApproval) string { return core.EffectID(a.scope.Key(), a.seq, 0) }

// showCard posts the approval's card unless it is already posted, and
// shows the wait on the checklist.
func (d *driver) showCard(ctx context.Context, a *runApproval) error {
	if a.req.Unattended {
		return d.showInbox(ctx, a) // nobody watches the thread: the owner's inbox only
	}
	card, err := approvalCard(d.e.cfg.CardKey, a.req, nil, time.Time{})
	if err != nil {
		return err
	}
	out := core.Outbound{Key: d.cardEffect(a), Scope: d.rs.Scope, Text: card.Title, Card: card, Priority: core.PriorityHigh}
	if _, err := d.e.post(ctx, d.s, d.rs, out, postRecord{run: d.rs.ID, cause: a.req.ApprovalID, role: core.RoleCard, answering: d.rs.latestHuman()}); err != nil {
		return err
	}
	if err := d.showInbox(ctx, a); err != nil {
		return err
	}
	return d.syncChecklist(ctx, d.rs.Status)
}

// showResolution edits every rendering of a decided card in place (the
// thread's and each DM inbox's): who decided, and when.
func (d *driver) showResolution(ctx context.Context, a *runApproval) error {
	if a.res == nil {
		return nil
	}
	homes := false
	for _, eff := range d.renderings(a) {
		if eff == d.cardEffect(a) && a.cardShown >= a.resSeq {
			continue
		}
		ref, ok := d.rs.Effects[eff]
		if !ok {
			continue // never posted (superseded before it went out)
		}
		card, err := d.renderingCard(a, eff)
		if err != nil {
			return err
		}
		if d.rs.shown[eff] == card.Resolution {
			continue
		}
		if err := d.e.cosmetic(ctx, d.e.edit(ctx, d.s, d.rs, eff, ref, core.Outbound{Text: card.Title + "\n" + card.Resolution, Card: card, Priority: core.PriorityHigh})); err != nil {
			return err
		}
		homes = homes || eff != d.cardEffect(a)
	}
	if homes {
		d.refreshHomes(ctx, a)
	}
	return nil
}

func (d *driver) expire(ctx context.Context, a *runApproval) error {
	ed, err := d.e.b.System("expiry", a.scope, core.Meta{Run: d.rs.ID}, &core.ApprovalResolved{ApprovalID: a.req.ApprovalID, Decision: "expired"})
	if err != nil {
		return err
	}
	_, err = d.appendRun(ctx, func() error {
		if x := d.v.fold.Approval(a.req.ApprovalID); x != nil && !x.Pending() {
			return errCheckFailed // decided meanwhile; the fold below catches up
		}
		return nil
	}, ed)
	if errors.Is(err, errCheckFailed) {
		return fmt.Errorf("approval %s was decided while expiring it: %w", a.req.ApprovalID, err)
	}
	return err
}

func (d *driver) ensureChecklist(ctx context.Context) error {
	rs := d.rs
	eff := rs.checklistEffect()
	if _, ok := rs.Effects[eff]; ok {
		return nil
	}
	out := core.Outbound{Key: eff, Scope: rs.Scope, Text: renderChecklist(rs), Priority: core.PriorityNormal}
	var trigger *humanMsg
	if len(rs.humans) > 0 {
		trigger = rs.latestHuman()
	}
	rec := postRecord{run: rs.ID, role: core.RoleChecklist, answering: trigger}
	if st := d.wantsStream(ctx); st != nil {
		return d.startStream(ctx, st, out, rec)
	}
	_, err := d.e.post(ctx, d.s, rs, out, rec)
	return err
}

// syncChecklist edits the checklist to show rs as if in status st, if the
// text changed.
func (d *driver) syncChecklist(ctx context.Context, st core.RunStatus) error {
	rs := d.rs
	eff := rs.checklistEffect()
	ref, ok := rs.Effects[eff]
	if !ok {
		return nil // grammar runs have no checklist
	}
	saved := rs.Status
	rs.Status = st
	text := renderChecklist(rs)
	rs.Status = saved
	if rs.shown[eff] == text || rs.streamDone || rs.answerInChecklist {
		return nil
	}
	if sr := d.streamer(); sr != nil {
		return d.syncStream(ctx, sr, st, text)
	}
	return d.e.cosmetic(ctx, d.e.edit(ctx, d.s, rs, eff, ref, core.Outbound{Text: text, Priority: core.PriorityEdit}))
}

// reissueEdits repeats the last journaled edit of the checklist and of each
// decided card with the same key: a crash may have come between journaling
// an edit and performing it.
func (d *driver) reissueEdits(ctx context.Context) error {
	rs := d.rs
	if err := d.reissueStream(ctx); err != nil {
		return err
	}
	for eff, u := range rs.updates {
		ref, ok := rs.Effects[eff]
		if !ok || (rs.streamed || rs.answerInChecklist) && eff == rs.checklistEffect() {
			continue
		}
		out := core.Outbound{Key: core.EffectID(u.ch, u.seq, 0), Scope: ref.Scope, Text: u.text, Priority: core.PriorityEdit}
		for _, a := range rs.approvals {
			if a.res != nil && slices.Contains(d.renderings(a), eff) {
				card, err := d.renderingCard(a, eff)
				if err != nil {
					return err
				}
				out.Card, out.Text = card, card.Title+"\n"+card.Resolution
			}
		}
		if err := d.e.mayAct(ctx); err != nil {
			return fmt.Errorf("re-issue edit %s: %w", out.Key, err)
		}
		if err := d.s.Update(ctx, ref, out); err != nil {
			return fmt.Errorf("re-issue edit %s: %w", out.Key, err)
		}
	}
	return nil
}

// maxAnswerInChecklist bounds the answer that replaces an empty checklist:
// an edit cannot split a long text into several messages as a post does
// (Discord's 2,000 characters are the smallest limit), so a longer answer
// is posted below the checklist instead.
const maxAnswerInChecklist = 1800

// emptyChecklist returns the run's plain (not streamed) checklist when it
// lists nothing, neither plan items nor steps, and text fits in its one
// message: the answer then takes its place.
func (d *driver) emptyChecklist(ctx context.Context, text string) (core.MessageRef, bool) {
	rs := d.rs
	ref, ok := rs.Effects[rs.checklistEffect()]
	if !ok || rs.streamed || rs.answerInChecklist || len(rs.plan) > 0 || len(rs.trail) > 0 || utf8.RuneCountInString(text) > maxAnswerInChecklist {
		return core.MessageRef{}, false
	}
	if ae, ok := d.s.(core.AnswersElsewhere); ok {
		if h := rs.latestHuman(); h != nil && ae.AnswersElsewhere(ctx, h.msgID) {
			return core.MessageRef{}, false // the answer has a place of its own
		}
	}
	return ref, true
}

// finish posts the final answer (unless the run already answered through
// reply_in_thread since the latest message), marks the checklist done and
// completes the run — unless a steering message arrived meanwhile, in which
// case the loop goes on so the message is not dropped.
func (d *driver) finish(ctx context.Context) (bool, error) {
	rs := d.rs
	st := rs.step
	if !rs.answerPosted {
		text := strings.TrimSpace(st.text)
		if text == "" {
			text = "Done."
		}
		if h := rs.latestHuman(); h != nil && rs.inputLimit > 0 && utf8.RuneCountInString(h.text) > rs.inputLimit {
			text += fmt.Sprintf("\n\n_(Your message was long: I read only its first %d characters.)_", rs.inputLimit)
		}
		if _, shown := rs.Effects[rs.checklistEffect()]; rs.degraded && !shown && !strings.Contains(text, "keywords only") {
			// No checklist to carry the mark: the answer says it.
			text += "\n\n_(memory: degraded, keywords only)_"
		}
		out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), st.seq, 0), Scope: rs.Scope, Text: text, Priority: core.PriorityHigh}
		rec := postRecord{run: rs.ID, role: core.RoleAnswer, answering: rs.latestHuman(), keySeq: st.seq}
		var err error
		sr := d.streamer()
		if _, shown := rs.Effects[rs.checklistEffect()]; !shown {
			sr = d.wantsStream(ctx) // no checklist: the answer streams on its own
		}
		switch ref, ok := d.emptyChecklist(ctx, text); {
		case sr != nil && !rs.streamDone:
			err = d.streamAnswer(ctx, sr, out, rec)
		case ok:
			// Nothing was listed: the checklist becomes the answer rather
			// than an empty "Done" above it. The edit is state, so a
			// resumed run repeats it safely until message.posted records it.
			rec.send = func(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
				return ref, d.s.Update(ctx, ref, out)
			}
			_, err = d.e.post(ctx, d.s, rs, out, rec)
		default:
			_, err = d.e.post(ctx, d.s, rs, out, rec)
		}
		if err != nil {
			return false, err
		}
	}
	if err := d.syncChecklist(ctx, core.RunDone); err != nil {
		return false, err
	}
	// No summary: the answer is already in the final model.step and its
	// message.posted, and a copy in run.completed (a record the folds need,
	// which an erasure therefore never redacts) would keep a text an
	// erasure must be able to remove.
	cd, err := d.agent(core.Meta{}, &core.RunCompleted{})
	if err != nil {
		return false, err
	}
	_, err = d.appendRun(ctx, func() error {
		if d.unseenSteeringLocked() {
			return errCheckFailed
		}
		return nil
	}, cd)
	if errors.Is(err, errCheckFailed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d.e.metrics().RunEnded(core.RunDone)
	d.e.log.InfoContext(ctx, "run completed", "run", rs.ID, "steps", rs.Steps, "tokens", rs.Tokens)
	return true, nil
}

// pause parks the run (blocked or needs-permission) and says why.
func (d *driver) pause(ctx context.Context, st core.RunStatus, why string) error {
	pd, err := d.agent(core.Meta{}, &core.RunPaused{Status: st, Reason: why})
	if err != nil {
		return err
	}
	if _, err := d.appendRun(ctx, nil, pd); err != nil {
		return err
	}
	d.e.log.InfoContext(ctx, "run paused", "run", d.rs.ID, "status", string(st), "reason", why)
	return d.reconcilePause(ctx)
}

func (d *driver) reconcilePause(ctx context.Context) error {
	rs := d.rs
	p := rs.pause
	if p == nil {
		return nil
	}
	if p.status == core.RunNeedsPermission {
		return d.reconcileNeedsPermission(ctx)
	}
	if err := d.syncChecklist(ctx, rs.Status); err != nil {
		return err
	}
	text := "⏸ I had to pause: " + p.reason + ".\n" +
		"An admin can raise the budget (`policy set budget <tokens>`), or mention me again to start over."
	if !strings.Contains(p.reason, "budget") {
		text = "⏸ I had to pause: " + p.reason + ". Mention me again to retry."
	}
	out := core.Outbound{Key: core.EffectID(p.ch, p.seq, 0), Scope: rs.Scope, Text: text, Priority: core.PriorityHigh}
	_, err := d.e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleNotice, answering: rs.latestHuman()})
	return err
}

// fail ends the run (broken or cancelled) with its cause.
func (d *driver) fail(ctx context.Context, st core.RunStatus, cause string) error {
	fd, err := d.agent(core.Meta{}, &core.RunFailed{Status: st, Cause: cause})
	if err != nil {
		return err
	}
	if _, err := d.appendRun(ctx, nil, fd); err != nil {
		return err
	}
	d.e.metrics().RunEnded(st)
	d.e.log.InfoContext(ctx, "run ended", "run", d.rs.ID, "status", string(st), "cause", cause)
	return d.reconcileEnd(ctx)
}

// reconcileEnd makes a failed run's terminal state visible: checklist and a
// notice in the thread (idempotent: re-driving posts nothing twice).
func (d *driver) reconcileEnd(ctx context.Context) error {
	rs := d.rs
	if rs.Status == core.RunDone {
		return nil
	}
	if err := d.syncChecklist(ctx, rs.Status); err != nil {
		return err
	}
	for _, id := range rs.approvalOrder {
		// A cancel decides the run's open cards on its way out.
		if err := d.showResolution(ctx, rs.approvals[id]); err != nil {
			return err
		}
	}
	if rs.endSeq == 0 || rs.Reason == fold.CauseSuperseded {
		return nil // the new run's checklist says everything
	}
	prefix := "❌ I couldn't finish this: "
	if rs.Status == core.RunCancelled {
		prefix = "🚫 Stopped: "
	}
	out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), rs.endSeq, 0), Scope: rs.Scope, Text: prefix + rs.Reason + ".", Priority: core.PriorityHigh}
	_, err := d.e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleNotice, answering: rs.latestHuman()})
	return err
}
