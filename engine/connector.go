package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// inDoubtMessage is what a call interrupted by a restart completes with
// when it is not sent again.
const inDoubtMessage = "the bot restarted while this action was running; its outcome is unknown and it was not sent again — check whether it happened before trying again, and tell the person"

// notRepeatable reports whether a call interrupted by a restart (its
// outcome unknown) must not be sent again: an irreversible tool, and a
// connector's tool unless it is read-only or declares itself idempotent.
// Built-in writes are safe to repeat: their effects carry the call's
// deterministic key. A remote server's are not.
func notRepeatable(t core.Tool) bool {
	if t.Consequence == core.Irreversible {
		return true
	}
	return t.Connector != nil && t.Consequence != core.Read && !t.Connector.Idempotent
}

const (
	inDoubtRetry = "Send it again"
	inDoubtSkip  = "Skip it"
)

// askInDoubt puts a connector call whose outcome a crash made unknown to
// the person, on a card: send it again (it may then happen twice) or skip
// it. Nothing is sent until someone answers.
func (d *driver) askInDoubt(ctx context.Context, cs *callState, tool core.Tool, args map[string]any) (bool, error) {
	q := fmt.Sprintf("The bot restarted while %s was running: its outcome is unknown, so it was not sent again. Check whether it happened, then send it again or skip it.", tool.Name)
	d.e.log.WarnContext(ctx, "connector call in doubt after a restart: asking", "run", d.rs.ID, "tool", tool.Name, "call", cs.call.ID)
	return d.escalate(ctx, cs, tool, &core.Escalation{Question: q, Context: gate.Summary(tool, args), Options: []string{inDoubtRetry, inDoubtSkip}},
		func(ar *core.ApprovalRequested) {
			ar.InDoubt, ar.Reason = true, "a connector call's outcome is unknown after a restart"
		})
}

// answerInDoubt acts on the answer: the call is sent again (on the
// definition the channel pinned) or completed as skipped.
func (d *driver) answerInDoubt(ctx context.Context, cs *callState, tool core.Tool, args map[string]any, a *runApproval) (bool, error) {
	who := a.res.By.Name
	if who == "" {
		who = a.res.By.ID
	}
	if a.res.Choice == inDoubtRetry && tool.Run == nil {
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "interrupted",
			Error: inDoubtMessage + "; " + who + " chose to send it again, but its connector is not connected: nothing was sent"})
	}
	if a.res.Choice != inDoubtRetry {
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "interrupted",
			Error: inDoubtMessage + "; " + who + " chose to skip it"})
	}
	if ok, err := d.stillPinned(ctx, cs, tool); !ok || err != nil {
		return false, err
	}
	return d.execute(ctx, cs, tool, args)
}

// unknownConnectorTool stands in for a connector tool that is not offered
// right now (its server not back after a restart): judged irreversible,
// since what it does is unknown, and without a Run, so it is never sent.
func unknownConnectorTool(call core.ToolCall) (core.Tool, map[string]any, bool) {
	if !strings.Contains(call.Name, "__") { // built-ins never have "__"
		return core.Tool{}, nil, false
	}
	var args map[string]any
	if json.Unmarshal([]byte(call.Args), &args) != nil || args == nil {
		args = map[string]any{}
	}
	server, name, _ := strings.Cut(call.Name, "__")
	return core.Tool{Name: call.Name, Consequence: core.Irreversible, Schema: json.RawMessage(`{"type":"object"}`),
		Connector: &core.ToolOrigin{Server: server, Tool: name}}, args, true
}
