package chatcommand

import (
	"regexp"
	"strings"
)

// MenuEntry is one command a platform's command menu offers as a bare
// slash command (Telegram's setMyCommands, Discord's subcommands).
type MenuEntry struct {
	Name        string // "status": what the grammar reads, valid as a Telegram command
	Description string // one line, no Markdown
}

// menuName is a command name every platform's menu accepts (Telegram's
// rule, the strictest: [a-z0-9_]{1,32}).
var menuName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// menuText replaces a Does that reads badly out of help's context.
var menuText = map[string]string{
	"help": "what I understand without a model",
	// Not "in a thread": a Telegram chat has none; a reply is where it runs.
	"cancel": "stop what I am doing: say it in reply to that work",
}

// Menu lists, in help order, the commands that work typed bare (no
// argument): those whose Usage is a single name. Each description is the
// command's Does up to its first clause break, with Markdown dropped.
func Menu() []MenuEntry {
	var out []MenuEntry
	for _, c := range Commands() {
		if !menuName.MatchString(c.Usage) {
			continue
		}
		d := menuText[c.Usage]
		if d == "" {
			d = c.Does
			for _, br := range []string{"; ", " ("} {
				if i := strings.Index(d, br); i > 0 {
					d = d[:i]
				}
			}
			d = strings.ReplaceAll(d, "`", "")
		}
		out = append(out, MenuEntry{Name: c.Usage, Description: d})
	}
	return out
}
