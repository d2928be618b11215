package core

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The command grammar is the bot's deterministic side: with no model
// configured it is all the bot understands; with a model, `help` and valid
// `policy` commands are still answered by it (channel rules are never left
// to a model's reading). Commands run through the same loop as model runs:
// the grammar stands in for the model, its tool calls go through the same
// validation, gate and journal.

// maxMemoryPage bounds `memories <page>`.
const maxMemoryPage = 1000

type grammarKind int

const (
	gUnknown grammarKind = iota
	GHelp
	GRemember
	GRecall
	GForget
	GPolicyShow
	GPolicySet
	GPolicyUsage
	GMemories     // memories [page]
	GDeleteMemory // delete memory <id>
	GDeleteUsage
	GStatus
	GCancel
	GApprovals
	GRoutine // routine_grammar.go
)

type GrammarCmd struct {
	Kind  grammarKind
	Arg   string // remember / recall / forget / delete memory argument
	Page  int    // memories page (1-based)
	Key   string // policy set key
	Value []string
}

// parseGrammar reads a mention-stripped message.
func ParseGrammar(text string) GrammarCmd {
	t := strings.TrimSpace(text)
	word, rest, _ := strings.Cut(t, " ")
	rest = strings.TrimSpace(rest)
	if _, ok := ParseRoutineCommand(t); ok {
		return GrammarCmd{Kind: GRoutine, Arg: t}
	}
	switch strings.ToLower(strings.TrimRight(word, ":,")) {
	case "help", "?":
		if rest == "" {
			return GrammarCmd{Kind: GHelp}
		}
	case "remember":
		if rest != "" {
			return GrammarCmd{Kind: GRemember, Arg: rest}
		}
	case "recall":
		return GrammarCmd{Kind: GRecall, Arg: rest}
	case "forget":
		if rest != "" {
			return GrammarCmd{Kind: GForget, Arg: rest}
		}
	case "memories":
		f := strings.Fields(rest)
		if len(f) == 2 && strings.EqualFold(f[0], "page") {
			f = f[1:]
		}
		switch {
		case len(f) == 0:
			return GrammarCmd{Kind: GMemories, Page: 1}
		case len(f) == 1:
			if n, err := strconv.Atoi(f[0]); err == nil && n >= 1 && n <= maxMemoryPage {
				return GrammarCmd{Kind: GMemories, Page: n}
			}
		}
	case "delete":
		f := strings.Fields(rest)
		if len(f) >= 1 && (strings.EqualFold(f[0], "memory") || strings.EqualFold(f[0], "note")) {
			if len(f) == 2 {
				return GrammarCmd{Kind: GDeleteMemory, Arg: strings.Trim(f[1], "`")}
			}
			if len(f) == 1 {
				return GrammarCmd{Kind: GDeleteUsage}
			}
		}
	case "status":
		if rest == "" {
			return GrammarCmd{Kind: GStatus}
		}
	case "cancel":
		if rest == "" {
			return GrammarCmd{Kind: GCancel}
		}
	case "approvals":
		if rest == "" {
			return GrammarCmd{Kind: GApprovals}
		}
	case "policy":
		f := strings.Fields(rest)
		switch {
		case len(f) == 0 || len(f) == 1 && strings.EqualFold(f[0], "show"):
			return GrammarCmd{Kind: GPolicyShow}
		case len(f) >= 3 && strings.EqualFold(f[0], "set"):
			return GrammarCmd{Kind: GPolicySet, Key: strings.ToLower(f[1]), Value: f[2:]}
		}
		return GrammarCmd{Kind: GPolicyUsage}
	}
	return GrammarCmd{Kind: gUnknown}
}

// deterministic reports whether a command is answered by the grammar even
// when a model is configured.
func (g GrammarCmd) Deterministic() bool {
	switch g.Kind {
	case GHelp, GPolicyShow, GPolicySet, GMemories, GDeleteMemory, GDeleteUsage, GStatus, GCancel, GApprovals, GRoutine:
		return true
	}
	return false
}

// engineServed reports whether the engine answers the command itself from
// the channel's state (no tool call): what runs, what waits, what is
// remembered, a privacy delete.
func (g GrammarCmd) EngineServed() bool {
	switch g.Kind {
	case GMemories, GDeleteMemory, GDeleteUsage, GStatus, GCancel, GApprovals:
		return true
	}
	return false
}

