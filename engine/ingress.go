package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/replica"
)

// Deliver is what surfaces call for every inbound item. For an event it
// asks the router; an ignored event returns nil and leaves no trace. A
// routed event is journaled (message.received, with run.started when it
// starts a run) and handed to its thread's mailbox before Deliver returns,
// so the surface may acknowledge the platform delivery once it gets nil: a
// crash after that resumes from the journal, a crash before means
// redelivery, and a redelivered message id is recognised and dropped.
func (e *Engine) Deliver(ctx context.Context, in core.Inbound) error {
	if err := e.admit(); err != nil {
		return err
	}
	defer e.delivered()
	switch {
	case in.Event != nil && in.Click == nil:
		return e.deliverEvent(ctx, *in.Event)
	case in.Click != nil && in.Event == nil:
		return e.deliverClick(ctx, *in.Click)
	}
	return errors.New("deliver: inbound must carry exactly one of Event or Click")
}

// threadOf is the thread a routed message belongs to: its thread root, or
// the message itself at top level (the bot answers in a thread under it).
// DMs at top level stay at top level.
func threadOf(ev *core.Event) string {
	if ev.Scope.Thread != "" || ev.Visibility == core.DM {
		return ev.Scope.Thread
	}
	return ev.MessageID
}

func (e *Engine) deliverEvent(ctx context.Context, ev core.Event) error {
	began := time.Now()
	// Shape checks first; none of these errors carries the text.
	if err := ev.Scope.Validate(); err != nil {
		return fmt.Errorf("deliver event: %w", err)
	}
	if ev.MessageID == "" || ev.Author.ID == "" {
		return fmt.Errorf("deliver event in %s: message id and verified author are required", ev.Scope.Key())
	}
	if _, err := e.surface(ev.Scope.Platform); err != nil {
		return fmt.Errorf("deliver event in %s: %w", ev.Scope.Key(), err)
	}
	if ev.Author.IsBot {
		// The router ignores bots too; checked again here because a bot
		// answering a bot is a loop, whatever the router says.
		return nil
	}
	route, reason, err := e.cfg.Router.Route(ctx, ev)
	if err != nil {
		return fmt.Errorf("deliver event in %s: route: %w", ev.Scope.Key(), err)
	}
	if !route {
		return nil
	}
	ch := ev.Scope.Key()
	v, err := e.channel(ctx, ch)
	if err != nil {
		return fmt.Errorf("deliver event: %w", err)
	}
	thread := threadOf(&ev)
	runScope := ev.Scope
	runScope.Thread = thread
	msg := &core.MessageReceived{
		MessageID: ev.MessageID, Author: ev.Author, Visibility: ev.Visibility, Text: ev.Text,
		Mentions: ev.Mentions, ReplyTo: ev.ReplyTo, Reason: reason, Attachments: ev.Attachments,
	}
	e.claimBeforeJournaling(ctx, ch)
	mayDecide := e.mayDecidePending(ctx, v, ev, thread)
	cancelReq := e.cancelFor(ctx, v, ev, thread)
	var wake string
	var started, steered, cancelled, superseded bool
	var refusal *notice
	plan := func() ([]core.Draft, error) {
		superseded = false // this pass's plan decides (a retried plan may differ)
		if dup := v.fold.Delivered(ev.MessageID); dup {
			return nil, nil // a redelivery (or Slack's app_mention + message pair)
		}
		live, parked := v.liveRun(thread)
		msg.Conversation = conversationOf(&v.fold, live, &ev, reason, thread, e.policyLocked(v).ToplevelWindow(), e.now())
		if live != nil && cancelReq != nil {
			// `cancel` stops the live run itself (chat.go), never steers it.
			drafts, n, err := e.cancelDrafts(v, cancelReq, live, ev, msg)
			if refusal, cancelled = n, n == nil; cancelled {
				wake = live.ID
			}
			return drafts, err
		}
		if live != nil {
			// Steering: the live run sees it before its next model call.
			mr, err := e.b.Human(ev.Author, ev.Scope, core.Meta{Run: live.ID}, msg)
			if err != nil {
				return nil, err
			}
			drafts := []core.Draft{mr}
			// A message from someone who could decide the pending card (the
			// requester or an eligible approver) supersedes it: the run
			// resumes and the model sees the message. Anyone else's waits
			// as steering until the decision, and the card stays.
			for _, a := range v.fold.Approvals() {
				if a.Run == live.ID && a.Pending() && mayDecide(a) {
					d, err := e.b.Human(ev.Author, a.Scope, core.Meta{Run: a.Run, Cause: mr.ID()},
						&core.ApprovalResolved{ApprovalID: a.ID, Decision: "superseded", By: ev.Author})
					if err != nil {
						return nil, err
					}
					drafts = append(drafts, d)
				}
			}
			wake, steered = live.ID, true
			return drafts, nil
		}
		runID := e.b.NewID()
		var drafts []core.Draft
		superseded = parked != nil
		if parked != nil {
			// A blocked run cannot continue by itself; the new message
			// starts afresh (with fresh run budgets) in the same thread.
			d, err := e.b.Agent(parked.ID, runScope, core.Meta{}, &core.RunFailed{Status: core.RunCancelled, Cause: fold.CauseSuperseded})
			if err != nil {
				return nil, err
			}
			drafts = append(drafts, d)
		}
		mr, err := e.b.Human(ev.Author, ev.Scope, core.Meta{Run: runID}, msg)
		if err != nil {
			return nil, err
		}
		rsd, err := e.b.Agent(runID, runScope, core.Meta{Cause: mr.ID()}, &core.RunStarted{Trigger: ev.MessageID, History: runHistory(v, msg), InputLimit: e.cfg.MaxInputChars})
		if err != nil {
			return nil, err
		}
		wake, started = runID, true
		return append(drafts, mr, rsd), nil
	}
	// On a channel this replica owns, the message is journaled under the
	// lease's fence, and a fenced append notifies nobody (only the holder,
	// this replica, acts on a notification): a lone replica sends no NOTIFY
	// at all. Elsewhere (another replica owns the channel, or nobody yet) it
	// is journaled unfenced, and the owner is notified.
	actx := ctx
	if f, held := e.owns(ch); held && f != nil {
		actx = replica.WithFence(ctx, f)
	}
	cmds, err := v.appendPlan(actx, plan)
	if errors.Is(err, replica.ErrLeaseLost) && actx != ctx {
		// The lease passed on since the claim: journal it for the new
		// owner, notified.
		cmds, err = v.appendPlan(ctx, plan)
	}
	if err != nil {
		return fmt.Errorf("deliver event in %s: %w", ch, err)
	}
	e.traceIngress(ctx, began, &ev, reason, wake, ingressOutcome(started, steered, cancelled), cmds)
	if refusal != nil && !e.whisperNow(ctx, refusal) {
		e.enqueue(threadKey{ch, thread}, job{notice: refusal})
	}
	if wake == "" {
		return nil
	}
	if superseded {
		e.metrics().RunEnded(core.RunCancelled)
	}
	if cancelled {
		e.metrics().RunEnded(core.RunCancelled)
		e.interrupt(wake)
		e.log.InfoContext(ctx, "run cancelled", "run", wake, "channel", string(ch), "by", ev.Author.ID)
	}
	e.enqueue(threadKey{ch, thread}, job{run: wake})
	if started {
		e.log.InfoContext(ctx, "run started", "run", wake, "channel", string(ch), "reason", reason)
	} else if steered {
		e.log.InfoContext(ctx, "steering message queued", "run", wake, "channel", string(ch))
	}
	return nil
}

