package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// Per-person connections (docs/connectors.md, "Acting as each person"): the
// chat commands `connections` and `disconnect <server>`, and the journal
// side of the sign-in service (core.ConnectionEvents): each change is a
// connection.changed in the person's DM, and a lapsed connection is told to
// the person there, never in a channel. Tokens never reach the engine.

var _ core.ConnectionEvents = (*Engine)(nil)

// connectionsText answers `connections` (all: every person's, operators only).
func (e *Engine) connectionsText(ctx context.Context, platform string, p core.Person, all bool) (string, error) {
	if e.cfg.Connections == nil {
		return "No connector here acts as each person, so you have no connections to manage.", nil
	}
	person := p.ID
	if all {
		if !e.isOperator(platform, p.ID) {
			return "🚫 Only an operator of this bot (MARLOWE_ADMINS) can list everybody's connections. `connections` lists yours.", nil
		}
		person = ""
	}
	cs, err := e.cfg.Connections.List(ctx, platform, person)
	if err != nil {
		return "", fmt.Errorf("list connections: %w", err)
	}
	if len(cs) == 0 {
		if all {
			return "🔌 Nobody has connected a server yet.", nil
		}
		return "🔌 You have connected no server: I act as you nowhere. When a request of yours needs one, I send you a sign-in link here.", nil
	}
	var b strings.Builder
	if all {
		fmt.Fprintf(&b, "🔌 Who connected what (%d; tokens are sealed and never shown):", len(cs))
	} else {
		b.WriteString("🔌 I act as you on:")
	}
	for _, c := range cs {
		b.WriteString("\n• ")
		if all {
			b.WriteString(core.MentionOf(c.Person) + " → ")
		}
		fmt.Fprintf(&b, "`%s`, connected %s", c.Server, c.ConnectedAt.UTC().Format("Jan 2 15:04 UTC"))
		if !c.RefreshedAt.IsZero() {
			fmt.Fprintf(&b, ", refreshed %s", c.RefreshedAt.UTC().Format("Jan 2 15:04 UTC"))
		}
	}
	if !all {
		b.WriteString("\n`disconnect <server>` revokes one.")
	}
	return b.String(), nil
}

// disconnectText answers `disconnect <server>`.
func (e *Engine) disconnectText(ctx context.Context, platform string, p core.Person, server string) (string, error) {
	if e.cfg.Connections == nil {
		return "No connector here acts as each person: there is nothing to disconnect.", nil
	}
	if server == "" {
		return "Say which: `disconnect <server>` (`connections` lists yours).", nil
	}
	ok, err := e.cfg.Connections.Disconnect(ctx, platform, p.ID, server, p.ID)
	if err != nil {
		return "", fmt.Errorf("disconnect %s: %w", server, err)
	}
	if !ok {
		return fmt.Sprintf("You have no connection to `%s`. `connections` lists yours.", core.Truncate(server, 60)), nil
	}
	return fmt.Sprintf("🔌 Disconnected `%s`: your sign-in was revoked at the server where it allows that, and deleted here. I will ask you to sign in again if a request of yours needs it.", server), nil
}