const HelpText = "Here is what I understand without a model:\n" +
	"• `help` — this message\n" +
	"• `remember <something>` — keep a note for this channel\n" +
	"• `recall <words>` — find notes\n" +
	"• `memories` — list this channel's notes, newest first (`memories 2` for the next page)\n" +
	"• `forget <note id>` — drop a note from recall\n" +
	"• `delete memory <note id>` — destroy a note for good (the person who added it, or an admin)\n" +
	"• `status` — what I am working on or waiting for in this channel\n" +
	"• `approvals` — requests waiting for someone's approval in this channel\n" +
	"• `cancel` — in a thread: stop what I am doing there (the person who asked, or an admin)\n" +
	"• `policy` — show this channel's rules; admins: `policy set approvers U1,U2`, " +
	"`policy set admins U1`, `policy set tools a,b`, `policy set window thread 30m`, " +
	"`policy set window toplevel 6m`, `policy set budget 100000`, `policy set approval send,irreversible` " +
	"(or `+write` / `-send` to add or remove one level)\n" +
	"• `routine add <spec> [tz <zone>]: <instruction>`, `routines`, `routine pause|resume|delete|run <id>` — scheduled digests"

const NeedModelText = "I need a language model for that. Configure one with " +
	"`MARLOWE_MODEL_PROVIDER=openai` and `MARLOWE_MODEL_BASE_URL` pointing at any OpenAI-compatible " +
	"endpoint (for example a local Ollama: `http://localhost:11434/v1`, plus `MARLOWE_MODEL` for the model name). " +
	"Until then I understand `help`, `remember …`, `recall …`, `memories`, `forget …`, `delete memory …`, " +
	"`status`, `approvals`, `cancel` and `policy …`."

const PolicyUsageText = "Usage: `policy` (show), or `policy set <approvers|admins|tools|window|budget|approval> <value>` — " +
	"e.g. `policy set approvers U1,U2`, `policy set tools remember,recall`, `policy set window thread 30m`. " +
	"Use `none` / `default` to clear a setting."

// applyPolicySet returns pol with one setting changed.
func ApplyPolicySet(pol Policy, reg *ToolRegistry, key string, value []string) (Policy, error) {
	np := pol
	np.Tools, np.ApprovalLevels = slices.Clone(pol.Tools), slices.Clone(pol.ApprovalLevels)
	np.Approvers, np.Admins = slices.Clone(pol.Approvers), slices.Clone(pol.Admins)
	list := splitList(strings.Join(value, ","))
	clear := len(list) == 1 && (strings.EqualFold(list[0], "none") || strings.EqualFold(list[0], "default") || list[0] == "-")
	switch key {
	case "approvers", "admins":
		ids := []string{}
		if !clear {
			for _, s := range list {
				ids = append(ids, UserRef(s))
			}
		}
		if key == "approvers" {
			np.Approvers = ids
		} else {
			np.Admins = ids
		}
	case "tools":
		np.Tools = nil
		if !clear {
			for _, n := range list {
				n = strings.ToLower(n)
				if _, ok := reg.Get(n); !ok {
					return pol, fmt.Errorf("no tool named %q (known: %s)", n, strings.Join(reg.Names(), ", "))
				}
				np.Tools = append(np.Tools, n)
			}
			if len(np.Tools) > MaxExposedTools {
				return pol, fmt.Errorf("at most %d tools can be exposed", MaxExposedTools)
			}
		}
	case "window":
		if len(value) != 2 {
			return pol, fmt.Errorf("say `policy set window thread 30m` or `policy set window toplevel 6m`")
		}
		d, err := time.ParseDuration(value[1])
		if err != nil || d <= 0 || d > 24*time.Hour {
			return pol, fmt.Errorf("window length %q: want a duration like 30m (at most 24h)", value[1])
		}
		switch strings.ToLower(value[0]) {
		case "thread":
			np.ThreadWindowS = int(d / time.Second)
		case "toplevel", "top-level", "top":
			np.ToplevelWindowS = int(d / time.Second)
		default:
			return pol, fmt.Errorf("window %q: want thread or toplevel", value[0])
		}
	case "budget":
		if clear {
			np.DailyTokenBudget = 0
			break
		}
		n, err := strconv.Atoi(strings.ReplaceAll(value[0], "_", ""))
		if err != nil || n < 0 {
			return pol, fmt.Errorf("budget %q: want a number of tokens per day", value[0])
		}
		np.DailyTokenBudget = n
	case "approval", "approvals":
		levels, err := approvalLevels(pol, list, clear)
		if err != nil {
			return pol, err
		}
		np.ApprovalLevels = levels
	default:
		return pol, fmt.Errorf("unknown setting %q", key)
	}
	return np, nil
}

