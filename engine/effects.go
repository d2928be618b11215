package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/marlowe-bot/marlowe/core"
)

// Post effects follow one rule: the command that requests a post is
// journaled first (run.started for the checklist, model.step for an answer,
// approval.requested for a card, tool.requested for a tool's post,
// run.paused / run.failed for a notice); the post is then performed with the
// deterministic effect id as its idempotency key; and message.posted records
// the effect id and the platform message id. A crash between the post and
// the record re-issues the post with the same key (surfaces drop a key they
// have performed); once the record exists the post is never issued again.
// Edits (message.updated) are journaled before they are performed.

const maxPostedText = 4000

// postRecord describes the message.posted to journal after a post.
type postRecord struct {
	run       string
	cause     string
	role      string
	answering *humanMsg
	// send, when set, performs the post instead of Surface.Post (a
	// stream's start or its answer); stream marks the record as a stream.
	send   func(context.Context, core.Outbound) (core.MessageRef, error)
	stream bool
	// keySeq is the seq of the command out.Key derives from (0: not
	// known). A resumed run's post keyed to a command this drive appended
	// is not in doubt: no earlier drive can have made it, since the key
	// did not exist before (and a surface looks each post in doubt up on
	// the platform first, paced: Slack's history to one read a second).
	keySeq uint64
}

// post performs out (out.Key set) unless rs already records it, then
// journals message.posted in the channel posted to and tells the observer.
func (e *Engine) postOnce(ctx context.Context, s core.Surface, rs *RunReplay, out core.Outbound, rec postRecord) (core.MessageRef, error) {
	if rs != nil {
		if ref, ok := rs.Effects[out.Key]; ok {
			return ref, nil
		}
	}
	if rs != nil && rs.resumed && rec.keySeq <= rs.resumeHead {
		out.Resumed = true
	}
	v, err := e.channel(ctx, out.Scope.Key())
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("post %s (%s): %w", rec.role, out.Key, err)
	}
	pm := core.PostedMessage{Scope: out.Scope, Role: rec.role}
	if h := rec.answering; h != nil {
		pm.Answering, pm.AnsweringUser, pm.AnsweringTop, pm.AnsweringDM = h.msgID, h.author.ID, h.top, h.dm
		pm.AnsweringAt = h.arrived
		out.Answering = h.msgID
	}
	if obs, ok := e.cfg.PostObserver.(core.PostIntentObserver); ok {
		// Open the windows the post opens before the platform shows it, so
		// a reply sent the instant it appears is routed. The observation
		// after message.posted repeats it with the message id; a post that
		// then fails leaves a window open for nothing, which is harmless.
		pre := pm
		pre.At = e.now()
		_ = v.with(ctx, func() { pre.Policy = e.policyLocked(v) })
		if err := obs.ObservePostIntent(ctx, pre); err != nil {
			e.log.WarnContext(ctx, "post observer failed", "channel", string(out.Scope.Key()), "error", err)
		}
	}
	if err := e.mayAct(ctx); err != nil {
		return core.MessageRef{}, fmt.Errorf("post %s (%s): %w", rec.role, out.Key, err)
	}
	var ref core.MessageRef
	if ap, ok := s.(core.AttemptedPoster); ok && rec.send == nil && out.Key != "" {
		ref, err = ap.PostAttempted(e.guardActs(ctx), out, postAttempts{e: e, v: v, scope: out.Scope, rec: rec})
	} else {
		send := s.Post
		if rec.send != nil {
			send = rec.send
		}
		ref, err = send(e.guardActs(ctx), out)
	}
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("post %s (%s): %w", rec.role, out.Key, err)
	}
	text := out.Text
	if out.Card != nil {
		text = out.Card.Title
	}
	mp := &core.MessagePosted{EffectID: out.Key, MessageID: ref.ID, Role: rec.role, Text: core.Truncate(text, maxPostedText), Stream: rec.stream}
	if h := rec.answering; h != nil {
		mp.Answering, mp.AnsweringUser, mp.AnsweringTop = h.msgID, h.author.ID, h.top
	}
	var d core.Draft
	if rec.run != "" {
		d, err = e.b.Agent(rec.run, out.Scope, core.Meta{Cause: rec.cause}, mp)
	} else {
		d, err = e.b.System("engine", out.Scope, core.Meta{Cause: rec.cause}, mp)
	}
	if err != nil {
		return ref, fmt.Errorf("record post %s: %w", out.Key, err)
	}
	cmds, err := v.appendPlan(ctx, func() ([]core.Draft, error) {
		pm.Policy = e.policyLocked(v)
		return []core.Draft{d}, nil
	})
	if err != nil {
		return ref, fmt.Errorf("record post %s: %w", out.Key, err)
	}
	if rs != nil && rec.run == rs.ID {
		if err := rs.apply(cmds[0]); err != nil {
			return ref, err
		}
	}
	if obs := e.cfg.PostObserver; obs != nil {
		pm.Command, pm.MessageID, pm.At = cmds[0], ref.ID, cmds[0].At()
		if err := obs.ObservePost(ctx, pm); err != nil {
			e.log.WarnContext(ctx, "post observer failed", "channel", string(out.Scope.Key()), "error", err)
		}
	}
	return ref, nil
}

