package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// The DM inbox (ARCHITECTURE.md section 6). An approval, consent request or
// escalation is one decision with several renderings: the card in the
// run's thread and a card in the DM of each person asked
// (ApprovalRequested.Notify). Every rendering carries the same signed
// tokens, so a click anywhere is the same card.clicked / approval.resolved;
// when the run wakes on the decision it edits every rendering in place.
// What waits for a person is a fold over the channels' journals (pending
// approvals naming or admitting them), never a separate store.

// eachChannel calls fn, under the channel's lock, on every channel of
// platform with the channel's fold caught up with the journal (what another
// replica appended included).
func (e *Engine) eachChannel(ctx context.Context, platform string, fn func(v *chanView)) error {
	chs, err := e.j.Channels(ctx)
	if err != nil {
		return fmt.Errorf("list channels: %w", err)
	}
	return e.foldEach(ctx, platformChannels(chs, platform), fn)
}

// eachItemChannel is eachChannel over the channels of platform that hold
// an approval, a consent grant or a report (Journal.ItemChannels, an index
// kept by the store in the append's transaction): every other channel has
// nothing for an inbox, a home page or `consents`, so none is read.
func (e *Engine) eachItemChannel(ctx context.Context, platform string, fn func(v *chanView)) error {
	chs, err := e.j.ItemChannels(ctx, platform)
	if err != nil {
		return fmt.Errorf("list channels with inbox items: %w", err)
	}
	return e.foldEach(ctx, chs, fn)
}

// platformChannels keeps the channels of platform.
func platformChannels(chs []core.ChannelKey, platform string) []core.ChannelKey {
	var out []core.ChannelKey
	for _, ch := range chs {
		if strings.HasPrefix(string(ch), platform+"/") {
			out = append(out, ch)
		}
	}
	return out
}

// foldEach calls fn on each of chs, under its lock, caught up. Each view
// is borrowed (borrow.go): the ones this process did not hold before are
// handed back after fn.
func (e *Engine) foldEach(ctx context.Context, chs []core.ChannelKey, fn func(v *chanView)) error {
	for _, ch := range chs {
		if err := e.borrowing(ctx, ch, func(v *chanView) error { return v.caughtUp(ctx, func() { fn(v) }) }); err != nil {
			return err
		}
	}
	return nil
}

