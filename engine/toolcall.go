package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
)

func (d *driver) interpretCalls(ctx context.Context) (bool, error) {
	for _, cs := range d.rs.step.calls {
		if cs.completed {
			continue
		}
		parked, err := d.interpretCall(ctx, cs)
		if err != nil || parked || d.rs.Status != core.RunWorking {
			return parked, err
		}
	}
	return false, nil
}

func (d *driver) interpretCall(ctx context.Context, cs *callState) (bool, error) {
	rs := d.rs
	if !cs.requested {
		return d.requestCall(ctx, cs)
	}
	tool, args, cerr := d.e.tools.ValidateCall(cs.call, nil)
	if cerr == nil && tool.Connector != nil {
		var pol core.Policy
		_ = d.v.with(ctx, func() { pol = d.e.policyLocked(d.v) })
		tool = gate.InChannel(tool, pol)
	}
	if cerr != nil {
		// The registry changed across a restart: a connector's server not
		// back yet, or a tool gone. A connector call that was allowed (it
		// may have run) or is waiting on a card goes on with a stand-in
		// that never runs; any other allowed call is in doubt.
		mayHaveRun := cs.decision == gate.Allow || cs.allowedRun
		if t, a, ok := unknownConnectorTool(cs.call); ok && (mayHaveRun || cs.approval != "") {
			tool, args = t, a
		} else if mayHaveRun && !d.e.keptFromRunning(cs.call.ID) {
			return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "interrupted", Error: inDoubtMessage})
		} else {
			return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: cerr.Code, Error: cerr.JSON()})
		}
	}
	if cs.approval != "" {
		a := rs.approvals[cs.approval]
		if a.res == nil {
			if !d.e.now().Before(a.req.ExpiresAt) {
				if err := d.expire(ctx, a); err != nil {
					return false, err
				}
			} else {
				return true, d.showCard(ctx, a)
			}
		}
		if err := d.showResolution(ctx, a); err != nil {
			return false, err
		}
		d.approvalEvent(ctx, "marlowe.approval.resolved", a)
		res := a.res
		who := res.By.Name
		if who == "" {
			who = res.By.ID
		}
		switch res.Decision {
		case "approved":
			if ok, err := d.stillPinned(ctx, cs, tool); !ok || err != nil {
				return false, err
			}
			if cs.allowedRun {
				return d.interrupted(ctx, cs, tool, args)
			}
			reason := "approved by " + who
			if a.req.SignIn != "" {
				reason = who + " connected " + a.req.SignIn
			}
			pd, err := d.agent(core.Meta{Cause: cs.reqID}, &core.PermissionDecided{CallID: cs.call.ID, Tool: tool.Name, Decision: string(gate.Allow), Reason: reason})
			if err != nil {
				return false, err
			}
			if _, err := d.appendRun(ctx, nil, pd); err != nil {
				return false, err
			}
			return d.execute(ctx, cs, tool, args)
		case "answered":
			if a.req.Pin != "" {
				return false, d.answerPin(ctx, cs, a)
			}
			if a.req.InDoubt {
				return d.answerInDoubt(ctx, cs, tool, args, a)
			}
			return false, d.complete(ctx, cs, &core.ToolCompleted{OK: true, Trust: string(core.Trusted),
				Result: fmt.Sprintf("%s answered: %s", who, res.Choice)})
		case "declined":
			if err := d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "declined", Error: "declined by " + who + "; do not retry this action"}); err != nil || !rs.unattended {
				return false, err
			}
			return false, d.fail(ctx, core.RunCancelled, who+" declined "+tool.Name+", so nothing was done")
		case "superseded":
			return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "superseded",
				Error: "not executed: a newer message arrived in the thread before anyone decided; read it and ask again only if it still applies"})
		case "expired":
			if err := d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "expired", Error: "not executed: the approval request expired"}); err != nil {
				return false, err
			}
			return false, d.fail(ctx, core.RunCancelled, "the approval request expired, so nothing was done")
		}
		return false, d.fail(ctx, core.RunBroken, "unknown approval decision "+res.Decision)
	}
	if cs.decision == gate.Allow {
		if ok, err := d.stillPinned(ctx, cs, tool); !ok || err != nil {
			return false, err
		}
		return d.interrupted(ctx, cs, tool, args)
	}
	// Denied but not completed: finish the record.
	return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "denied", Error: "not allowed in this channel"})
}