// whisperNow posts a private notice at once, where the surface can: a
// refusal then comes before whatever the thread's busy consumer does next
// (a run mid model call would hold a queued one until it ends, by when
// the refusal may contradict the thread). Nothing is journaled for a
// private notice, so it needs no turn in the thread's queue. False when
// the notice must be queued instead (not private, no ephemeral
// messages, or the post failed: postNotice then falls back).
func (e *Engine) whisperNow(ctx context.Context, n *notice) bool {
	if n.to == "" {
		return false
	}
	s, err := e.surface(n.scope.Platform)
	if err != nil {
		return false
	}
	eph, ok := s.(core.Ephemeral)
	if !ok {
		return false
	}
	if err := eph.PostEphemeral(ctx, n.scope, n.to, n.text); err != nil {
		e.log.DebugContext(ctx, "private notice failed; queueing it", "platform", n.scope.Platform, "error", err)
		return false
	}
	return true
}

// mayDecidePending returns who, among the authors of ev, may supersede a
// pending approval of the thread's live run: its requester, one of the
// channel's approvers, or an admin. Asking the platform about admins is
// I/O, so it happens here, before the channel's append, and only when the
// thread has something pending.
func (e *Engine) mayDecidePending(ctx context.Context, v *chanView, ev core.Event, thread string) func(*fold.Approval) bool {
	var pending bool
	var pol core.Policy
	_ = v.with(ctx, func() {
		pol = e.policyLocked(v)
		if live, _ := v.liveRun(thread); live != nil {
			for _, a := range v.fold.Approvals() {
				if a.Run == live.ID && a.Pending() {
					pending = true
				}
			}
		}
	})
	if !pending {
		return func(*fold.Approval) bool { return false }
	}
	if slices.Contains(pol.Approvers, ev.Author.ID) {
		return func(*fold.Approval) bool { return true }
	}
	admin := e.governs(ctx, ev.Scope, ev.Author, pol).admin
	return func(a *fold.Approval) bool { return admin || a.Requester == ev.Author.ID }
}

