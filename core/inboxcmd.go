package core

import (
	"context"
	"strings"
)

// The inbox's commands, answered by the grammar even with a model
// configured (they read the journal, not the model's idea of it):
//
//	inbox                — what waits for you (answered only in your DM)
//	consents             — your standing grants (answered only in your DM)
//	consent revoke <id>  — withdraw one grant

type inboxCmdKind int

const (
	inboxNone inboxCmdKind = iota
	inboxList
	inboxConsents
	inboxRevoke
)

type inboxCmd struct {
	kind inboxCmdKind
	arg  string
}

func parseInboxCmd(text string) inboxCmd {
	f := strings.Fields(strings.ToLower(strings.TrimSpace(text)))
	orig := strings.Fields(strings.TrimSpace(text))
	switch {
	case len(f) == 1 && f[0] == "inbox":
		return inboxCmd{kind: inboxList}
	case len(f) == 1 && f[0] == "consents":
		return inboxCmd{kind: inboxConsents}
	case len(f) >= 2 && f[0] == "consent" && f[1] == "revoke":
		arg := ""
		if len(orig) >= 3 {
			arg = orig[2] // ids are case-sensitive
		}
		return inboxCmd{kind: inboxRevoke, arg: arg}
	}
	return inboxCmd{}
}

const inboxHelpText = "\n• `inbox` — what waits for your decision (answered in your DM)" +
	"\n• `consents` — what you always allow; `consent revoke <id>` withdraws one"

// inboxCommand answers an inbox command of h. A personal answer asked for
// in a channel goes to the person's DM; the thread is told where it went.
func (d *driver) inboxCommand(ctx context.Context, h *humanMsg, ic inboxCmd) (Reply, error) {
	rs, e := d.rs, d.e
	reply := func(s string) Reply { return Reply{Text: s, Provider: "grammar"} }
	var text string
	var err error
	switch ic.kind {
	case inboxRevoke:
		text, err = e.revokeConsentCmd(ctx, rs.Scope.Platform, h.author, ic.arg)
		return reply(text), err
	case inboxConsents:
		text, err = e.consentsText(ctx, rs.Scope.Platform, h.author)
	default:
		var items []InboxItem
		items, err = e.Inbox(ctx, rs.Scope.Platform, h.author.ID)
		text = inboxText(items)
	}
	if err != nil || h.dm {
		return reply(text), err
	}
	dm, err := d.s.OpenDM(ctx, h.author.ID)
	if err != nil {
		e.log.Warn("could not open a DM for a private answer", "user", h.author.ID, "error", err)
		help := "open a direct message with me and ask there"
		if dh, ok := d.s.(DMHelp); ok {
			if t := strings.TrimSpace(dh.EnableDMHelp(h.author.ID)); t != "" {
				help = t
			}
		}
		return reply("I answer that only in a direct message, and I couldn't open one with you: " + help), nil
	}
	out := Outbound{Key: EffectID(rs.Scope.Key(), h.seq, 1), Scope: dm, Text: text, Priority: PriorityHigh}
	if _, err := e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, cause: h.cmdID, role: RoleMessage}); err != nil {
		return Reply{}, err
	}
	return reply("📬 I sent you the answer in a direct message."), nil
}
