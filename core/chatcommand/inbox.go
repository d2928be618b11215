package chatcommand

import (
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// The inbox's commands, answered by the grammar even with a model
// configured (they read the journal, not the model's idea of it):
//
//	inbox                — what waits for you (answered only in your DM)
//	consents             — your standing grants (answered only in your DM)
//	consent revoke <id>  — withdraw one grant
//	what do you know about me — what the bot keeps about you (your DM)
//	export my data       — the same, with your messages, as a JSON file (your DM)
//	forget me            — erase your messages and notes everywhere, after a confirmation card (your DM)
//	forget <@user>       — the same for someone else (operators only)
//	connections          — the servers you connected to act as you (`connections all`: everybody's, operators only)
//	disconnect <server>  — revoke and delete your connection to server
//	connect <server>     — a private sign-in link to server (your DM)

type InboxKind int

const (
	InboxNone InboxKind = iota
	InboxList
	InboxConsents
	InboxRevoke
	InboxAboutMe     // what do you know about me
	InboxExport      // export my data
	InboxForget      // forget me / forget <@user> (Arg: the user, "" for me)
	InboxConnections // connections [all] (Arg: "all" or "")
	InboxDisconnect  // disconnect <server> (Arg: the server)
	InboxConnect     // connect <server> (Arg: the server): a fresh sign-in link
	inboxEnd         // keep last: the help test walks every kind before it
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
	case strings.Join(f, " ") == "export my data":
		return InboxCommand{Kind: InboxExport}
	case len(f) == 2 && f[0] == "forget" && f[1] == "me":
		return InboxCommand{Kind: InboxForget}
	case len(f) == 2 && f[0] == "forget" && (strings.HasPrefix(orig[1], "<@") || strings.HasPrefix(orig[1], "@")):
		// A person, not a note id (`forget <note id>` drops a note from recall).
		if u := core.UserRef(orig[1]); u != "" {
			return InboxCommand{Kind: InboxForget, Arg: u}
		}
	case len(f) == 1 && f[0] == "connections":
		return InboxCommand{Kind: InboxConnections}
	case len(f) == 2 && f[0] == "connections" && f[1] == "all":
		return InboxCommand{Kind: InboxConnections, Arg: "all"}
	case len(f) == 2 && f[0] == "connect":
		return InboxCommand{Kind: InboxConnect, Arg: orig[1]}
	case len(f) == 2 && f[0] == "disconnect":
		return InboxCommand{Kind: InboxDisconnect, Arg: orig[1]} // server names are case-sensitive
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
