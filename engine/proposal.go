package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// A routine the model proposes (the scheduler's schedule_routine tool) is
// journaled disarmed and shown to its requester as a card; only the
// requester's click on Arm arms it (ARCHITECTURE.md section 8). The card's
// tokens name the routine and its routine.created command, so a token can
// never arm another routine that happens to share the short id.

// Proposal card actions: distinct from approval actions ('a', 'd', 'A',
// '0'..'9'), so deliverClick hands them here before looking for an approval.
const (
	actionArmRoutine     = 'R'
	actionDiscardRoutine = 'X'
)

// proposalTitlePrefix starts a proposal card's title (and so the text its
// message.posted records): how showProposal finds the card.
const proposalTitlePrefix = "🗓️ Proposed routine "

// proposalTokenSep joins routine id and routine.created id in a token's id
// (approval ids are bare ULIDs and never contain it).
const proposalTokenSep = "~"

// isProposalAction reports whether a verified token's action is a routine
// proposal's.
func isProposalAction(action byte) bool {
	return action == actionArmRoutine || action == actionDiscardRoutine
}

// RoutineProposalCard renders p's card with signed Arm and Discard buttons.
func (e *Engine) RoutineProposalCard(p core.RoutineProposal) (*core.Card, error) {
	if p.RoutineID == "" || p.CreatedID == "" || p.Owner == "" {
		return nil, fmt.Errorf("proposal card: routine id, creation id and owner are required")
	}
	id := p.RoutineID + proposalTokenSep + p.CreatedID
	arm, err := cardToken(e.cfg.CardKey, id, actionArmRoutine)
	if err != nil {
		return nil, err
	}
	discard, err := cardToken(e.cfg.CardKey, id, actionDiscardRoutine)
	if err != nil {
		return nil, err
	}
	return &core.Card{
		ID:    "proposal-" + p.RoutineID,
		Title: proposalTitlePrefix + p.RoutineID + ": " + p.Words,
		Body:  p.Instruction,
		Fields: []core.CardField{
			{Label: "Schedule", Value: fmt.Sprintf("%s (`%s`, %s)", p.Words, p.Spec, p.TZ)},
			{Label: "Next firings (" + p.TZ + ")", Value: strings.Join(p.Next, "; ")},
			{Label: "Instruction", Value: p.Instruction},
			{Label: "Owner", Value: core.MentionOf(p.Owner)},
			{Label: "Status", Value: "Not armed: it will not run until " + core.MentionOf(p.Owner) + " clicks Arm."},
		},
		Actions: []core.CardAction{
			{ID: "arm", Label: "Arm", Token: arm, Style: "primary"},
			{ID: "discard", Label: "Discard", Token: discard, Style: "danger"},
		},
	}, nil
}