// postAttempts journals a surface's send attempts in the channel posted to
// (message.attempted, under the run when there is one: the run's lease
// fences it) and answers from the channel's fold whether one was recorded.
type postAttempts struct {
	e     *Engine
	v     *chanView
	scope core.Scope
	rec   postRecord
}

func (a postAttempts) Made(ctx context.Context, key string) bool {
	made := true // unknown counts as attempted: the marker is the safe side
	_ = a.v.with(ctx, func() { made = a.v.fold.Attempted(key) })
	return made
}

func (a postAttempts) Record(ctx context.Context, key string) error {
	p := &core.MessageAttempted{EffectID: key}
	var d core.Draft
	var err error
	if a.rec.run != "" {
		d, err = a.e.b.Agent(a.rec.run, a.scope, core.Meta{Cause: a.rec.cause}, p)
	} else {
		d, err = a.e.b.System("engine", a.scope, core.Meta{Cause: a.rec.cause}, p)
	}
	if err == nil {
		_, err = a.v.append(ctx, nil, d)
	}
	if err != nil {
		return fmt.Errorf("record send attempt %s: %w", key, err)
	}
	return nil
}

// edit journals message.updated for the message posted as effect, then
// performs the edit keyed by the update's own effect id.
func (e *Engine) edit(ctx context.Context, s core.Surface, rs *RunReplay, effect string, ref core.MessageRef, out core.Outbound) error {
	text := out.Text
	if out.Card != nil {
		text = out.Card.Resolution
	}
	return e.journalEdit(ctx, rs, effect, ref, text, func(ctx context.Context, key string) error {
		out.Key, out.Scope = key, ref.Scope
		return s.Update(ctx, ref, out)
	})
}

// journalEdit journals message.updated for the message posted as effect,
// then performs the edit (perform gets the update's own effect id as key).
func (e *Engine) journalEditOnce(ctx context.Context, rs *RunReplay, effect string, ref core.MessageRef, text string, perform func(ctx context.Context, key string) error) error {
	d, err := e.b.Agent(rs.ID, ref.Scope, core.Meta{}, &core.MessageUpdated{EffectID: effect, MessageID: ref.ID, Text: core.Truncate(text, maxPostedText)})
	if err != nil {
		return fmt.Errorf("edit %s: %w", effect, err)
	}
	v, err := e.channel(ctx, ref.Scope.Key())
	if err != nil {
		return fmt.Errorf("edit %s: %w", effect, err)
	}
	cmds, err := v.append(ctx, nil, d)
	if err != nil {
		return fmt.Errorf("edit %s: %w", effect, err)
	}
	if err := rs.apply(cmds[0]); err != nil {
		return err
	}
	key := core.EffectID(ref.Scope.Key(), cmds[0].Seq(), 0)
	if err := e.mayAct(ctx); err != nil {
		return fmt.Errorf("edit %s: %w", effect, err) // journaled: reissueEdits performs it
	}
	if err := perform(e.guardActs(ctx), key); err != nil {
		return &editError{effect: effect, err: err}
	}
	return nil
}

// editError is a platform's refusal of an edit that is already journaled.
type editError struct {
	effect string
	err    error
}

func (e *editError) Error() string { return fmt.Sprintf("edit %s: %v", e.effect, e.err) }
func (e *editError) Unwrap() error { return e.err }

