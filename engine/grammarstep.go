package engine

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// grammarReply is the grammar's step: the reply it gives (as a model would)
// and, for an accepted `policy set`, the policy to journal with it.
type grammarReply struct {
	reply  core.Reply
	policy *core.Policy
}

// grammarStep answers the newest human message of rs (given pol and the
// registry). After a tool call it reports the tool's outcome.
// gov says whether the author may change the policy; it is asked only for
// policy changes (nil otherwise, which refuses them).
func grammarStep(rs *RunReplay, pol core.Policy, reg *gate.Registry, gov *governance, h *humanMsg) grammarReply {
	text := func(s string) grammarReply { return grammarReply{reply: core.Reply{Text: s, Provider: "grammar"}} }
	if st := rs.step; st != nil && !st.final && len(st.calls) > 0 {
		c := st.calls[0].completion
		switch {
		case c == nil:
			return text("I could not finish that.")
		case c.OK:
			return text(c.Result)
		default:
			msg := c.Error
			var ce struct {
				Error struct {
					Message  string   `json:"message"`
					Problems []string `json:"problems"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(c.Error), &ce) == nil {
				msg = ce.Error.Message
				if len(ce.Error.Problems) > 0 {
					msg = strings.Join(ce.Error.Problems, "; ")
				}
			}
			return text("I couldn't do that: " + msg)
		}
	}
	cmd := chatcommand.Parse(h.text)
	call := func(name string, args map[string]any) grammarReply {
		b, _ := json.Marshal(args)
		return grammarReply{reply: core.Reply{Provider: "grammar", ToolCalls: []core.ToolCall{{ID: "g1", Name: name, Args: string(b)}}}}
	}
	switch cmd.Kind {
	case chatcommand.Help:
		return text(chatcommand.HelpText())
	case chatcommand.Routine:
		return routineGrammarStep(reg, cmd.Arg)
	case chatcommand.Remember:
		return call("remember", map[string]any{"text": cmd.Arg})
	case chatcommand.Recall:
		return call("recall", map[string]any{"query": cmd.Arg})
	case chatcommand.Forget:
		return call("forget", map[string]any{"id": cmd.Arg})
	case chatcommand.PolicyShow:
		return text(chatcommand.DescribePolicy(pol, reg))
	case chatcommand.PolicyUsage:
		return text(chatcommand.PolicyUsageText)
	case chatcommand.PolicySet:
		if gov == nil || !gov.admin {
			g := governance{}
			if gov != nil {
				g = *gov
			}
			return text(g.refusal())
		}
		np, err := chatcommand.ApplyPolicySet(pol, reg, cmd.Key, cmd.Value)
		if err != nil {
			return text("I couldn't change the policy: " + err.Error() + "\n" + chatcommand.PolicyUsageText)
		}
		changes := chatcommand.PolicyChanges(pol, np, reg)
		if len(changes) == 0 {
			return text("ℹ️ Nothing changed: the policy already says that. `policy` shows all of it.")
		}
		r := text("✅ Policy updated (before → after):\n" + strings.Join(changes, "\n"))
		r.policy = &np
		return r
	}
	if rs.toldNeedModel {
		return text(chatcommand.NeedModelAgainText())
	}
	return text(chatcommand.NeedModelText())
}

// routineGrammarStep is the grammar's answer to a routine command: one call
// of the routine tool with the person's text, or a reason it cannot be.
func routineGrammarStep(reg *gate.Registry, text string) grammarReply {
	reply := func(s string) grammarReply { return grammarReply{reply: core.Reply{Text: s, Provider: "grammar"}} }
	if c, _ := chatcommand.ParseRoutine(text); c.Op == chatcommand.RoutineUsage {
		// Refused before any approval: nothing would run.
		if c.Problem != "" {
			return reply("🚫 " + c.Problem + ".\n" + chatcommand.RoutineUsageText)
		}
		return reply(chatcommand.RoutineUsageText)
	}
	if _, ok := reg.Get(chatcommand.RoutineToolName); !ok {
		return reply("Routines are not enabled on this bot.")
	}
	args := `{"text":` + jsonString(strings.TrimSpace(text)) + `}`
	return grammarReply{reply: core.Reply{Provider: "grammar", ToolCalls: []core.ToolCall{{ID: "g1", Name: chatcommand.RoutineToolName, Args: args}}}}
}

func jsonString(s string) string {
	b, _ := core.CanonicalJSON(s)
	return string(b)
}

// IsAdmin reports whether p administers the channel of sc (an operator, a
// channel admin set by policy, or a platform administrator): who may pause
// or delete someone else's routine.
func (e *Engine) IsAdmin(ctx context.Context, sc core.Scope, p core.Person) bool {
	v, err := e.channel(ctx, sc.Key())
	if err != nil {
		return false
	}
	var pol core.Policy
	if err := v.with(ctx, func() { pol = e.policyLocked(v) }); err != nil {
		return false
	}
	return e.governs(ctx, sc, p, pol).admin
}