// deliverProposalClick arms or discards the proposal a verified token
// names. Only the routine's owner (its requester) may do either; any other
// click, and a click on a proposal already decided, changes nothing and is
// answered to the clicker alone.
func (e *Engine) deliverProposalClick(ctx context.Context, click core.CardClick, tokenID string, action byte) error {
	rid, created, ok := strings.Cut(tokenID, proposalTokenSep)
	if !ok {
		return nil // a verified token we never mint: nothing to do
	}
	tell := func(sc core.Scope, key, text string) {
		if sc.Validate() == nil {
			e.enqueue(threadKey{sc.Key(), sc.Thread}, job{notice: &notice{key: key, scope: sc, text: text, to: click.By.ID}})
		}
	}
	v, err := e.findRoutine(ctx, click.Scope, rid, created)
	if err != nil {
		return fmt.Errorf("deliver proposal click: %w", err)
	}
	if v == nil {
		e.log.WarnContext(ctx, "proposal click refused: unknown routine", "routine", rid, "by", click.By.ID)
		tell(click.Scope, "proposal-unknown"+rid+click.By.ID, "⚠️ I can't find the routine behind that button, so nothing was done.")
		return nil
	}
	var refusal, done string
	var where core.Scope
	_, err = v.appendPlan(ctx, func() ([]core.Draft, error) {
		refusal, done = "", ""
		r := v.fold.Routine(rid)
		where = r.ProposedIn
		if click.Scope.Validate() == nil {
			where = click.Scope
		}
		clicked, err := e.b.Human(click.By, r.ProposedIn, core.Meta{},
			&core.CardClicked{Card: "proposal-" + rid, Action: string(action), Token: click.Token, By: click.By})
		if err != nil {
			return nil, err
		}
		switch {
		case click.By.ID == "" || click.By.IsBot:
			refusal = "🚫 Only people can arm routines. Nothing was done."
		case click.By.ID != r.Owner:
			refusal = fmt.Sprintf("🚫 Not accepted: only %s, who asked for routine %s, can arm or discard it. It stays disarmed; nothing was done.",
				core.MentionOf(r.Owner), rid)
		case r.Deleted:
			refusal = "Routine " + rid + " was already discarded. Nothing more was done."
		case r.Armed:
			refusal = "Routine " + rid + " is already armed. Nothing more was done."
		case r.Decided:
			refusal = "Routine " + rid + " was already decided (see `routines`). Nothing more was done."
		}
		if refusal != "" {
			return []core.Draft{clicked}, nil
		}
		p := &core.RoutineChanged{RoutineID: rid, Armed: true}
		done = fmt.Sprintf("✅ Routine %s armed by %s: %s. Pause it with `routine pause %s`.", rid, core.MentionOf(click.By.ID), r.Instruction, rid)
		if action == actionDiscardRoutine {
			p = &core.RoutineChanged{RoutineID: rid, Deleted: true}
			done = fmt.Sprintf("🗑️ Routine %s discarded by %s; it will never run.", rid, core.MentionOf(click.By.ID))
		}
		d, err := e.b.Human(click.By, r.ProposedIn, core.Meta{Cause: clicked.ID()}, p)
		if err != nil {
			return nil, err
		}
		return []core.Draft{clicked, d}, nil
	})
	if err != nil {
		return fmt.Errorf("deliver proposal click on %s: %w", rid, err)
	}
	if refusal != "" {
		tell(where, "proposal-refused"+rid+click.By.ID, refusal)
	} else if done != "" {
		e.enqueue(threadKey{where.Key(), where.Thread}, job{notice: &notice{key: "proposal-" + string(action) + rid, scope: where, text: done}})
	}
	// The card shows the decision in place of its buttons; after a refused
	// second click this repairs a card whose edit a crash left undone.
	e.enqueue(threadKey{where.Key(), where.Thread}, job{proposal: &proposalShow{ch: v.key, rid: rid}})
	e.log.InfoContext(ctx, "proposal click", "routine", rid, "by", click.By.ID, "action", string(action), "refused", refusal != "")
	return nil
}

// findRoutine finds the channel holding routine rid created by command
// created: the click's channel first, else any channel in the journal (a
// click from a DM names no channel).
func (e *Engine) findRoutine(ctx context.Context, sc core.Scope, rid, created string) (*chanView, error) {
	has := func(v *chanView) bool {
		found := false
		_ = v.with(ctx, func() {
			if r := v.fold.Routine(rid); r == nil || r.CreatedID != created {
				// The scheduler journals proposals directly: fold what came since.
				if err := v.catchUp(ctx); err != nil {
					e.log.Warn("catch up channel for a proposal click", "channel", string(v.key), "error", err)
				}
			}
			r := v.fold.Routine(rid)
			found = r != nil && r.CreatedID == created
		})
		return found
	}
	if sc.Validate() == nil {
		v, err := e.channel(ctx, sc.Key())
		if err != nil {
			return nil, err
		}
		if has(v) {
			return v, nil
		}
	}
	chs, err := e.j.Channels(ctx)
	if err != nil {
		return nil, fmt.Errorf("find routine %s: %w", rid, err)
	}
	for _, ch := range chs {
		if sc.Validate() == nil && ch == sc.Key() {
			continue
		}
		v, err := e.channel(ctx, ch)
		if err != nil {
			return nil, err
		}
		if has(v) {
			return v, nil
		}
	}
	return nil, nil
}