// ConnectionChanged implements core.ConnectionEvents: it journals ev in
// the person's DM and tells them what changed there.
func (e *Engine) ConnectionChanged(ctx context.Context, platform string, ev core.ConnectionChanged) error {
	s, err := e.surface(platform)
	if err != nil {
		return err
	}
	dm, err := s.OpenDM(ctx, ev.Person)
	if err != nil {
		return fmt.Errorf("open %s's DM to record %s of %s: %w", ev.Person, ev.Event, ev.Server, err)
	}
	v, err := e.channel(ctx, dm.Key())
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", ev.Event, ev.Server, err)
	}
	var d core.Draft
	if ev.By != "" {
		d, err = e.b.Human(core.Person{ID: ev.By}, dm, core.Meta{}, &ev)
	} else {
		d, err = e.b.System("signin", dm, core.Meta{}, &ev)
	}
	if err != nil {
		return err
	}
	cmds, err := v.append(ctx, nil, d)
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", ev.Event, ev.Server, err)
	}
	if ev.Event == core.ConnConnected {
		if err := e.resumeSignIns(ctx, platform, ev.Person, ev.Server); err != nil {
			return err
		}
	}
	text := ""
	switch ev.Event {
	case core.ConnPending:
		return e.askToConfirm(ctx, dm, cmds[0].ID(), ev) // signinconfirm.go
	case core.ConnDeclined:
		text = fmt.Sprintf("🔌 Not connected: the sign-in to `%s` you did not confirm was revoked and deleted. `connect %s` sends you a new link.", ev.Server, ev.Server)
	case core.ConnConnected:
		text = fmt.Sprintf("🔌 Connected `%s`: when you ask me for something there, I act as you. `disconnect %s` undoes it.", ev.Server, ev.Server)
		if ev.Account != "" {
			text = fmt.Sprintf("🔌 Connected `%s` as %s: when you ask me for something there, I act as you. `disconnect %s` undoes it.", ev.Server, ev.Account, ev.Server)
		}
	case core.ConnRefreshFailed:
		text = fmt.Sprintf("🔌 Your connection to `%s` lapsed and could not be renewed (%s). ", ev.Server, core.Truncate(ev.Reason, 120))
		if link, lerr := e.cfg.Connections.Link(platform, ev.Person, ev.Server); lerr == nil {
			text += "Connect again, as you, within 10 minutes: " + link + " (this link is yours alone and works once)."
		} else {
			text += "Ask me again when you need it and I will send you a new sign-in link."
		}
	}
	if text != "" {
		h := sha256.Sum256([]byte(cmds[0].ID()))
		e.enqueue(threadKey{dm.Key(), dm.Thread}, job{notice: &notice{key: "conn" + hex.EncodeToString(h[:10]), scope: dm, text: text, cause: cmds[0].ID()}})
	}
	return nil
}

// awaitSignIn parks the run on a call whose tool needs the requester's own
// sign-in to server (core.Observation.SignIn: nothing was sent). The
// thread gets a card saying whose account it waits for; the requester
// alone gets the sign-in link, in their DM. Once they have connected,
// ConnectionChanged resolves the card in their name and the call runs
// again, as them.
func (d *driver) awaitSignIn(ctx context.Context, cs *callState, tool core.Tool, args map[string]any, server string) (bool, error) {
	rs, e := d.rs, d.e
	if e.cfg.Connections == nil {
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "not_connected",
			Error: server + " acts as each person, but sign-in is not configured here (MARLOWE_SECRETS_KEY); nothing was sent"})
	}
	if prev := rs.approvals[cs.approval]; prev != nil && prev.req.SignIn == server && prev.res != nil && prev.res.Decision == "approved" {
		// Connected, and the tool still has no sign-in: do not loop.
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "not_connected",
			Error: rs.Requester.ID + " connected " + server + " but the call still found no sign-in; nothing was sent"})
	}
	ar := &core.ApprovalRequested{
		ApprovalID: e.b.NewID(), CallID: cs.call.ID, Tool: tool.Name, Consequence: string(tool.Consequence),
		Summary: gate.Summary(tool, args), Requester: rs.Requester.ID, ExpiresAt: e.now().Add(e.cfg.ApprovalTTL),
		Reason: "runs as " + rs.Requester.ID + " on " + server + ", who has not connected it yet", SignIn: server, ActsAs: rs.Requester.ID,
	}
	if rs.unattended {
		ar.Notify = []string{rs.Requester.ID} // nobody watches the thread: the owner's DM has the card too
	}
	ad, err := d.agent(core.Meta{Cause: cs.reqID}, ar)
	if err != nil {
		return false, err
	}
	if _, err := d.appendRun(ctx, nil, ad); err != nil {
		return false, err
	}
	e.armExpiry(rs.Scope.Key(), rs.Scope.Thread, ar.ApprovalID, ar.ExpiresAt)
	e.log.InfoContext(ctx, "waiting for a sign-in", "run", rs.ID, "tool", tool.Name, "server", server, "person", rs.Requester.ID, "approval", ar.ApprovalID)
	d.sendSignInLink(ctx, server, ar)
	return true, d.showCard(ctx, rs.approvals[ar.ApprovalID])
}

