package chatcommand

import "strings"

// Entry is one command of the chat grammar as help lists it. The table is
// the one place a command is described: `help` (HelpText) and the reply without a
// model are generated from it, and a test parses every Example and checks
// that every command the parsers accept has an entry.
type Entry struct {
	Usage   string // as typed, in help: "remember <something>"
	Does    string // what it does
	Short   string // the offline reply's list form: "remember …"
	Example string // a message the grammar reads as this command
}

// Commands lists the grammar's commands in help order.
func Commands() []Entry {
	return []Entry{
		{"help", "this message", "help", "help"},
		{"remember <something>", "keep a note for this channel", "remember …", "remember deploys freeze on Fridays"},
		{"recall <words>", "find notes", "recall …", "recall deploys"},
		{"memories", "list this channel's notes, newest first (`memories 2` for the next page)", "memories", "memories 2"},
		{"forget <note id>", "drop a note from recall", "forget …", "forget m1"},
		{"delete memory <note id>", "destroy a note for good (the person who added it, or an admin)", "delete memory …", "delete memory m1"},
		{"status", "what I am working on or waiting for in this channel", "status", "status"},
		{"approvals", "requests waiting for someone's approval in this channel", "approvals", "approvals"},
		{"cancel", "in a thread: stop what I am doing there (the person who asked, or an admin)", "cancel", "cancel"},
		{"policy", "show this channel's rules; admins: `policy set approvers U1,U2`, " +
			"`policy set admins U1`, `policy set tools a,b`, `policy set window thread 30m`, " +
			"`policy set window toplevel 6m`, `policy set budget 100000`, `policy set approval send,irreversible` " +
			"(or `+write` / `-send` to add or remove one level)", "policy …", "policy set approvers U1"},
		{"routine add <schedule> [tz <zone>]: <instruction>", "a scheduled digest; the schedule in words (`" + ScheduleExample +
			"`, `daily at noon`, `every 2 hours`), cron (`0 9 * * 1-5`) or `@every 30m`", "routine add …", "routine add " + ScheduleExample + ": post a digest"},
		{"routines", "this channel's routines", "routines", "routines"},
		{"routine edit <id> [<schedule>] [tz <zone>][: <instruction>]", "change a routine (what you leave out stays)", "routine edit …", "routine edit r1 daily at noon"},
		{"routine pause|resume|delete|run <id>", "pause, resume, delete or run one now", "routine pause|resume|delete|run …", "routine pause r1"},
		{"inbox", "what waits for your decision (answered in your DM)", "inbox", "inbox"},
		{"consents", "what you always allow", "consents", "consents"},
		{"consent revoke <id>", "withdraw a standing consent", "consent revoke …", "consent revoke c1"},
		{"what do you know about me", "the notes, consents, routines, pending approvals and kept messages of yours I hold (answered in your DM)", "what do you know about me", "what do you know about me"},
		{"export my data", "the same as a JSON file, with your messages (in your DM)", "export my data", "export my data"},
		{"forget me", "in your DM, after you confirm on a card: erase your messages and notes in every channel and revoke your consents", "forget me", "forget me"},
		{"forget <@user>", "the same for someone else (operators only, in your DM)", "forget <@user>", "forget <@U1>"},
		{"connections", "the servers you signed in to so that I act there as you (in your DM; operators: `connections all` lists who connected what, never a token)", "connections", "connections all"},
		{"connect <server>", "a private sign-in link so that I act on that server as you (in your DM)", "connect …", "connect github"},
		{"disconnect <server>", "revoke your sign-in at that server and delete it here", "disconnect …", "disconnect github"},
	}
}

// HelpText is the reply to `help`.
func HelpText() string {
	var b strings.Builder
	b.WriteString("Here is what I understand without a model:")
	for _, c := range Commands() {
		b.WriteString("\n• `" + c.Usage + "` — " + c.Does)
	}
	return b.String()
}

// needModel starts every reply that says a model is needed (NeedModelText,
// NeedModelAgainText), so a conversation's history tells whether it was
// said (NeedModelSaid).
const needModel = "I need a language model for that"

// NeedModelText is the reply to anything else while no model is
// configured, the first time in a conversation: how to configure one, and
// the commands understood without.
func NeedModelText() string {
	var short []string
	for _, c := range Commands() {
		short = append(short, "`"+c.Short+"`")
	}
	return needModel + " (set `MARLOWE_MODEL_PROVIDER=openai`, `MARLOWE_MODEL_BASE_URL` and `MARLOWE_MODEL`; " +
		"any OpenAI-compatible server, e.g. Ollama at `http://localhost:11434/v1`). " +
		"Without one I understand " + strings.Join(short[:len(short)-1], ", ") + " and " + short[len(short)-1] + "."
}

// NeedModelAgainText is the same reply later in a conversation that was
// told already: short, without the list.
func NeedModelAgainText() string {
	return needModel + " too. `help` lists what I understand without one."
}

// NeedModelSaid reports whether a bot turn's text was a NeedModelText or
// NeedModelAgainText.
func NeedModelSaid(text string) bool { return strings.HasPrefix(text, needModel) }

// PolicyUsageText is the reply to a `policy` command that did not parse.
const PolicyUsageText = "Usage: `policy` (show), or `policy set <approvers|admins|tools|window|budget|approval|connector|consequence> <value>` — " +
	"e.g. `policy set approvers U1,U2`, `policy set tools remember,recall`, `policy set window thread 30m`, " +
	"`policy set connector github off`, `policy set consequence github__create_issue irreversible`. " +
	"Use `none` / `default` to clear a setting."