// cosmetic downgrades a failed edit of the checklist or of a decided card to
// a warning: the edit is journaled and the run's result is posted on its
// own, so a platform that refuses edits (a deleted message, a missing
// permission) must not stall the run. Crash recovery re-issues it.
func (e *Engine) cosmetic(ctx context.Context, err error) error {
	var ee *editError
	if err != nil && ctx.Err() == nil && errors.As(err, &ee) {
		e.log.WarnContext(ctx, "edit failed; continuing without it", "effect", ee.effect, "error", ee.err)
		return nil
	}
	return err
}

// postNotice posts a reply that is not part of a run's loop (a refused
// click) and records it.
func (e *Engine) postNotice(ctx context.Context, n *notice) error {
	s, err := e.surface(n.scope.Platform)
	if err != nil {
		return err
	}
	text := n.text
	if n.to != "" {
		// Privately where the platform can; otherwise (or when that fails)
		// in the open, addressed, rather than not at all.
		eph, ok := s.(core.Ephemeral)
		if ok {
			err := eph.PostEphemeral(ctx, n.scope, n.to, n.text)
			if err == nil {
				return nil
			}
			if n.onlyPrivate {
				e.log.InfoContext(ctx, "private notice failed; not posting it in the open", "platform", n.scope.Platform, "user", n.to, "error", err)
				return nil
			}
			e.log.WarnContext(ctx, "post ephemeral notice failed; posting it addressed instead", "platform", n.scope.Platform, "user", n.to, "error", err)
		}
		text = core.MentionOf(n.to) + " " + n.text
	}
	role := core.RoleNotice
	if n.card != nil {
		role = core.RoleCard
	}
	_, err = e.post(ctx, s, nil, core.Outbound{Key: n.key, Scope: n.scope, Text: text, Card: n.card, Priority: core.PriorityHigh},
		postRecord{run: n.run, cause: n.cause, role: role})
	return err
}

// toolSurface is the Surface a tool sees: the run's surface with every post
// keyed deterministically (from the tool.requested seq) and recorded in the
// journal, so a re-executed tool after a crash does not post twice. Tools
// never see the journal itself.
type toolSurface struct {
	core.Surface
	e    *Engine
	d    *driver
	cs   *callState
	mu   sync.Mutex
	next int // posts so far in this execution: the effect index
}

var errToolRun = errors.New("tools cannot receive platform events")

var _ core.SurfaceWrapper = (*toolSurface)(nil)

// Unwrap is the platform's surface: the reachability rule (core.CheckReach,
// core.CheckPersonReach) asks it when a tool runs.
func (t *toolSurface) Unwrap() core.Surface { return t.Surface }

func (t *toolSurface) Run(context.Context, func(context.Context, core.Inbound) error) error {
	return errToolRun
}

func (t *toolSurface) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.d.rs
	if out.Scope.Channel == "" {
		out.Scope = rs.Scope
	}
	if out.Scope.Platform == "" {
		out.Scope.Platform = rs.Scope.Platform
	}
	if out.Scope.Platform != rs.Scope.Platform {
		return core.MessageRef{}, fmt.Errorf("post to %s: a tool can only post on its run's platform (%s)", out.Scope.Platform, rs.Scope.Platform)
	}
	if err := out.Scope.Validate(); err != nil {
		return core.MessageRef{}, fmt.Errorf("post: %w", err)
	}
	t.next++
	out.Key = core.EffectID(rs.Scope.Key(), t.cs.reqSeq, t.next)
	rec := postRecord{run: rs.ID, cause: t.cs.reqID, role: core.RoleMessage, keySeq: t.cs.reqSeq}
	if out.Scope == rs.Scope && out.Card == nil {
		rec.role, rec.answering = core.RoleAnswer, rs.latestHuman()
		if out.Priority < core.PriorityHigh {
			out.Priority = core.PriorityHigh
		}
	}
	return t.e.post(ctx, t.Surface, rs, out, rec)
}

func (t *toolSurface) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	effect := ""
	for id, r := range t.d.rs.Effects {
		if r.ID == ref.ID && r.Scope.Key() == ref.Scope.Key() {
			effect = id
		}
	}
	if effect == "" {
		return fmt.Errorf("update %s: a tool can only edit messages its run posted", ref.ID)
	}
	return t.e.edit(ctx, t.Surface, t.d.rs, effect, ref, out)
}