// Click outcomes.
const (
	clickAccepted = iota + 1
	clickExpired
	clickRefused
)

func clickOutcomeName(o int) string {
	switch o {
	case clickAccepted:
		return "accepted"
	case clickExpired:
		return "expired"
	case clickRefused:
		return "refused"
	}
	return "none"
}

func (e *Engine) deliverClick(ctx context.Context, click core.CardClick) error {
	id, action, err := parseCardToken(e.cfg.CardKey, click.Token)
	if err != nil {
		// Forged or mangled: nothing is journaled or executed. Say so where
		// the click came from, if we can tell.
		e.log.WarnContext(ctx, "card click refused: token does not verify", "platform", click.Scope.Platform, "by", click.By.ID)
		if click.Scope.Validate() == nil {
			h := sha256.Sum256([]byte(click.Token + "\x00" + click.By.ID))
			e.enqueue(threadKey{click.Scope.Key(), click.Scope.Thread}, job{notice: &notice{
				key: "forged" + hex.EncodeToString(h[:10]), scope: click.Scope,
				text: "⚠️ That button could not be verified, so nothing was done.", to: click.By.ID, onlyPrivate: true,
			}})
		}
		return nil
	}
	if isProposalAction(action) {
		return e.deliverProposalClick(ctx, click, id, action) // proposal.go
	}
	if action == actionDismissReport {
		return e.deliverReportClick(ctx, click, id) // report.go
	}
	if isForgetAction(action) {
		return e.deliverForgetClick(ctx, click, id, action) // forget.go
	}
	if isConnectAction(action) {
		return e.deliverConnectClick(ctx, click, id, action) // signinconfirm.go
	}
	began := time.Now()
	v, a, err := e.findApproval(ctx, click.Scope, id)
	if err != nil {
		return fmt.Errorf("deliver click: %w", err)
	}
	if a == nil {
		e.log.WarnContext(ctx, "card click refused: unknown approval", "approval", id, "by", click.By.ID)
		if click.Scope.Validate() == nil {
			e.enqueue(threadKey{click.Scope.Key(), click.Scope.Thread}, job{notice: &notice{
				key: "unknown" + id + click.By.ID, scope: click.Scope,
				text: "⚠️ I can't find the request behind that button, so nothing was done.", to: click.By.ID, onlyPrivate: true,
			}})
		}
		return nil
	}
	who := e.clickerOf(ctx, v, a, click) // approval.go
	now := e.now()
	outcome, refusal, decision := 0, "", ""
	private := false // the refusal is for the clicker alone
	var clickedID string
	var run string
	var scope core.Scope
	cmds, err := v.appendPlan(ctx, func() ([]core.Draft, error) {
		a := v.fold.Approval(id)
		run, scope = a.Run, a.Scope
		clicked, err := e.b.Human(click.By, a.Scope, core.Meta{Run: a.Run},
			&core.CardClicked{Card: id, Action: string(action), Token: click.Token, By: click.By})
		if err != nil {
			return nil, err
		}
		clickedID = clicked.ID()
		if !a.Pending() {
			outcome, refusal = clickRefused, "This request was already decided: "+
				resolutionText(&core.ApprovalResolved{Decision: a.Decision, By: a.By}, a.At)+". Nothing more was done."
			return []core.Draft{clicked}, nil
		}
		if !now.Before(a.ExpiresAt) {
			exp, err := e.b.System("expiry", a.Scope, core.Meta{Run: a.Run, Cause: clicked.ID()},
				&core.ApprovalResolved{ApprovalID: id, Decision: "expired"})
			if err != nil {
				return nil, err
			}
			outcome, refusal = clickExpired, "⌛ This request expired before it was decided, so nothing was done."
			return []core.Draft{clicked, exp}, nil
		}
		if why := authorizeClick(e.policyLocked(v), a, who, action); why != "" {
			outcome, refusal, private = clickRefused, refusalText(why), true
			return []core.Draft{clicked}, nil
		}
		res := &core.ApprovalResolved{ApprovalID: id, By: click.By}
		switch {
		case a.Question != "":
			opts := a.Options
			if len(opts) == 0 {
				opts = []string{"Yes", "No"}
			}
			i := int(action) - '0'
			if i < 0 || i >= len(opts) {
				outcome, refusal = clickRefused, "🚫 That is not one of the offered answers. Nothing was done."
				return []core.Draft{clicked}, nil
			}
			res.Decision, res.Choice = "answered", opts[i]
		case action == actionApprove || action == actionAlways && a.Consentable():
			res.Decision = "approved"
		case action == actionDecline:
			res.Decision = "declined"
		default:
			outcome, refusal = clickRefused, "🚫 Unknown action. Nothing was done."
			return []core.Draft{clicked}, nil
		}
		rd, err := e.b.Human(click.By, a.Scope, core.Meta{Run: a.Run, Cause: clicked.ID()}, res)
		if err != nil {
			return nil, err
		}
		drafts := []core.Draft{clicked, rd}
		if res.Decision == "approved" && action == actionAlways {
			// Asked once: the same tool to the same destination is free from
			// now on, in this channel, until the grant is revoked.
			cd, err := e.b.Human(click.By, a.Scope, core.Meta{Run: a.Run, Cause: rd.ID()},
				&core.ConsentGranted{ConsentID: e.b.NewID(), Tool: a.Tool, Destination: a.Destination, Owner: click.By.ID, Covers: core.CoversChannel})
			if err != nil {
				return nil, err
			}
			drafts = append(drafts, cd)
		}
		outcome, decision = clickAccepted, res.Decision
		return drafts, nil
	})
	if err != nil {
		return fmt.Errorf("deliver click on %s: %w", id, err)
	}
	k := threadKey{scope.Key(), scope.Thread}
	if refusal != "" && len(cmds) > 0 {
		// The refusal goes where the click was made: a stale DM card is
		// answered in the DM, a thread card in the thread.
		at := scope
		if click.Scope.Validate() == nil && click.Scope.Key() != scope.Key() {
			at = click.Scope
		}
		n := &notice{key: core.EffectID(scope.Key(), cmds[0].Seq(), 0), scope: at, text: refusal, run: run, cause: clickedID}
		if private {
			// Only the clicker needs to know; the card stays as it is for
			// the people who may decide.
			n.to = click.By.ID
		}
		e.enqueue(threadKey{at.Key(), at.Thread}, job{notice: n})
	}
	if outcome == clickAccepted || outcome == clickExpired {
		e.disarmExpiry(id)
		e.enqueue(k, job{run: run})
	}
	e.traceClick(ctx, began, scope, run, id, clickOutcomeName(outcome), decision, cmds)
	e.log.InfoContext(ctx, "card click", "approval", id, "by", click.By.ID, "outcome", clickOutcomeName(outcome), "decision", decision)
	return nil
}