// requestCall validates a new call, asks the gate and acts on its verdict.
func (d *driver) requestCall(ctx context.Context, cs *callState) (bool, error) {
	rs := d.rs
	req, err := d.agent(core.Meta{}, &core.ToolRequested{Call: cs.call})
	if err != nil {
		return false, err
	}
	var exposed []string
	var pol core.Policy
	_ = d.v.with(ctx, func() { pol = d.e.policyLocked(d.v) })
	exposed = d.e.tools.ExposedIn(rs.Scope.Key(), pol)
	tool, args, cerr := d.e.tools.ValidateCall(cs.call, exposed)
	tool = gate.InChannel(tool, pol)
	if cerr != nil {
		done, err := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: cs.call.ID, Tool: cs.call.Name, OK: false, Code: cerr.Code, Error: cerr.JSON()})
		if err != nil {
			return false, err
		}
		_, err = d.appendRun(ctx, nil, req, done)
		return false, err
	}
	switch pinState(pol, tool) {
	case "unpinned":
		if err := d.pin(ctx, "", tool.Name, tool.Connector.Definition); err != nil {
			return false, err
		}
	case "changed":
		return d.withhold(ctx, cs, tool, req)
	}
	if tool.Check != nil {
		// Arguments are judged before anyone is asked: a call that would
		// fail is refused now, with no card.
		raw, err := gate.CanonicalArgs(args)
		if err != nil {
			return false, err
		}
		c, err := tool.Check(ctx, core.ToolContext{Run: rs.ID, Scope: rs.Scope, Actor: rs.Requester, Surface: d.s, CallID: cs.call.ID, Origin: req.ID()}, raw)
		if err != nil {
			done, derr := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: cs.call.ID, Tool: tool.Name, OK: false, Code: "refused", Error: core.Truncate(err.Error(), 2000)})
			if derr != nil {
				return false, derr
			}
			_, err = d.appendRun(ctx, nil, req, done)
			return false, err
		}
		if c.Valid() {
			tool.Consequence = c
		}
	}
	var dec gate.Decision
	_ = d.v.with(ctx, func() {
		dec = gate.Decide(gate.Request{
			Tool: tool, Args: args, Exposed: slices.Contains(exposed, tool.Name), Policy: pol,
			Trusted:   rs.trustedTexts(),
			Consented: func(tool, dest string) bool { return d.v.fold.Consented(tool, dest, pol.Approvers) },
		})
	})
	pd, err := d.agent(core.Meta{Cause: req.ID()}, &core.PermissionDecided{CallID: cs.call.ID, Tool: tool.Name, Decision: string(dec.Verdict), Reason: dec.Reason})
	if err != nil {
		return false, err
	}
	if dec.Verdict != gate.Allow {
		d.gateEvent(ctx, tool, string(dec.Verdict))
	}
	switch dec.Verdict {
	case gate.Deny:
		done, err := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: cs.call.ID, Tool: tool.Name, OK: false, Code: "denied", Error: dec.Reason})
		if err != nil {
			return false, err
		}
		_, err = d.appendRun(ctx, nil, req, pd, done)
		return false, err
	case gate.Allow:
		if _, err := d.appendRun(ctx, nil, req, pd); err != nil {
			return false, err
		}
		return d.execute(ctx, cs, tool, args)
	case gate.Ask:
		ar := &core.ApprovalRequested{
			ApprovalID: d.e.b.NewID(), CallID: cs.call.ID, Tool: tool.Name, Consequence: string(tool.Consequence),
			Summary: gate.Summary(tool, args), Requester: rs.Requester.ID, ExpiresAt: d.e.now().Add(d.e.cfg.ApprovalTTL),
			Reason: dec.Reason, Destination: dec.Destination, InDM: rs.inDM(),
		}
		if tool.ActsAsRequester {
			ar.ActsAs = rs.Requester.ID // an approver never lends their own account
		} else if tool.Connector != nil {
			ar.SharedAccount = tool.Connector.Server
		}
		if rs.unattended {
			return d.askOwner(ctx, cs, tool, req, pd, ar)
		}
		aud := d.e.approvalAudience(rs.Scope, pol, rs.Requester.ID, tool.Consequence, rs.inDM())
		if !aud.eligible {
			return d.noApprover(ctx, cs, tool, req, aud.why)
		}
		ar.Notify = aud.notify
		ad, err := d.agent(core.Meta{Cause: req.ID()}, ar)
		if err != nil {
			return false, err
		}
		if _, err := d.appendRun(ctx, nil, req, pd, ad); err != nil {
			return false, err
		}
		d.e.armExpiry(rs.Scope.Key(), rs.Scope.Thread, ar.ApprovalID, ar.ExpiresAt)
		d.e.log.InfoContext(ctx, "approval requested", "run", rs.ID, "tool", tool.Name, "approval", ar.ApprovalID)
		d.approvalEvent(ctx, "marlowe.approval.requested", rs.approvals[ar.ApprovalID])
		return true, d.showCard(ctx, rs.approvals[ar.ApprovalID])
	}
	return false, fmt.Errorf("gate returned unknown verdict %q", dec.Verdict)
}

