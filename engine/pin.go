package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"

	"github.com/marlowe-bot/marlowe/core"
)

// Rug-pull pinning: a channel pins each connector tool's definition (a
// hash of its name, annotations and input schema) in its policy the first
// time it uses the tool. When the server later declares another
// definition, calls are withheld and the channel's admins are asked, in
// their inboxes, to accept it; nothing runs on it until one does.

const (
	pinAccept = "Accept the new definition"
	pinKeep   = "Keep it withheld"
)

var errPolicyMoved = errors.New("the channel's policy changed meanwhile")

// pinState says how tool stands against the channel's pins: "" when it is
// not a connector's or matches its pin, "unpinned" the first time, or
// "changed".
func pinState(pol core.Policy, tool core.Tool) string {
	if tool.Connector == nil || tool.Connector.Definition == "" {
		return ""
	}
	pinned, ok := pol.Pins[tool.Name]
	switch {
	case !ok:
		return "unpinned"
	case pinned != tool.Connector.Definition:
		return "changed"
	}
	return ""
}

// pin records def as tool's definition in the channel's policy, unless an
// admin's policy change lands first (then it re-reads and tries again).
func (d *driver) pin(ctx context.Context, cause string, tool string, def string) error {
	for range 3 {
		var pol core.Policy
		_ = d.v.with(ctx, func() { pol = d.e.policyLocked(d.v) })
		if pol.Pins[tool] == def {
			return nil
		}
		np := pol
		np.Pins = maps.Clone(pol.Pins)
		if np.Pins == nil {
			np.Pins = map[string]string{}
		}
		np.Pins[tool] = def
		pc, err := d.agent(core.Meta{Cause: cause}, &core.PolicyChanged{Policy: np})
		if err != nil {
			return err
		}
		_, err = d.appendRun(ctx, func() error {
			if !reflect.DeepEqual(d.e.policyLocked(d.v), pol) {
				return errPolicyMoved
			}
			return nil
		}, pc)
		if !errors.Is(err, errPolicyMoved) {
			return err
		}
	}
	return errPolicyMoved
}

// withhold refuses a requested call whose tool's definition changed since
// the channel pinned it, and asks the admins to accept the new one: the run
// waits for their answer.
func (d *driver) withhold(ctx context.Context, cs *callState, tool core.Tool, req core.Draft) (bool, error) {
	if _, err := d.appendRun(ctx, nil, req); err != nil {
		return false, err
	}
	o := tool.Connector
	q := fmt.Sprintf("Connector %q changed the definition of its tool %q (%s): its name, annotations or arguments are not what this channel first used. "+
		"Until an admin accepts the new definition, nothing runs on it.", o.Server, o.Tool, tool.Name)
	parked, err := d.escalate(ctx, cs, tool, &core.Escalation{
		Question: q, Context: fmt.Sprintf("now judged %s; new definition %s", tool.Consequence, o.Definition),
		Options: []string{pinAccept, pinKeep}, ToAdmins: true,
	}, func(ar *core.ApprovalRequested) {
		ar.Pin, ar.Reason = o.Definition, "a connector changed a tool's definition"
	})
	d.e.log.WarnContext(ctx, "connector tool definition changed: withheld until an admin accepts it", "run", d.rs.ID, "tool", tool.Name, "definition", o.Definition)
	return parked, err
}

// answerPin acts on the admins' answer about a changed definition. The
// call itself is never run from here: the model is told and may call again.
func (d *driver) answerPin(ctx context.Context, cs *callState, a *runApproval) error {
	who := a.res.By.Name
	if who == "" {
		who = a.res.By.ID
	}
	if a.res.Choice != pinAccept {
		return d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "withheld",
			Error: fmt.Sprintf("withheld: the server changed this tool's definition and %s kept it withheld; do not use it", who)})
	}
	if err := d.pin(ctx, cs.reqID, a.req.Tool, a.req.Pin); err != nil {
		return err
	}
	return d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "withheld",
		Error: fmt.Sprintf("not run: %s accepted the tool's new definition; call it again if it is still needed", who)})
}

// stillPinned re-checks a call about to run (after an approval or a
// restart) against the channel's pin: a definition that changed meanwhile
// does not run.
func (d *driver) stillPinned(ctx context.Context, cs *callState, tool core.Tool) (bool, error) {
	var pol core.Policy
	_ = d.v.with(ctx, func() { pol = d.e.policyLocked(d.v) })
	if pinState(pol, tool) != "changed" {
		return true, nil
	}
	return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "withheld",
		Error: "withheld: the server changed this tool's definition after it was approved; nothing was sent. Call it again to have the new definition put to the channel's admins"})
}