// sendSignInLink sends the requester of ar their private link, in their DM.
func (d *driver) sendSignInLink(ctx context.Context, server string, ar *core.ApprovalRequested) {
	rs, e := d.rs, d.e
	dm, err := d.s.OpenDM(ctx, ar.Requester)
	if err != nil {
		e.log.WarnContext(ctx, "could not open a DM for a sign-in link", "person", ar.Requester, "server", server, "error", err)
		return
	}
	link, err := e.cfg.Connections.Link(rs.Scope.Platform, ar.Requester, server)
	if err != nil {
		e.log.WarnContext(ctx, "could not mint a sign-in link", "person", ar.Requester, "server", server, "error", err)
		return
	}
	text := fmt.Sprintf("🔌 *Connect %s*: your request in %s needs %s, and I act there as you (%s), with your own account.\n%s\n"+
		"This link is for you alone: it works once, within 10 minutes. Your request continues when you have connected. "+
		"`connect %s` sends a new link; `disconnect %s` undoes it later.",
		server, channelRef(rs.Scope), server, core.MentionOf(ar.Requester), link, server, server)
	e.enqueue(threadKey{dm.Key(), dm.Thread}, job{notice: &notice{key: "signin" + ar.ApprovalID, scope: dm, text: text, run: rs.ID, cause: ar.ApprovalID}})
}

// connectText answers `connect <server>`: a fresh private link, in the DM.
func (e *Engine) connectText(platform string, p core.Person, server string) string {
	if e.cfg.Connections == nil {
		return "No connector here acts as each person, so there is nothing to connect."
	}
	link, err := e.cfg.Connections.Link(platform, p.ID, server)
	if err != nil {
		return fmt.Sprintf("I can't connect `%s`: %s.", core.Truncate(server, 60), err)
	}
	return fmt.Sprintf("🔌 Connect `%s`, as you (%s): %s\nThe link is for you alone; it works once, within 10 minutes.", server, core.MentionOf(p.ID), link)
}

// resumeSignIns resolves every card waiting for person to connect server,
// in their name, and wakes the runs behind them.
func (e *Engine) resumeSignIns(ctx context.Context, platform, person, server string) error {
	type waiting struct {
		v  *chanView
		id string
	}
	var found []waiting
	if err := e.eachItemChannel(ctx, platform, func(v *chanView) {
		for id, a := range v.fold.Approvals() {
			if a.Pending() && a.SignIn == server && a.Requester == person {
				found = append(found, waiting{v, id})
			}
		}
	}); err != nil {
		return err
	}
	for _, w := range found {
		var run string
		var scope core.Scope
		_, err := w.v.appendPlan(ctx, func() ([]core.Draft, error) {
			a := w.v.fold.Approval(w.id)
			if a == nil || !a.Pending() {
				return nil, nil
			}
			run, scope = a.Run, a.Scope
			d, err := e.b.Human(core.Person{ID: person}, a.Scope, core.Meta{Run: a.Run},
				&core.ApprovalResolved{ApprovalID: w.id, Decision: "approved", By: core.Person{ID: person}})
			if err != nil {
				return nil, err
			}
			return []core.Draft{d}, nil
		})
		if err != nil {
			return fmt.Errorf("resume after %s connected %s: %w", person, server, err)
		}
		if run != "" {
			e.disarmExpiry(w.id)
			e.enqueue(threadKey{scope.Key(), scope.Thread}, job{run: run})
			e.log.InfoContext(ctx, "sign-in done; run resumes", "run", run, "person", person, "server", server)
		}
	}
	return nil
}