// interrupted handles a call whose execution began (permission journaled)
// but whose completion was never recorded: the process died mid-call. An
// irreversible action is not retried (its outcome is unknown; doing it twice
// is worse than telling people); anything else runs again with the same
// effect keys, so its posts are not duplicated.
func (d *driver) interrupted(ctx context.Context, cs *callState, tool core.Tool, args map[string]any) (bool, error) {
	if notRepeatable(tool) && !d.e.keptFromRunning(cs.call.ID) {
		if tool.Connector != nil {
			return d.askInDoubt(ctx, cs, tool, args)
		}
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "interrupted", Error: inDoubtMessage})
	}
	return d.execute(ctx, cs, tool, args)
}

func (d *driver) execute(ctx context.Context, cs *callState, tool core.Tool, args map[string]any) (bool, error) {
	rs := d.rs
	if tool.Run == nil { // a connector tool not offered now (unknownConnectorTool)
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "unavailable",
			Error: "not sent: " + tool.Name + "'s connector is not connected"})
	}
	trust := core.Trusted
	if rs.tainted {
		trust = core.Untrusted
	}
	tc := core.ToolContext{
		Run: rs.ID, Scope: rs.Scope, Actor: rs.Requester,
		Surface: &toolSurface{Surface: d.s, e: d.e, d: d, cs: cs},
		CallID:  cs.call.ID, Origin: cs.reqID, EffectKey: core.EffectID(rs.Scope.Key(), cs.reqSeq, 0), Trust: trust,
	}
	var pol core.Policy
	_ = d.v.with(ctx, func() { pol = d.e.policyLocked(d.v) })
	tc.Offered = d.e.tools.ExposedIn(rs.Scope.Key(), pol)
	if d.e.cfg.Memory != nil {
		// The write's actor is the run whose tool.requested caused it.
		tc.Memory = core.BindMemoryWithAuthors(d.e.cfg.Memory(rs.Scope.Key()), core.Provenance{
			Origin: cs.reqID, Actor: core.Actor{Type: core.ActorAgent, ID: rs.ID, Platform: rs.Scope.Platform},
			Trust: string(trust), Derivation: tool.Name + " tool on behalf of " + rs.Requester.ID,
		}, d.authorOf)
	}
	// The tool gets exactly the object the gate judged, re-encoded: never
	// the model's bytes, whose duplicate or case-variant keys a struct
	// decoder would resolve differently.
	raw, err := gate.CanonicalArgs(args)
	if err != nil {
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "invalid", Error: err.Error()})
	}
	if err := d.e.mayAct(ctx); err != nil {
		d.e.keepFromRunning(cs.call.ID)
		return false, err // the call runs when the lease is sure again, or on the new owner
	}
	tctx, cancel := context.WithTimeout(ctx, d.e.cfg.ToolTimeout)
	tctx, span := d.toolSpan(tctx, tool, cs, verdictOf(cs), raw)
	stopTyping := d.typing.busy(ctx)
	obs, err := d.runWatched(ctx, tctx, tool, tc, raw)
	stopTyping()
	d.endToolSpan(span, obs, err)
	cancel()
	if ctx.Err() != nil {
		return false, ctx.Err() // stopping: the call re-runs on resume
	}
	if err != nil {
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "error", Error: core.Truncate(err.Error(), 2000)})
	}
	if obs.Escalate != nil {
		return d.escalate(ctx, cs, tool, obs.Escalate)
	}
	if obs.SignIn != "" {
		return d.awaitSignIn(ctx, cs, tool, args, obs.SignIn) // connections.go
	}
	t := obs.Trust
	if t == "" {
		t = core.Untrusted // tool output is untrusted unless the tool vouches for it
	}
	return false, d.complete(ctx, cs, &core.ToolCompleted{OK: true, Result: core.Truncate(obs.Text, maxObservation), Trust: string(t), Checklist: obs.Checklist})
}