// approvalLevels reads `policy set approval`: a bare list replaces the
// levels; +level and -level add to and remove from the levels in effect.
func approvalLevels(pol Policy, list []string, clear bool) ([]Consequence, error) {
	if clear {
		return nil, nil
	}
	var rel, bare []string
	for _, s := range list {
		if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
			rel = append(rel, s)
		} else {
			bare = append(bare, s)
		}
	}
	level := func(s string) (Consequence, error) {
		c := Consequence(strings.ToLower(strings.TrimLeft(s, "+-")))
		if !c.Valid() {
			return "", fmt.Errorf("level %q: want read, write, send or irreversible", s)
		}
		return c, nil
	}
	if len(rel) > 0 && len(bare) > 0 {
		return nil, fmt.Errorf("say either a list (`send,irreversible`, which replaces the levels) or changes (`+write -send`), not both")
	}
	if len(rel) == 0 {
		var out []Consequence
		for _, s := range bare {
			c, err := level(s)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return out, nil
	}
	cur := slices.Clone(pol.ApprovalLevels)
	if len(cur) == 0 {
		cur = DefaultApprovalLevels()
	}
	for _, s := range rel {
		c, err := level(s)
		if err != nil {
			return nil, err
		}
		if s[0] == '+' {
			if !slices.Contains(cur, c) {
				cur = append(cur, c)
			}
		} else {
			cur = slices.DeleteFunc(cur, func(x Consequence) bool { return x == c })
		}
	}
	// Canonical order; an empty list would mean "the defaults", and
	// irreversible actions need approval whatever the list says.
	var out []Consequence
	for _, c := range []Consequence{Read, Write, Send, Irreversible} {
		if slices.Contains(cur, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []Consequence{Irreversible}
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// policyItem is one line of a policy's description.
type policyItem struct {
	label, value, note string
}

func policyItems(p Policy, reg *ToolRegistry) []policyItem {
	or := func(xs []string, dflt string) string {
		if len(xs) == 0 {
			return dflt
		}
		return strings.Join(xs, ", ")
	}
	levels := p.ApprovalLevels
	if len(levels) == 0 {
		levels = DefaultApprovalLevels()
	}
	lv := make([]string, len(levels))
	for i, l := range levels {
		lv[i] = string(l)
	}
	budget := "default"
	if p.DailyTokenBudget > 0 {
		budget = strconv.Itoa(p.DailyTokenBudget) + " tokens/day"
	}
	ids := func(xs []string) []string {
		out := make([]string, len(xs))
		for i, x := range xs {
			out[i] = MentionOf(x)
		}
		return out
	}
	return []policyItem{
		{label: "channel admins", value: or(ids(p.Admins), "none set"), note: "operators in MARLOWE_ADMINS and workspace admins can change the policy"},
		{label: "approvers", value: or(ids(p.Approvers), "anyone in the channel"), note: "never the requester alone for irreversible actions"},
		{label: "tools", value: strings.Join(reg.Exposed(p), ", ")},
		{label: "needs approval", value: strings.Join(lv, ", "), note: "irreversible always"},
		{label: "windows", value: "thread " + p.ThreadWindow().String() + ", top level " + p.ToplevelWindow().String()},
		{label: "daily token budget", value: budget},
	}
}

func DescribePolicy(p Policy, reg *ToolRegistry) string {
	lines := []string{"Channel policy:"}
	for _, it := range policyItems(p, reg) {
		l := "• " + it.label + ": " + it.value
		if it.note != "" && (it.label == "needs approval" || strings.HasPrefix(it.value, "none") || strings.HasPrefix(it.value, "anyone")) {
			l += " (" + it.note + ")"
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// policyChanges lists what differs between two policies, one line per
// setting: "• label: before → after".
func PolicyChanges(before, after Policy, reg *ToolRegistry) []string {
	b, a := policyItems(before, reg), policyItems(after, reg)
	var out []string
	for i := range b {
		if b[i].value != a[i].value {
			out = append(out, "• "+b[i].label+": "+b[i].value+" → "+a[i].value)
		}
	}
	return out
}