// adminsOf lists the admins that can be enumerated for a channel: the
// operators of its platform (MARLOWE_ADMINS) and the channel's admins set by
// policy. Platform administrators (workspace admins, guild administrators)
// are asked about one person at a time and cannot be listed cheaply, so
// they get no DM card; they can still decide on the thread card.
func (e *Engine) adminsOf(sc core.Scope, pol core.Policy) []string {
	var out []string
	for _, op := range e.cfg.Operators {
		if op.Platform == sc.Platform && !slices.Contains(out, op.UserID) {
			out = append(out, op.UserID)
		}
	}
	for _, id := range pol.Admins {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// audience is who an approval is put to.
type audience struct {
	notify   []string // DM inbox cards: eligible approvers other than the requester
	eligible bool     // someone at all can approve it
	why      string   // when nobody can: why not
}

// approvalAudience decides who may approve a call of consequence cons that
// requester's run asks for: the channel's approvers when it has some, else
// its admins (and, outside a DM, anyone in the channel, as authorizeClick
// lets them). The requester alone never approves an irreversible action.
func (e *Engine) approvalAudience(sc core.Scope, pol core.Policy, requester string, cons core.Consequence, inDM bool) audience {
	others := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if id != requester && id != "" && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return out
	}
	if len(pol.Approvers) > 0 {
		a := audience{notify: others(pol.Approvers)}
		a.eligible = len(a.notify) > 0 || (cons != core.Irreversible && slices.Contains(pol.Approvers, requester))
		if !a.eligible {
			a.why = "the channel's only approver is " + core.MentionOf(requester) + ", who asked for it, and an irreversible action needs someone else"
		}
		return a
	}
	admins := e.adminsOf(sc, pol)
	a := audience{notify: others(admins)}
	_, platformAdmins := e.surfaces[sc.Platform].(core.Administrators)
	switch {
	case len(a.notify) > 0:
		a.eligible = true
	case !inDM && cons != core.Irreversible:
		a.eligible = true // anyone in the channel may approve, on the thread card
	case !inDM && platformAdmins:
		a.eligible = true // the platform's administrators decide on the thread card
	case inDM && cons != core.Irreversible && slices.Contains(admins, requester):
		a.eligible = true // an admin approves their own send in their DM
	case inDM:
		a.why = "this is a direct message, and with no approvers listed only the channel's admins decide it; none is configured to ask"
	default:
		a.why = "an irreversible action needs an admin's approval when the channel lists no approvers, and none is configured to ask"
	}
	return a
}

// inDM reports whether the run's conversation is a DM with the bot.
func (rs *RunReplay) inDM() bool {
	for _, h := range rs.humans {
		if h.dm {
			return true
		}
	}
	return false
}

// inboxEffect is the effect id of the i-th DM rendering of approval a (the
// thread card is index 0).
func inboxEffect(a *runApproval, i int) string { return core.EffectID(a.scope.Key(), a.seq, 1+i) }

// renderings lists the effect ids of every rendering of a.
func (d *driver) renderings(a *runApproval) []string {
	out := []string{d.cardEffect(a)}
	for i := range a.req.Notify {
		out = append(out, inboxEffect(a, i))
	}
	return out
}

// renderingCard renders effect eff of a: the thread card or a DM card.
func (d *driver) renderingCard(a *runApproval, eff string) (*core.Card, error) {
	card, err := approvalCard(d.e.cfg.CardKey, a.req, a.res, a.resAt)
	if err != nil || eff == d.cardEffect(a) {
		return card, err
	}
	return inboxCard(card, a.req, a.scope), nil
}

// inboxCard adds what a card read out of its thread needs: where the
// request was made and what each option does.
func inboxCard(card *core.Card, ar *core.ApprovalRequested, where core.Scope) *core.Card {
	c := *card
	c.Fields = append([]core.CardField{{Label: "Where", Value: channelRef(where)}}, card.Fields...)
	if card.Resolution == "" {
		switch {
		case ar.Question != "":
			c.Fields = append(c.Fields, core.CardField{Label: "Deadline", Value: ar.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")},
				core.CardField{Label: "Options", Value: "Your answer goes to the assistant, which continues with it; after the deadline it stops."})
		case core.Consequence(ar.Consequence) == core.Irreversible:
			c.Fields = append(c.Fields, core.CardField{Label: "Options", Value: "Approve runs it once; Decline tells the assistant not to. It cannot be undone."})
		default:
			c.Fields = append(c.Fields, core.CardField{Label: "Options", Value: "Allow once runs it this time; Always allow also stops me asking for " +
				consentScope(ar.Tool, ar.Destination) + " (`consents` lists, `consent revoke` undoes); Deny tells the assistant not to."})
		}
	}
	return &c
}

// showInbox posts the DM cards of a that are not posted yet. A person
// whose DM cannot be opened is told once, in the thread, that the request
// waits there and how to enable DMs; nothing blocks on a DM.
func (d *driver) showInbox(ctx context.Context, a *runApproval) error {
	fresh := false
	defer func() {
		if fresh {
			d.refreshHomes(ctx, a)
		}
	}()
	for i, u := range a.req.Notify {
		eff := inboxEffect(a, i)
		if _, ok := d.rs.Effects[eff]; ok {
			continue
		}
		fresh = true
		dm, err := d.s.OpenDM(ctx, u)
		if err == nil {
			var card *core.Card
			if card, err = d.renderingCard(a, eff); err != nil {
				return err
			}
			out := core.Outbound{Key: eff, Scope: dm, Text: card.Title, Card: card, Priority: core.PriorityHigh}
			if _, err = d.e.post(ctx, d.s, d.rs, out, postRecord{run: d.rs.ID, cause: a.req.ApprovalID, role: core.RoleInbox}); err == nil {
				continue
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.e.log.WarnContext(ctx, "could not put the request in a person's DM inbox; it waits in the thread", "approval", a.req.ApprovalID, "user", u, "error", err)
		if err := d.noDMNotice(ctx, a, u); err != nil {
			return err
		}
	}
	return nil
}

// noDMNotice says, once per person and thread, that a request waits in the
// thread because the person's DM could not be opened.
func (d *driver) noDMNotice(ctx context.Context, a *runApproval, user string) error {
	h := sha256.Sum256([]byte(string(a.scope.Key()) + "\x00" + a.scope.Thread + "\x00" + user))
	key := "nodm" + hex.EncodeToString(h[:12])
	help := "To get requests privately, " + core.MentionOf(user) + " can open a direct message with me."
	if dh, ok := d.s.(core.DMHelp); ok {
		if t := strings.TrimSpace(dh.EnableDMHelp(user)); t != "" {
			help = t
		}
	}
	text := "📭 I couldn't reach " + core.MentionOf(user) + " by direct message, so requests for them wait here in the thread. " + help
	out := core.Outbound{Key: key, Scope: a.scope, Text: text, Priority: core.PriorityNormal}
	_, err := d.e.post(ctx, d.s, d.rs, out, postRecord{run: d.rs.ID, cause: a.req.ApprovalID, role: core.RoleNotice})
	return err
}

// noApprover refuses a call nobody can approve, at once and visibly,
// instead of parking the run on a card nobody may click.
func (d *driver) noApprover(ctx context.Context, cs *callState, tool core.Tool, req core.Draft, why string) (bool, error) {
	reason := "nobody can approve this here: " + why
	pd, err := d.agent(core.Meta{Cause: req.ID()}, &core.PermissionDecided{CallID: cs.call.ID, Tool: tool.Name, Decision: string(gate.Deny), Reason: reason})
	if err != nil {
		return false, err
	}
	done, err := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: cs.call.ID, Tool: tool.Name, OK: false, Code: "denied", Error: reason + "; nothing was done"})
	if err != nil {
		return false, err
	}
	cmds, err := d.appendRun(ctx, nil, req, pd, done)
	if err != nil {
		return false, err
	}
	d.e.log.InfoContext(ctx, "approval refused: no eligible approver", "run", d.rs.ID, "tool", tool.Name)
	text := "🚫 I can't run " + tool.Name + ": " + reason + ". Nothing was done. " +
		"An admin can name approvers with `policy set approvers …`."
	out := core.Outbound{Key: core.EffectID(d.rs.Scope.Key(), cmds[1].Seq(), 0), Scope: d.rs.Scope, Text: text, Priority: core.PriorityHigh}
	_, err = d.e.post(ctx, d.s, d.rs, out, postRecord{run: d.rs.ID, cause: cmds[1].ID(), role: core.RoleNotice, answering: d.rs.latestHuman()})
	return false, err
}

// Inbox lists what waits for userID on platform, oldest first: pending
// approvals they may decide (named on the request, or an approver or
// admin of its channel now), consent requests of runs done on their
// behalf, questions put to them, and the open reports of their routines
// (report.go: the newest maxInboxReports of the last reportHorizon). It is
// folded from the journal, so every replica and restart shows the same
// inbox; only the channels holding items are read (eachItemChannel).
func (e *Engine) Inbox(ctx context.Context, platform, userID string) ([]core.InboxItem, error) {
	return e.inboxOf(ctx, platform, userID, e.eachItemChannel)
}

// inboxOf is Inbox over the channels each visits.
func (e *Engine) inboxOf(ctx context.Context, platform, userID string, each func(context.Context, string, func(*chanView)) error) ([]core.InboxItem, error) {
	var out, reports []core.InboxItem
	now := e.now()
	err := each(ctx, platform, func(v *chanView) {
		reports = append(reports, reportItems(v, userID, now)...)
		pol := e.policyLocked(v)
		for _, a := range v.fold.Approvals() {
			if !a.Pending() || !now.Before(a.ExpiresAt) || !e.waitsFor(a, pol, userID) {
				continue
			}
			it := core.InboxItem{ID: a.ID, Kind: "approval", Where: a.Scope, Title: "Approval needed: " + a.Tool, Summary: a.Summary,
				Requester: a.Requester, Consequence: string(a.Consequence), Destination: a.Destination, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt}
			switch {
			case a.Question != "":
				it.Kind, it.Title = "question", a.Question
			case a.Unattended:
				it.Kind, it.Title = "consent", "Permission needed: "+a.Tool
			}
			out = append(out, it)
		}
	})
	out = append(out, newestReports(reports)...)
	slices.SortFunc(out, func(a, b core.InboxItem) int {
		if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, err
}

// waitsFor reports whether pending approval a is in user's inbox.
func (e *Engine) waitsFor(a *fold.Approval, pol core.Policy, user string) bool {
	if slices.Contains(a.Notify, user) {
		return true
	}
	if a.Question != "" || a.Unattended {
		return false // put to named people (or the requester) only
	}
	// The channel's approvers may have changed since the request.
	aud := e.approvalAudience(a.Scope, pol, a.Requester, a.Consequence, false)
	return slices.Contains(aud.notify, user)
}

// inboxText renders an inbox for a DM.
func inboxText(items []core.InboxItem) string {
	if len(items) == 0 {
		return "📭 Nothing waits for you: no approvals, consent requests, questions or reports."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "📬 Your inbox — %d waiting, oldest first:", len(items))
	reports := 0
	for i, it := range items {
		if it.Kind == "report" {
			reports++
			fmt.Fprintf(&b, "\n%d. 📋 %s — in %s; filed %s", i+1, core.Truncate(it.Title, 200), channelRef(it.Where), it.RequestedAt.UTC().Format("Jan 2 15:04 UTC"))
			continue
		}
		icon := map[string]string{"approval": "🔐", "consent": "🔑", "question": "❓"}[it.Kind]
		fmt.Fprintf(&b, "\n%d. %s %s — in %s", i+1, icon, core.Truncate(it.Title, 200), channelRef(it.Where))
		if it.Requester != "" {
			fmt.Fprintf(&b, ", for %s", core.MentionOf(it.Requester))
		}
		if it.Consequence != "" && it.Kind != "question" {
			fmt.Fprintf(&b, ", %s", it.Consequence)
		}
		if it.Destination != "" {
			fmt.Fprintf(&b, " → %s", it.Destination)
		}
		fmt.Fprintf(&b, "; asked %s, decide by %s", it.RequestedAt.UTC().Format("Jan 2 15:04 UTC"), it.ExpiresAt.UTC().Format("Jan 2 15:04 UTC"))
	}
	if reports < len(items) {
		b.WriteString("\nDecide on each card, here in our DM or in its thread: it is the same decision.")
	}
	if reports > 0 {
		b.WriteString("\nA report 📋 stays here until you click Dismiss on its card in our DM (at most 7 days).")
	}
	return b.String()
}

// maxAddressees bounds how many inboxes one question reaches.
const maxAddressees = 10

// addressEscalation puts a question to the people it names (or the
// channel's admins): their inboxes get it, they may answer it, and its
// deadline is the one asked for, capped at the approval TTL.
func (d *driver) addressEscalation(ctx context.Context, ar *core.ApprovalRequested, esc *core.Escalation) {
	var to []string
	for _, u := range esc.To {
		if u = core.UserRef(u); u != "" && u != d.rs.Requester.ID && !slices.Contains(to, u) {
			to = append(to, u)
		}
	}
	if esc.ToAdmins {
		var pol core.Policy
		_ = d.v.with(ctx, func() { pol = d.e.policyLocked(d.v) })
		for _, u := range d.e.adminsOf(d.rs.Scope, pol) {
			if u != d.rs.Requester.ID && !slices.Contains(to, u) {
				to = append(to, u)
			}
		}
	}
	if len(to) > maxAddressees {
		to = to[:maxAddressees]
	}
	ar.Notify = to
	if esc.Deadline > 0 && esc.Deadline < d.e.cfg.ApprovalTTL {
		ar.ExpiresAt = d.e.now().Add(esc.Deadline)
	}
}

// inboxCommand answers an inbox command of h. A personal answer asked for
// in a channel goes to the person's DM; the thread is told where it went.
func (d *driver) inboxCommand(ctx context.Context, h *humanMsg, ic chatcommand.InboxCommand) (core.Reply, error) {
	rs, e := d.rs, d.e
	reply := func(s string) core.Reply { return core.Reply{Text: s, Provider: "grammar"} }
	var text string
	var err error
	switch ic.Kind {
	case chatcommand.InboxRevoke:
		text, err = e.revokeConsentCmd(ctx, rs.Scope.Platform, h.author, ic.Arg)
		return reply(text), err
	case chatcommand.InboxConsents:
		text, err = e.consentsText(ctx, rs.Scope.Platform, h.author)
	case chatcommand.InboxAboutMe:
		text, err = e.aboutMeText(ctx, rs.Scope.Platform, h.author)
	case chatcommand.InboxForget:
		return d.forgetCommand(ctx, h, ic.Arg) // forget.go
	case chatcommand.InboxExport:
		return d.exportCommand(ctx, h) // export.go
	case chatcommand.InboxDisconnect:
		text, err = e.disconnectText(ctx, rs.Scope.Platform, h.author, ic.Arg) // connections.go
		return reply(text), err
	case chatcommand.InboxConnect:
		text = e.connectText(rs.Scope.Platform, h.author, ic.Arg) // a link: answered in the DM only, below
	case chatcommand.InboxConnections:
		text, err = e.connectionsText(ctx, rs.Scope.Platform, h.author, ic.Arg == "all")
	default:
		var items []core.InboxItem
		items, err = e.Inbox(ctx, rs.Scope.Platform, h.author.ID)
		text = inboxText(items)
	}
	if err != nil || h.dm {
		return reply(text), err
	}
	dm, err := d.s.OpenDM(ctx, h.author.ID)
	if err != nil {
		e.log.WarnContext(ctx, "could not open a DM for a private answer", "user", h.author.ID, "error", err)
		help := "open a direct message with me and ask there"
		if dh, ok := d.s.(core.DMHelp); ok {
			if t := strings.TrimSpace(dh.EnableDMHelp(h.author.ID)); t != "" {
				help = t
			}
		}
		return reply("I answer that only in a direct message, and I couldn't open one with you: " + help), nil
	}
	out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), h.seq, 1), Scope: dm, Text: text, Priority: core.PriorityHigh}
	if _, err := e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, cause: h.cmdID, role: core.RoleMessage}); err != nil {
		return core.Reply{}, err
	}
	return reply("📬 I sent you the answer in a direct message."), nil
}