// runTool calls the tool, turning a panic into an error: one bad tool must
// not take the process (and every other thread's run) down.
func runTool(ctx context.Context, tool core.Tool, tc core.ToolContext, args json.RawMessage) (obs core.Observation, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool %s panicked: %v", tool.Name, r)
		}
	}()
	return tool.Run(ctx, tc, args)
}

func (d *driver) escalate(ctx context.Context, cs *callState, tool core.Tool, esc *core.Escalation, mods ...func(*core.ApprovalRequested)) (bool, error) {
	rs := d.rs
	opts := esc.Options
	if len(opts) > maxOptions {
		opts = opts[:maxOptions]
	}
	q := strings.TrimSpace(esc.Question)
	if q == "" {
		q = "The assistant needs a decision"
	}
	ar := &core.ApprovalRequested{
		ApprovalID: d.e.b.NewID(), CallID: cs.call.ID, Tool: tool.Name, Consequence: string(tool.Consequence),
		Summary: core.Truncate(esc.Context, 1500), Requester: rs.Requester.ID, ExpiresAt: d.e.now().Add(d.e.cfg.ApprovalTTL),
		Question: core.Truncate(q, 300), Options: opts, Reason: "the assistant asked for a decision",
	}
	for _, m := range mods {
		m(ar)
	}
	d.addressEscalation(ctx, ar, esc)
	ad, err := d.agent(core.Meta{Cause: cs.reqID}, ar)
	if err != nil {
		return false, err
	}
	if _, err := d.appendRun(ctx, nil, ad); err != nil {
		return false, err
	}
	d.e.armExpiry(rs.Scope.Key(), rs.Scope.Thread, ar.ApprovalID, ar.ExpiresAt)
	return true, d.showCard(ctx, rs.approvals[ar.ApprovalID])
}

func (d *driver) complete(ctx context.Context, cs *callState, tc *core.ToolCompleted) error {
	tc.CallID, tc.Tool = cs.call.ID, cs.call.Name
	cd, err := d.agent(core.Meta{Cause: cs.reqID}, tc)
	if err != nil {
		return err
	}
	_, err = d.appendRun(ctx, nil, cd)
	return err
}
