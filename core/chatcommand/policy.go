package chatcommand

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// ApplyPolicySet returns pol with one setting changed.
func ApplyPolicySet(pol core.Policy, reg *gate.Registry, key string, value []string) (core.Policy, error) {
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
				ids = append(ids, core.UserRef(s))
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
			if len(np.Tools) > gate.MaxExposedTools {
				return pol, fmt.Errorf("at most %d tools can be exposed", gate.MaxExposedTools)
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
	case "connector", "connectors":
		// policy set connector github off|on
		if len(value) != 2 || !slices.Contains([]string{"on", "off"}, strings.ToLower(value[1])) {
			return pol, fmt.Errorf("say `policy set connector <server> off` or `policy set connector <server> on`")
		}
		server := value[0]
		np.ConnectorsOff = slices.DeleteFunc(slices.Clone(pol.ConnectorsOff), func(s string) bool { return s == server })
		if strings.EqualFold(value[1], "off") {
			np.ConnectorsOff = append(np.ConnectorsOff, server)
		}
	case "consequence":
		// policy set consequence github__create_issue send|default
		if len(value) != 2 {
			return pol, fmt.Errorf("say `policy set consequence <connector tool> <read|write|send|irreversible|default>`")
		}
		name := value[0]
		if t, ok := reg.Get(name); !ok || t.Connector == nil {
			return pol, fmt.Errorf("no connector tool named %q (connector tools are named server__tool)", name)
		}
		np.Consequences = maps.Clone(pol.Consequences)
		if strings.EqualFold(value[1], "default") {
			delete(np.Consequences, name)
			break
		}
		c := core.Consequence(strings.ToLower(value[1]))
		if !c.Valid() {
			return pol, fmt.Errorf("consequence %q: want read, write, send, irreversible or default", value[1])
		}
		if np.Consequences == nil {
			np.Consequences = map[string]core.Consequence{}
		}
		np.Consequences[name] = c
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
func approvalLevels(pol core.Policy, list []string, clear bool) ([]core.Consequence, error) {
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
	level := func(s string) (core.Consequence, error) {
		c := core.Consequence(strings.ToLower(strings.TrimLeft(s, "+-")))
		if !c.Valid() {
			return "", fmt.Errorf("level %q: want read, write, send or irreversible", s)
		}
		return c, nil
	}
	if len(rel) > 0 && len(bare) > 0 {
		return nil, fmt.Errorf("say either a list (`send,irreversible`, which replaces the levels) or changes (`+write -send`), not both")
	}
	if len(rel) == 0 {
		var out []core.Consequence
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
		cur = gate.DefaultApprovalLevels()
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
			cur = slices.DeleteFunc(cur, func(x core.Consequence) bool { return x == c })
		}
	}
	// Canonical order; an empty list would mean "the defaults", and
	// irreversible actions need approval whatever the list says.
	var out []core.Consequence
	for _, c := range []core.Consequence{core.Read, core.Write, core.Send, core.Irreversible} {
		if slices.Contains(cur, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []core.Consequence{core.Irreversible}
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

func policyItems(p core.Policy, reg *gate.Registry) []policyItem {
	or := func(xs []string, dflt string) string {
		if len(xs) == 0 {
			return dflt
		}
		return strings.Join(xs, ", ")
	}
	levels := p.ApprovalLevels
	if len(levels) == 0 {
		levels = gate.DefaultApprovalLevels()
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
			out[i] = core.MentionOf(x)
		}
		return out
	}
	items := []policyItem{
		{label: "channel admins", value: or(ids(p.Admins), "none set"), note: "operators in MARLOWE_ADMINS and workspace admins can change the policy"},
		{label: "approvers", value: or(ids(p.Approvers), "anyone in the channel"), note: "never the requester alone for irreversible actions"},
		{label: "tools", value: strings.Join(reg.Exposed(p), ", ")},
		{label: "needs approval", value: strings.Join(lv, ", "), note: "irreversible always"},
		{label: "windows", value: "thread " + DurationWords(p.ThreadWindow()) + ", top level " + DurationWords(p.ToplevelWindow())},
		{label: "daily token budget", value: budget},
	}
	if len(p.ConnectorsOff) > 0 {
		items = append(items, policyItem{label: "connectors off", value: strings.Join(p.ConnectorsOff, ", ")})
	}
	for _, name := range slices.Sorted(maps.Keys(p.Consequences)) {
		items = append(items, policyItem{label: "consequence of " + name, value: string(p.Consequences[name])})
	}
	return items
}

func DescribePolicy(p core.Policy, reg *gate.Registry) string {
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

// PolicyChanges lists what differs between two policies, one line per
// setting: "• label: before → after".
func PolicyChanges(before, after core.Policy, reg *gate.Registry) []string {
	b, a := policyItems(before, reg), policyItems(after, reg)
	var out []string
	for i := range b {
		if b[i].value != a[i].value {
			out = append(out, "• "+b[i].label+": "+b[i].value+" → "+a[i].value)
		}
	}
	return out
}