// findApproval locates an approval by id: in the click's channel, else in
// any loaded channel (an adapter may not know the channel of a callback).
func (e *Engine) findApproval(ctx context.Context, sc core.Scope, id string) (*chanView, *fold.Approval, error) {
	look := func(v *chanView) *fold.Approval {
		var a *fold.Approval
		_ = v.with(ctx, func() {
			if v.fold.Approval(id) == nil {
				// Another replica may have appended it since this one folded.
				if err := v.catchUp(ctx); err != nil {
					e.log.Warn("catch up channel for a click", "channel", string(v.key), "error", err)
				}
			}
			if x := v.fold.Approval(id); x != nil {
				cp := *x
				a = &cp
			}
		})
		return a
	}
	if sc.Validate() == nil {
		v, err := e.channel(ctx, sc.Key())
		if err != nil {
			return nil, nil, err
		}
		if a := look(v); a != nil {
			return v, a, nil
		}
	}
	e.chMu.Lock()
	views := make([]*chanView, 0, len(e.channels))
	for _, v := range e.channels {
		views = append(views, v)
	}
	e.chMu.Unlock()
	for _, v := range views {
		if !v.isLoaded() {
			continue // evicted: folded below only if the journal has the channel
		}
		if a := look(v); a != nil {
			return v, a, nil
		}
	}
	// A click from a DM inbox names no channel; the approval may live in a
	// channel this replica has not loaded yet (another replica started it).
	chs, err := e.j.Channels(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("find approval %s: %w", id, err)
	}
	for _, ch := range chs {
		e.chMu.Lock()
		v := e.channels[ch]
		e.chMu.Unlock()
		if v != nil && v.isLoaded() {
			continue
		}
		// Borrowed (borrow.go): a click on an unknown id must not leave
		// every channel of the installation folded.
		var found bool
		_ = e.borrowing(ctx, ch, func(v *chanView) error { found = look(v) != nil; return nil })
		if !found {
			continue
		}
		v, err := e.channel(ctx, ch)
		if err != nil {
			return nil, nil, err
		}
		if a := look(v); a != nil {
			return v, a, nil
		}
	}
	return nil, nil, nil
}

