package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
)

func (d *driver) snapshot(ctx context.Context) (pol core.Policy, dayTokens int) {
	_ = d.v.with(ctx, func() {
		pol = d.e.policyLocked(d.v)
		dayTokens = d.v.fold.TokensOn(d.e.now())
	})
	return pol, dayTokens
}

// overBudget names the budget that is used up, or "".
func (d *driver) overBudget(pol core.Policy, dayTokens int) string {
	b, rs := d.e.budgets, d.rs
	if rs.Steps >= b.MaxSteps {
		return fmt.Sprintf("the step budget (%d model calls per run) is used up", b.MaxSteps)
	}
	if d.grammar {
		return "" // the grammar spends no tokens; it must work to raise a budget
	}
	if rs.Tokens >= b.MaxTokens {
		return fmt.Sprintf("the token budget (%d tokens per run) is used up", b.MaxTokens)
	}
	if rs.activeTime(d.e.now()) >= b.MaxWall {
		return fmt.Sprintf("the time budget (%s per run) is used up", b.MaxWall)
	}
	daily := pol.DailyTokenBudget
	if daily <= 0 {
		daily = b.DailyTokens
	}
	if daily > 0 && dayTokens >= daily {
		return fmt.Sprintf("this channel's daily token budget (%d tokens) is used up; it resets at midnight UTC", daily)
	}
	return d.overSpend(pol)
}

var errWallBudget = errors.New("run time budget exhausted during the model call")

func (d *driver) modelStep(ctx context.Context) error {
	rs := d.rs
	if d.ended(ctx) {
		return errRunEnded
	}
	d.pullSteering(ctx)
	pol, dayTokens := d.snapshot(ctx)
	if why := d.overBudget(pol, dayTokens); why != "" {
		return d.pause(ctx, core.RunBlocked, why)
	}
	if !d.grammar {
		if err := d.readFiles(ctx); err != nil {
			return err
		}
		if err := d.recallNotes(ctx); err != nil {
			return err
		}
	}
	pending := rs.pendingSteering()
	var reply core.Reply
	var newPolicy *core.Policy
	var by core.Person
	if d.grammar {
		h := rs.latestHuman()
		if len(pending) > 0 {
			h = pending[len(pending)-1]
		}
		if h == nil {
			return d.fail(ctx, core.RunBroken, "the run has no message to answer")
		}
		cmd := chatcommand.Parse(h.text)
		if cmd.EngineServed() && (rs.step == nil || rs.step.final) {
			reply = core.Reply{Text: d.chatCommand(ctx, cmd, h, pol), Provider: "grammar"}
		} else {
			var gov *governance
			if cmd.Kind == chatcommand.PolicySet {
				g := d.e.governs(ctx, rs.Scope, h.author, pol)
				gov = &g
			}
			gr := grammarStep(rs, pol, d.e.tools, gov, h)
			reply, newPolicy, by = gr.reply, gr.policy, h.author
		}
		if ic := chatcommand.ParseInbox(h.text); ic.Kind != chatcommand.InboxNone && !(rs.step != nil && !rs.step.final && len(rs.step.calls) > 0) {
			r, err := d.inboxCommand(ctx, h, ic)
			if err != nil {
				return err
			}
			reply, newPolicy = r, nil
		}
	} else {
		var err error
		stopTyping := d.typing.busy(ctx)
		reply, err = d.callWithImages(ctx, d.view(pol, pending))
		stopTyping()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, errInterrupted) {
				return err
			}
			return d.modelFailed(ctx, err)
		}
	}
	normalizeCallIDs(reply.ToolCalls, rs.Steps)
	step := &core.ModelStep{
		Index: rs.Steps, Provider: reply.Provider, Model: reply.Model, Text: reply.Text,
		ToolCalls: reply.ToolCalls, Usage: reply.Usage, Final: len(reply.ToolCalls) == 0,
	}
	for _, h := range pending {
		step.Steering = append(step.Steering, h.cmdID)
	}
	var drafts []core.Draft
	if newPolicy != nil {
		pd, err := d.e.b.Human(by, rs.Scope, core.Meta{Run: rs.ID}, &core.PolicyChanged{Policy: *newPolicy})
		if err != nil {
			return err
		}
		drafts = append(drafts, pd)
	}
	sd, err := d.agent(core.Meta{}, step)
	if err != nil {
		return err
	}
	_, err = d.appendRun(ctx, nil, append(drafts, sd)...)
	return err
}

