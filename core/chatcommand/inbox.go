package chatcommand

import (
	"strings"
)

// The inbox's commands, answered by the grammar even with a model
// configured (they read the journal, not the model's idea of it):
//
//	inbox                — what waits for you (answered only in your DM)
//	consents             — your standing grants (answered only in your DM)
//	consent revoke <id>  — withdraw one grant
//	what do you know about me — what the bot keeps about you (your DM)

type InboxKind int

const (
	InboxNone InboxKind = iota
	InboxList
	InboxConsents
	InboxRevoke
	InboxAboutMe // what do you know about me
)

type InboxCommand struct {
	Kind InboxKind
	Arg  string
}

func ParseInbox(text string) InboxCommand {
	f := strings.Fields(strings.ToLower(strings.TrimSpace(text)))
	orig := strings.Fields(strings.TrimSpace(text))
	switch {
	case strings.Join(f, " ") == "what do you know about me" || strings.Join(f, " ") == "what do you know about me?":
		return InboxCommand{Kind: InboxAboutMe}
	case len(f) == 1 && f[0] == "inbox":
		return InboxCommand{Kind: InboxList}
	case len(f) == 1 && f[0] == "consents":
		return InboxCommand{Kind: InboxConsents}
	case len(f) >= 2 && f[0] == "consent" && f[1] == "revoke":
		arg := ""
		if len(orig) >= 3 {
			arg = orig[2] // ids are case-sensitive
		}
		return InboxCommand{Kind: InboxRevoke, Arg: arg}
	}
	return InboxCommand{}
}
