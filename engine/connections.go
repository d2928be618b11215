package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
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
	text := ""
	switch ev.Event {
	case core.ConnConnected:
		text = fmt.Sprintf("🔌 Connected `%s`: when you ask me for something there, I act as you. `disconnect %s` undoes it.", ev.Server, ev.Server)
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