// normalizeCallIDs gives every call a unique id: providers may omit them or
// repeat them, and the journal matches observations to calls by id.
func normalizeCallIDs(calls []core.ToolCall, step int) {
	seen := map[string]bool{}
	for i := range calls {
		if calls[i].ID == "" || seen[calls[i].ID] {
			calls[i].ID = fmt.Sprintf("call_%d_%d", step, i)
		}
		seen[calls[i].ID] = true
	}
}

// callModel makes one model call within the run's remaining time, retrying
// transient failures a bounded number of times.
// It reads nothing of the run but its id and scope, which never change
// (callModelAcked runs it beside the driver goroutine).
//
// Nothing of the reply is shown while the model writes it: a step's text
// may precede a tool call, which the gate has not decided yet, and what a
// channel sees must be what the journal records. The answer is shown once
// its step is journaled without calls (streamAnswer streams it then).
func (d *driver) callModel(ctx context.Context, v core.View, runID string, remaining time.Duration) (core.Reply, error) {
	if remaining <= 0 {
		return core.Reply{}, errWallBudget
	}
	mctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	wait := d.e.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		began := time.Now()
		sctx, span := d.modelSpan(mctx, v, runID, attempt)
		reply, err := d.e.model.Step(sctx, v)
		d.endModelSpan(span, reply, err)
		d.e.metrics().ModelCalled(time.Since(began), reply.Usage, err)
		d.e.spent(d.rs.Scope, reply, err)
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return core.Reply{}, ctx.Err()
		}
		if mctx.Err() != nil {
			return core.Reply{}, errWallBudget
		}
		me, ok := core.AsModelError(err)
		if !ok || !me.Transient() || attempt >= d.e.cfg.ModelRetries || me.RetryAfter > maxLongRetry {
			return core.Reply{}, err
		}
		w := wait
		if me.RetryAfter > 0 {
			w = me.RetryAfter
		}
		d.e.log.WarnContext(ctx, "model call failed; retrying", "run", runID, "failure", string(me.Failure), "wait", w)
		t := time.NewTimer(w)
		select {
		case <-mctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return core.Reply{}, ctx.Err()
			}
			return core.Reply{}, errWallBudget
		case <-t.C:
		}
		wait *= 2
	}
}

// modelFailed turns a failed model call into a visible state: blocked for
// what may pass (rate limit, outage, time), broken for what will not.
func (d *driver) modelFailed(ctx context.Context, err error) error {
	d.e.log.WarnContext(ctx, "model call failed", "run", d.rs.ID, "error", err)
	if errors.Is(err, errWallBudget) {
		return d.pause(ctx, core.RunBlocked, fmt.Sprintf("the time budget (%s per run) is used up", d.e.budgets.MaxWall))
	}
	me, ok := core.AsModelError(err)
	if !ok {
		return d.fail(ctx, core.RunBroken, "the model call failed: "+core.Truncate(err.Error(), 200))
	}
	prov := me.Source() // "openai at 127.0.0.1:11434"
	switch me.Failure {
	case core.FailRateLimited:
		why := prov + " is rate limiting requests"
		if me.RetryAfter > 0 {
			why += fmt.Sprintf(" (retry after %s)", me.RetryAfter.Round(time.Second))
		}
		return d.pause(ctx, core.RunBlocked, why)
	case core.FailUnavailable, core.FailTimeout:
		return d.pause(ctx, core.RunBlocked, prov+" is unavailable ("+string(me.Failure)+")"+me.LikelyCause())
	case core.FailAuth:
		return d.fail(ctx, core.RunBroken, prov+" rejected the credentials; check the model configuration"+me.LikelyCause())
	case core.FailBadRequest:
		return d.fail(ctx, core.RunBroken, prov+" refused the request (bad-request)"+me.LikelyCause())
	case core.FailBadResponse:
		return d.fail(ctx, core.RunBroken, prov+" returned an unusable response after retries")
	}
	return d.fail(ctx, core.RunBroken, prov+" failed: "+string(me.Failure))
}