// expireDue expires approval id when its deadline timer fires: a no-op if
// it was decided meanwhile.
func (e *Engine) expireDue(ctx context.Context, ch core.ChannelKey, id string) error {
	v, err := e.channel(ctx, ch)
	if err != nil {
		return fmt.Errorf("expire approval %s: %w", id, err)
	}
	return e.expire(ctx, v, id) // a no-op when it was decided meanwhile
}

// expire resolves an overdue approval as expired (system actor) and wakes
// its run, which shows the expired state and stops.
func (e *Engine) expire(ctx context.Context, v *chanView, id string) error {
	var run string
	var scope core.Scope
	_, err := v.appendPlan(ctx, func() ([]core.Draft, error) {
		a := v.fold.Approval(id)
		if a == nil || !a.Pending() {
			return nil, nil
		}
		run, scope = a.Run, a.Scope
		d, err := e.b.System("expiry", a.Scope, core.Meta{Run: a.Run}, &core.ApprovalResolved{ApprovalID: id, Decision: "expired"})
		if err != nil {
			return nil, err
		}
		return []core.Draft{d}, nil
	})
	if err != nil {
		return fmt.Errorf("expire approval %s: %w", id, err)
	}
	if run != "" {
		e.enqueue(threadKey{scope.Key(), scope.Thread}, job{run: run})
	}
	return nil
}
