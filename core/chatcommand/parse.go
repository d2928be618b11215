package chatcommand

import (
	"strconv"
	"strings"
)

// The command grammar is the bot's deterministic side: with no model
// configured it is all the bot understands; with a model, `help` and valid
// `policy` commands are still answered by it (channel rules are never left
// to a model's reading). Commands run through the same loop as model runs:
// the grammar stands in for the model, its tool calls go through the same
// validation, gate and journal.

// maxMemoryPage bounds `memories <page>`.
const maxMemoryPage = 1000

type Kind int

const (
	Unknown Kind = iota
	Help
	Remember
	Recall
	Forget
	PolicyShow
	PolicySet
	PolicyUsage
	Memories     // memories [page]
	DeleteMemory // delete memory <id>
	DeleteUsage
	Status
	Cancel
	Approvals
	Routine // routine.go
	kindEnd // keep last: the test walks every kind before it
)

type Command struct {
	Kind  Kind
	Arg   string // remember / recall / forget / delete memory argument
	Page  int    // memories page (1-based)
	Key   string // policy set key
	Value []string
}

// Parse reads a mention-stripped message.
func Parse(text string) Command {
	t := strings.TrimSpace(text)
	word, rest, _ := strings.Cut(t, " ")
	rest = strings.TrimSpace(rest)
	if _, ok := ParseRoutine(t); ok {
		return Command{Kind: Routine, Arg: t}
	}
	switch strings.ToLower(strings.TrimRight(word, ":,")) {
	case "help", "?":
		if rest == "" {
			return Command{Kind: Help}
		}
	case "remember":
		if rest != "" {
			return Command{Kind: Remember, Arg: rest}
		}
	case "recall":
		return Command{Kind: Recall, Arg: rest}
	case "forget":
		if rest != "" {
			return Command{Kind: Forget, Arg: rest}
		}
	case "memories":
		f := strings.Fields(rest)
		if len(f) == 2 && strings.EqualFold(f[0], "page") {
			f = f[1:]
		}
		switch {
		case len(f) == 0:
			return Command{Kind: Memories, Page: 1}
		case len(f) == 1:
			if n, err := strconv.Atoi(f[0]); err == nil && n >= 1 && n <= maxMemoryPage {
				return Command{Kind: Memories, Page: n}
			}
		}
	case "delete":
		f := strings.Fields(rest)
		if len(f) >= 1 && (strings.EqualFold(f[0], "memory") || strings.EqualFold(f[0], "note")) {
			if len(f) == 2 {
				return Command{Kind: DeleteMemory, Arg: strings.Trim(f[1], "`")}
			}
			if len(f) == 1 {
				return Command{Kind: DeleteUsage}
			}
		}
	case "status":
		if rest == "" {
			return Command{Kind: Status}
		}
	case "cancel":
		if rest == "" {
			return Command{Kind: Cancel}
		}
	case "approvals":
		if rest == "" {
			return Command{Kind: Approvals}
		}
	case "policy":
		f := strings.Fields(rest)
		switch {
		case len(f) == 0 || len(f) == 1 && strings.EqualFold(f[0], "show"):
			return Command{Kind: PolicyShow}
		case len(f) >= 3 && strings.EqualFold(f[0], "set"):
			return Command{Kind: PolicySet, Key: strings.ToLower(f[1]), Value: f[2:]}
		}
		return Command{Kind: PolicyUsage}
	}
	return Command{Kind: Unknown}
}

// Deterministic reports whether a command is answered by the grammar even
// when a model is configured.
func (g Command) Deterministic() bool {
	switch g.Kind {
	case Help, PolicyShow, PolicySet, Memories, DeleteMemory, DeleteUsage, Status, Cancel, Approvals, Routine:
		return true
	}
	return false
}

// EngineServed reports whether the engine answers the command itself from
// the channel's state (no tool call): what runs, what waits, what is
// remembered, a privacy delete.
func (g Command) EngineServed() bool {
	switch g.Kind {
	case Memories, DeleteMemory, DeleteUsage, Status, Cancel, Approvals:
		return true
	}
	return false
}