// proposalShow edits a decided proposal's card in place.
type proposalShow struct {
	ch  core.ChannelKey
	rid string
}

// showProposal replaces a decided proposal card's buttons with who armed or
// discarded it and when: journaled as message.updated in the card's
// channel, then performed, once (a card already edited is left alone).
func (e *Engine) showProposal(ctx context.Context, j *proposalShow) error {
	v, err := e.channel(ctx, j.ch)
	if err != nil {
		return fmt.Errorf("show proposal %s: %w", j.rid, err)
	}
	var r fold.Routine
	found := false
	if err := v.with(ctx, func() {
		if p := v.fold.Routine(j.rid); p != nil {
			r, found = *p, true
		}
	}); err != nil {
		return fmt.Errorf("show proposal %s: %w", j.rid, err)
	}
	if !found || !r.Proposed || !r.Decided || r.CreatedCause == "" {
		return nil
	}
	cmds, err := e.j.Read(ctx, j.ch, r.CreatedSeq, 0)
	if err != nil {
		return fmt.Errorf("show proposal %s: read the card: %w", j.rid, err)
	}
	var ref *core.MessageRef
	var effect, title string
	for _, c := range cmds {
		if c.Redacted() {
			continue
		}
		switch c.Kind() {
		case core.KindMessagePosted:
			p, err := core.Decode[*core.MessagePosted](c)
			if err == nil && ref == nil && c.Cause() == r.CreatedCause && strings.HasPrefix(p.Text, proposalTitlePrefix+j.rid+":") {
				ref, effect, title = &core.MessageRef{Scope: c.Scope(), ID: p.MessageID, At: c.At()}, p.EffectID, p.Text
			}
		case core.KindMessageUpdated:
			if p, err := core.Decode[*core.MessageUpdated](c); err == nil && ref != nil && p.EffectID == effect {
				return nil // already shows the decision
			}
		}
	}
	if ref == nil {
		return nil // the card was never posted
	}
	res := fmt.Sprintf("✅ Armed by %s at %s.", core.MentionOf(r.DecidedBy), r.DecidedAt.UTC().Format("2006-01-02 15:04 UTC"))
	if !r.DecidedArm {
		res = fmt.Sprintf("🗑️ Discarded by %s at %s; it will never run.", core.MentionOf(r.DecidedBy), r.DecidedAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	s, err := e.surface(ref.Scope.Platform)
	if err != nil {
		return fmt.Errorf("show proposal %s: %w", j.rid, err)
	}
	d, err := e.b.System("engine", ref.Scope, core.Meta{Cause: r.CreatedID}, &core.MessageUpdated{EffectID: effect, MessageID: ref.ID, Text: core.Truncate(res, maxPostedText)})
	if err != nil {
		return fmt.Errorf("show proposal %s: %w", j.rid, err)
	}
	appended, err := v.append(ctx, nil, d)
	if err != nil {
		return fmt.Errorf("show proposal %s: %w", j.rid, err)
	}
	card := &core.Card{ID: "proposal-" + j.rid, Title: title, Body: r.Instruction, Resolution: res,
		Fields: []core.CardField{{Label: "Schedule", Value: fmt.Sprintf("`%s` (%s)", r.Spec, r.TZ)}, {Label: "Owner", Value: core.MentionOf(r.Owner)}}}
	out := core.Outbound{Key: core.EffectID(j.ch, appended[0].Seq(), 0), Scope: ref.Scope, Text: title + "\n" + res, Card: card, Priority: core.PriorityNormal}
	if err := s.Update(ctx, *ref, out); err != nil {
		return fmt.Errorf("show proposal %s: edit the card: %w", j.rid, err)
	}
	return nil
}
