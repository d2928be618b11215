package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/core/gate"
)

const (
	maxInvalidCalls = 3        // consecutive malformed tool calls before the run fails
	maxObservation  = 16 << 10 // bytes of a tool result kept in the journal and the view
	maxOptions      = 10       // question options ('0'..'9' in the card token)
	maxLongRetry    = 30 * time.Second
)

// driver interprets one run: it owns the run's replayed state for the
// duration of one drive (one mailbox job), on the thread's one consumer
// goroutine, so nothing else touches rs.
type driver struct {
	e       *Engine
	rs      *RunReplay
	v       *chanView
	s       core.Surface
	grammar bool
	// outage, when set, is kept up to date with where the checklist is, so
	// a journal outage can be shown on it (see driveThroughOutages).
	outage *outageView
}

// drive loads a run from the journal and carries it as far as it can go:
// to a terminal state, or to a park (approval, budget), or until ctx ends.
// Everything it knows comes from the journal, so the same call resumes a
// run after a crash.
// outage, when not nil, is told where the run's checklist is.
func (e *Engine) drive(ctx context.Context, runID string, resume bool, outage *outageView) error {
	for attempt := 1; ; attempt++ {
		err := e.driveOnce(ctx, runID, resume, outage)
		if (errors.Is(err, errRunEnded) || errors.Is(err, errInterrupted)) && attempt < 3 {
			// Cancelled while this drive held the run: start again from
			// the journal, which now ends the run, and show that end.
			continue
		}
		if err != nil {
			return fmt.Errorf("drive run %s: %w", runID, err)
		}
		return nil
	}
}

func (e *Engine) driveOnce(ctx context.Context, runID string, resume bool, outage *outageView) error {
	cmds, err := e.j.ReadRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("read: %w", journalFailed(err))
	}
	rs, err := ReplayRun(cmds)
	if err != nil {
		return err
	}
	s, err := e.surface(rs.Scope.Platform)
	if err != nil {
		return err
	}
	outage.note(rs)
	v, err := e.channel(ctx, rs.Scope.Key())
	if err != nil {
		return journalFailed(err)
	}
	rs.resumed = resume
	d := &driver{e: e, rs: rs, v: v, s: s, outage: outage}
	d.grammar = e.offline || chatcommand.Parse(rs.Instruction).Deterministic() || chatcommand.ParseInbox(rs.Instruction).Kind != chatcommand.InboxNone
	return d.run(ctx, resume)
}

func (d *driver) run(ctx context.Context, resume bool) error {
	rs := d.rs
	if resume {
		if err := d.reissueEdits(ctx); err != nil {
			return err
		}
	}
	if rs.Done() {
		return d.reconcileEnd(ctx)
	}
	switch rs.Status {
	case core.RunBlocked, core.RunNeedsPermission:
		return d.reconcilePause(ctx)
	}
	if rs.Steps == 0 {
		d.ack(ctx, rs.latestHuman())
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.maybeChecklist(ctx); err != nil {
			return err
		}
		if d.openCalls() {
			parked, err := d.interpretCalls(ctx)
			if err != nil || parked || rs.Status != core.RunWorking {
				return err
			}
			if rs.invalidRun >= maxInvalidCalls {
				return d.fail(ctx, core.RunBroken, fmt.Sprintf("the model made %d invalid tool calls in a row", rs.invalidRun))
			}
			if err := d.syncChecklist(ctx, rs.Status); err != nil {
				return err
			}
			continue
		}
		if st := rs.step; st != nil && st.final && !d.pullSteering(ctx) {
			done, err := d.finish(ctx)
			if err != nil || done {
				return err
			}
			continue
		}
		// The checklist shows a step's tool results before the next model
		// call. Normally it already does (see above); after a crash between
		// the last result and the edit that shows it, it catches up here.
		if st := rs.step; st != nil && !st.final {
			if err := d.syncChecklist(ctx, rs.Status); err != nil {
				return err
			}
		}
		if err := d.modelStep(ctx); err != nil {
			return err
		}
		if rs.Status != core.RunWorking {
			return nil
		}
	}
}

func (d *driver) openCalls() bool {
	st := d.rs.step
	if st == nil || st.final {
		return false
	}
	for _, c := range st.calls {
		if !c.completed {
			return true
		}
	}
	return false
}

// pullSteering folds steering messages the ingress journaled for this run
// since the driver last looked, and reports whether any is still unseen by
// the model.
func (d *driver) pullSteering(ctx context.Context) bool {
	var fresh []core.Command
	_ = d.v.with(ctx, func() {
		if r := d.v.fold.Run(d.rs.ID); r != nil {
			for _, c := range r.Steer {
				if !d.rs.knowsHuman(c.ID()) {
					fresh = append(fresh, c)
				}
			}
		}
	})
	for _, c := range fresh {
		if err := d.rs.apply(c); err != nil {
			d.e.log.Warn("fold steering message", "run", d.rs.ID, "error", err)
			continue
		}
		d.ack(ctx, d.rs.human(c.ID()))
	}
	return len(d.rs.pendingSteering()) > 0
}

// unseenSteeringLocked reports a journaled steering message rs has not
// folded. Callers hold d.v.mu.
func (d *driver) unseenSteeringLocked() bool {
	if r := d.v.fold.Run(d.rs.ID); r != nil {
		for _, c := range r.Steer {
			if !d.rs.knowsHuman(c.ID()) {
				return true
			}
		}
	}
	return false
}

// appendRun appends run-scoped drafts to the run's channel and folds them.
// A run cancelled meanwhile (the ingress journaled its end) takes no
// further step: only the results of work already under way are recorded.
func (d *driver) appendRun(ctx context.Context, check func() error, drafts ...core.Draft) ([]core.Command, error) {
	guard := func() error {
		if !d.rs.Done() && !onlyResults(drafts) {
			if r := d.v.fold.Run(d.rs.ID); r != nil && r.Status.Terminal() {
				return errRunEnded
			}
		}
		if check != nil {
			return check()
		}
		return nil
	}
	cmds, err := d.v.append(ctx, guard, drafts...)
	if err != nil {
		if isJournalError(err) {
			d.outage.note(d.rs) // the checklist may have been posted since the drive began
		}
		return nil, err
	}
	for _, c := range cmds {
		if err := d.rs.apply(c); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

var errRunEnded = errors.New("the run was ended meanwhile")

func onlyResults(drafts []core.Draft) bool {
	for _, d := range drafts {
		if d.Kind() != core.KindToolCompleted {
			return false
		}
	}
	return true
}

// ended reports whether the run was ended outside this drive (cancelled).
func (d *driver) ended(ctx context.Context) bool {
	var end bool
	_ = d.v.with(ctx, func() {
		if r := d.v.fold.Run(d.rs.ID); r != nil && r.Status.Terminal() && !d.rs.Done() {
			end = true
		}
	})
	return end
}

func (d *driver) agent(m core.Meta, p core.Payload) (core.Draft, error) {
	return d.e.b.Agent(d.rs.ID, d.rs.Scope, m, p)
}

// ---- model steps ----

func (d *driver) snapshot(ctx context.Context) (pol core.Policy, dayTokens int) {
	_ = d.v.with(ctx, func() {
		pol = d.e.policyLocked(d.v)
		dayTokens = d.v.fold.TokensOn(fold.DayKey(d.e.now()))
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
	return ""
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
		reply, err = d.callModelAcked(ctx, d.view(pol, pending))
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

// ---- automatic recall ----

// Bounds on what one automatic recall may put into the journal and the view
// whatever the memory returns; memory/ enforces the real per-turn budget
// (6 snippets of 400 characters by default).
const (
	maxNoteText  = 2000
	maxNotesText = maxObservation
	maxQuery     = 2000
)

// recallNotes is the automatic recall (ARCHITECTURE.md sections 6 and 7).
// The run's human messages that no model call has seen yet, and that have
// no recall journaled, are recalled for once, their texts being the turn's
// queries, when the channel's memory is a TurnRecaller. The notes are
// journaled as the harness's own recall call before the model call that
// sees them: a replay rebuilds the view without asking memory, and a run
// resumed after a crash reuses them instead of asking again. A failing
// memory costs the notes, never the run.
func (d *driver) recallNotes(ctx context.Context) error {
	rs := d.rs
	if hs := rs.unrecalled(); len(hs) > 0 {
		if err := d.recallFor(ctx, hs); err != nil {
			return err
		}
	}
	if rs.notesInjected {
		// The checklist shows the recall before the model call (also after
		// a crash between its record and the edit); a no-op when it does.
		return d.syncChecklist(ctx, rs.Status)
	}
	return nil
}

func (d *driver) recallFor(ctx context.Context, hs []*humanMsg) error {
	rs, e := d.rs, d.e
	if e.cfg.Memory == nil {
		return nil
	}
	tr, ok := e.cfg.Memory(rs.Scope.Key()).(core.TurnRecaller)
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(hs))
	queries := make([]string, 0, len(hs))
	for _, h := range hs {
		ids = append(ids, h.cmdID)
		if q := strings.TrimSpace(h.text); q != "" {
			queries = append(queries, core.Truncate(q, maxQuery))
		}
	}
	if len(queries) == 0 {
		return nil
	}
	key := rs.ID + "/" + ids[len(ids)-1]
	got, cached := e.pendingRecall(key)
	if !cached {
		var err error
		got, err = d.askMemory(ctx, tr, queries)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.log.Warn("automatic recall failed; the run goes on without notes", "run", rs.ID, "error", err)
			return nil
		}
	}
	notes := boundNotes(got.Snippets)
	if len(notes) == 0 {
		return nil // nothing to inject, nothing to record
	}
	// Memory may not hand the same notes to this thread again (its dedup
	// window): keep them until they are journaled, so a drive retried after
	// a failed append injects them still.
	e.keepRecall(key, got)
	args, err := json.Marshal(map[string][]string{"queries": queries})
	if err != nil {
		return err
	}
	call := core.ToolCall{ID: "recall_" + ids[len(ids)-1], Name: "recall", Args: string(args)}
	req, err := d.agent(core.Meta{Cause: ids[len(ids)-1]}, &core.ToolRequested{Call: call, AutoRecall: ids})
	if err != nil {
		return err
	}
	done, err := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: call.ID, Tool: call.Name, OK: true,
		Trust: string(core.Untrusted), Notes: notes, Degraded: got.Degraded})
	if err != nil {
		return err
	}
	if _, err := d.appendRun(ctx, nil, req, done); err != nil {
		return err
	}
	e.dropRecall(key)
	e.log.Info("recalled notes for the turn", "run", rs.ID, "notes", len(notes), "tokens", got.Tokens, "degraded", got.Degraded)
	return nil
}

// askMemory calls the recaller within the tool timeout, turning a panic
// into an error.
func (d *driver) askMemory(ctx context.Context, tr core.TurnRecaller, queries []string) (got core.TurnRecall, err error) {
	rctx, cancel := context.WithTimeout(ctx, d.e.cfg.ToolTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recall panicked: %v", r)
		}
	}()
	return tr.RecallForTurn(rctx, d.rs.Scope.Thread, queries...)
}

// boundNotes drops empty notes and cuts the rest to the bounds above.
func boundNotes(in []core.Recalled) []core.Recalled {
	var out []core.Recalled
	total := 0
	for _, n := range in {
		n.Text = core.Truncate(strings.TrimSpace(n.Text), maxNoteText)
		if n.Text == "" {
			continue
		}
		if total += len(n.ID) + len(n.Text); total > maxNotesText {
			break
		}
		out = append(out, n)
	}
	return out
}

// maxPendingRecalls bounds the recalls kept for a retry: an entry outlives
// its drive only when journaling it failed.
const maxPendingRecalls = 1024

func (e *Engine) pendingRecall(key string) (core.TurnRecall, bool) {
	e.recallMu.Lock()
	defer e.recallMu.Unlock()
	r, ok := e.recalls[key]
	return r, ok
}

func (e *Engine) keepRecall(key string, r core.TurnRecall) {
	e.recallMu.Lock()
	defer e.recallMu.Unlock()
	if e.recalls == nil || len(e.recalls) >= maxPendingRecalls {
		e.recalls = map[string]core.TurnRecall{}
	}
	e.recalls[key] = r
}

func (e *Engine) dropRecall(key string) {
	e.recallMu.Lock()
	defer e.recallMu.Unlock()
	delete(e.recalls, key)
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
// It reads nothing of the run but runID (callModelAcked runs it beside the
// driver goroutine).
func (d *driver) callModel(ctx context.Context, v core.View, runID string, remaining time.Duration) (core.Reply, error) {
	if remaining <= 0 {
		return core.Reply{}, errWallBudget
	}
	mctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	wait := d.e.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		began := time.Now()
		reply, err := d.e.model.Step(mctx, v)
		d.e.metrics().ModelCalled(time.Since(began), reply.Usage, err)
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
		d.e.log.Warn("model call failed; retrying", "run", runID, "failure", string(me.Failure), "wait", w)
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
	d.e.log.Warn("model call failed", "run", d.rs.ID, "error", err)
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

// ---- tool calls ----

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
	if cerr != nil {
		// Cannot happen for a call that passed validation when requested,
		// unless the registry changed across a restart.
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: cerr.Code, Error: cerr.JSON()})
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
		res := a.res
		who := res.By.Name
		if who == "" {
			who = res.By.ID
		}
		switch res.Decision {
		case "approved":
			if cs.allowedRun {
				return d.interrupted(ctx, cs, tool, args)
			}
			pd, err := d.agent(core.Meta{Cause: cs.reqID}, &core.PermissionDecided{CallID: cs.call.ID, Tool: tool.Name, Decision: string(gate.Allow), Reason: "approved by " + who})
			if err != nil {
				return false, err
			}
			if _, err := d.appendRun(ctx, nil, pd); err != nil {
				return false, err
			}
			return d.execute(ctx, cs, tool, args)
		case "answered":
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
	exposed = d.e.tools.Exposed(pol)
	tool, args, cerr := d.e.tools.ValidateCall(cs.call, exposed)
	if cerr != nil {
		done, err := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: cs.call.ID, Tool: cs.call.Name, OK: false, Code: cerr.Code, Error: cerr.JSON()})
		if err != nil {
			return false, err
		}
		_, err = d.appendRun(ctx, nil, req, done)
		return false, err
	}
	var dec gate.Decision
	_ = d.v.with(ctx, func() {
		dec = gate.Decide(gate.Request{
			Tool: tool, Args: args, Exposed: slices.Contains(exposed, tool.Name), Policy: pol,
			Trusted: rs.trustedTexts(), Consented: d.v.fold.Consented,
		})
	})
	pd, err := d.agent(core.Meta{Cause: req.ID()}, &core.PermissionDecided{CallID: cs.call.ID, Tool: tool.Name, Decision: string(dec.Verdict), Reason: dec.Reason})
	if err != nil {
		return false, err
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
			Summary: callSummary(tool, args), Requester: rs.Requester.ID, ExpiresAt: d.e.now().Add(d.e.cfg.ApprovalTTL),
			Reason: dec.Reason, Destination: dec.Destination,
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
		d.e.log.Info("approval requested", "run", rs.ID, "tool", tool.Name, "approval", ar.ApprovalID)
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
	if tool.Consequence == core.Irreversible && !d.e.keptFromRunning(cs.call.ID) {
		return false, d.complete(ctx, cs, &core.ToolCompleted{OK: false, Code: "interrupted",
			Error: "the bot restarted while this irreversible action was running; its outcome is unknown and it was not retried — check before trying again"})
	}
	return d.execute(ctx, cs, tool, args)
}

func (d *driver) execute(ctx context.Context, cs *callState, tool core.Tool, args map[string]any) (bool, error) {
	rs := d.rs
	trust := core.Trusted
	if rs.tainted {
		trust = core.Untrusted
	}
	tc := core.ToolContext{
		Run: rs.ID, Scope: rs.Scope, Actor: rs.Requester,
		Surface: &toolSurface{Surface: d.s, e: d.e, d: d, cs: cs},
		CallID:  cs.call.ID, Origin: cs.reqID, EffectKey: core.EffectID(rs.Scope.Key(), cs.reqSeq, 0), Trust: trust,
	}
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
	obs, err := runTool(tctx, tool, tc, raw)
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

func (d *driver) escalate(ctx context.Context, cs *callState, tool core.Tool, esc *core.Escalation) (bool, error) {
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

// callSummary renders a call for an approval card: the tool and its
// arguments, each shortened.
func callSummary(t core.Tool, args map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The assistant wants to run %s:", t.Name)
	for _, k := range gate.SortedKeys(args) {
		fmt.Fprintf(&b, "\n• %s: %s", k, core.Truncate(gate.ScalarString(args[k]), 300))
	}
	return b.String()
}

// ---- approvals ----

func (d *driver) cardEffect(a *runApproval) string { return core.EffectID(a.scope.Key(), a.seq, 0) }

// showCard posts the approval's card unless it is already posted, and
// shows the wait on the checklist.
func (d *driver) showCard(ctx context.Context, a *runApproval) error {
	if a.req.Unattended {
		return d.showInbox(ctx, a) // nobody watches the thread: the owner's inbox only
	}
	card, err := approvalCard(d.e.cfg.CardKey, a.req, nil, time.Time{})
	if err != nil {
		return err
	}
	out := core.Outbound{Key: d.cardEffect(a), Scope: d.rs.Scope, Text: card.Title, Card: card, Priority: core.PriorityHigh}
	if _, err := d.e.post(ctx, d.s, d.rs, out, postRecord{run: d.rs.ID, cause: a.req.ApprovalID, role: core.RoleCard, answering: d.rs.latestHuman()}); err != nil {
		return err
	}
	if err := d.showInbox(ctx, a); err != nil {
		return err
	}
	return d.syncChecklist(ctx, d.rs.Status)
}

// showResolution edits every rendering of a decided card in place (the
// thread's and each DM inbox's): who decided, and when.
func (d *driver) showResolution(ctx context.Context, a *runApproval) error {
	if a.res == nil {
		return nil
	}
	homes := false
	for _, eff := range d.renderings(a) {
		if eff == d.cardEffect(a) && a.cardShown >= a.resSeq {
			continue
		}
		ref, ok := d.rs.Effects[eff]
		if !ok {
			continue // never posted (superseded before it went out)
		}
		card, err := d.renderingCard(a, eff)
		if err != nil {
			return err
		}
		if d.rs.shown[eff] == card.Resolution {
			continue
		}
		if err := d.e.cosmetic(ctx, d.e.edit(ctx, d.s, d.rs, eff, ref, core.Outbound{Text: card.Title + "\n" + card.Resolution, Card: card, Priority: core.PriorityHigh})); err != nil {
			return err
		}
		homes = homes || eff != d.cardEffect(a)
	}
	if homes {
		d.refreshHomes(ctx, a)
	}
	return nil
}

func (d *driver) expire(ctx context.Context, a *runApproval) error {
	ed, err := d.e.b.System("expiry", a.scope, core.Meta{Run: d.rs.ID}, &core.ApprovalResolved{ApprovalID: a.req.ApprovalID, Decision: "expired"})
	if err != nil {
		return err
	}
	_, err = d.appendRun(ctx, func() error {
		if x := d.v.fold.Approval(a.req.ApprovalID); x != nil && !x.Pending() {
			return errCheckFailed // decided meanwhile; the fold below catches up
		}
		return nil
	}, ed)
	if errors.Is(err, errCheckFailed) {
		return fmt.Errorf("approval %s was decided while expiring it: %w", a.req.ApprovalID, err)
	}
	return err
}

// ---- checklist, answers, terminal states ----

func (d *driver) ensureChecklist(ctx context.Context) error {
	rs := d.rs
	eff := rs.checklistEffect()
	if _, ok := rs.Effects[eff]; ok {
		return nil
	}
	out := core.Outbound{Key: eff, Scope: rs.Scope, Text: renderChecklist(rs), Priority: core.PriorityNormal}
	var trigger *humanMsg
	if len(rs.humans) > 0 {
		trigger = rs.latestHuman()
	}
	_, err := d.e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleChecklist, answering: trigger})
	return err
}

// syncChecklist edits the checklist to show rs as if in status st, if the
// text changed.
func (d *driver) syncChecklist(ctx context.Context, st core.RunStatus) error {
	rs := d.rs
	eff := rs.checklistEffect()
	ref, ok := rs.Effects[eff]
	if !ok {
		return nil // grammar runs have no checklist
	}
	saved := rs.Status
	rs.Status = st
	text := renderChecklist(rs)
	rs.Status = saved
	if rs.shown[eff] == text {
		return nil
	}
	return d.e.cosmetic(ctx, d.e.edit(ctx, d.s, rs, eff, ref, core.Outbound{Text: text, Priority: core.PriorityEdit}))
}

// reissueEdits repeats the last journaled edit of the checklist and of each
// decided card with the same key: a crash may have come between journaling
// an edit and performing it.
func (d *driver) reissueEdits(ctx context.Context) error {
	rs := d.rs
	for eff, u := range rs.updates {
		ref, ok := rs.Effects[eff]
		if !ok {
			continue
		}
		out := core.Outbound{Key: core.EffectID(u.ch, u.seq, 0), Scope: ref.Scope, Text: u.text, Priority: core.PriorityEdit}
		for _, a := range rs.approvals {
			if a.res != nil && slices.Contains(d.renderings(a), eff) {
				card, err := d.renderingCard(a, eff)
				if err != nil {
					return err
				}
				out.Card, out.Text = card, card.Title+"\n"+card.Resolution
			}
		}
		if err := d.e.mayAct(ctx); err != nil {
			return fmt.Errorf("re-issue edit %s: %w", out.Key, err)
		}
		if err := d.s.Update(ctx, ref, out); err != nil {
			return fmt.Errorf("re-issue edit %s: %w", out.Key, err)
		}
	}
	return nil
}

// finish posts the final answer (unless the run already answered through
// reply_in_thread since the latest message), marks the checklist done and
// completes the run — unless a steering message arrived meanwhile, in which
// case the loop goes on so the message is not dropped.
func (d *driver) finish(ctx context.Context) (bool, error) {
	rs := d.rs
	st := rs.step
	if !rs.answerPosted {
		text := strings.TrimSpace(st.text)
		if text == "" {
			text = "Done."
		}
		if h := rs.latestHuman(); h != nil && rs.inputLimit > 0 && utf8.RuneCountInString(h.text) > rs.inputLimit {
			text += fmt.Sprintf("\n\n_(Your message was long: I read only its first %d characters.)_", rs.inputLimit)
		}
		if _, shown := rs.Effects[rs.checklistEffect()]; rs.degraded && !shown {
			// No checklist to carry the mark: the answer says it.
			text += "\n\n_(memory: degraded, keywords only)_"
		}
		out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), st.seq, 0), Scope: rs.Scope, Text: text, Priority: core.PriorityHigh}
		if _, err := d.e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleAnswer, answering: rs.latestHuman()}); err != nil {
			return false, err
		}
	}
	if err := d.syncChecklist(ctx, core.RunDone); err != nil {
		return false, err
	}
	cd, err := d.agent(core.Meta{}, &core.RunCompleted{Summary: core.Truncate(st.text, 500)})
	if err != nil {
		return false, err
	}
	_, err = d.appendRun(ctx, func() error {
		if d.unseenSteeringLocked() {
			return errCheckFailed
		}
		return nil
	}, cd)
	if errors.Is(err, errCheckFailed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d.e.metrics().RunEnded(core.RunDone)
	d.e.log.Info("run completed", "run", rs.ID, "steps", rs.Steps, "tokens", rs.Tokens)
	return true, nil
}

// pause parks the run (blocked or needs-permission) and says why.
func (d *driver) pause(ctx context.Context, st core.RunStatus, why string) error {
	pd, err := d.agent(core.Meta{}, &core.RunPaused{Status: st, Reason: why})
	if err != nil {
		return err
	}
	if _, err := d.appendRun(ctx, nil, pd); err != nil {
		return err
	}
	d.e.log.Info("run paused", "run", d.rs.ID, "status", string(st), "reason", why)
	return d.reconcilePause(ctx)
}

func (d *driver) reconcilePause(ctx context.Context) error {
	rs := d.rs
	p := rs.pause
	if p == nil {
		return nil
	}
	if p.status == core.RunNeedsPermission {
		return d.reconcileNeedsPermission(ctx)
	}
	if err := d.syncChecklist(ctx, rs.Status); err != nil {
		return err
	}
	text := "⏸ I had to pause: " + p.reason + ".\n" +
		"An admin can raise the budget (`policy set budget <tokens>`), or mention me again to start over."
	if !strings.Contains(p.reason, "budget") {
		text = "⏸ I had to pause: " + p.reason + ". Mention me again to retry."
	}
	out := core.Outbound{Key: core.EffectID(p.ch, p.seq, 0), Scope: rs.Scope, Text: text, Priority: core.PriorityHigh}
	_, err := d.e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleNotice, answering: rs.latestHuman()})
	return err
}

// fail ends the run (broken or cancelled) with its cause.
func (d *driver) fail(ctx context.Context, st core.RunStatus, cause string) error {
	fd, err := d.agent(core.Meta{}, &core.RunFailed{Status: st, Cause: cause})
	if err != nil {
		return err
	}
	if _, err := d.appendRun(ctx, nil, fd); err != nil {
		return err
	}
	d.e.metrics().RunEnded(st)
	d.e.log.Info("run ended", "run", d.rs.ID, "status", string(st), "cause", cause)
	return d.reconcileEnd(ctx)
}

// reconcileEnd makes a failed run's terminal state visible: checklist and a
// notice in the thread (idempotent: re-driving posts nothing twice).
func (d *driver) reconcileEnd(ctx context.Context) error {
	rs := d.rs
	if rs.Status == core.RunDone {
		return nil
	}
	if err := d.syncChecklist(ctx, rs.Status); err != nil {
		return err
	}
	for _, id := range rs.approvalOrder {
		// A cancel decides the run's open cards on its way out.
		if err := d.showResolution(ctx, rs.approvals[id]); err != nil {
			return err
		}
	}
	if rs.endSeq == 0 || rs.Reason == fold.CauseSuperseded {
		return nil // the new run's checklist says everything
	}
	prefix := "❌ I couldn't finish this: "
	if rs.Status == core.RunCancelled {
		prefix = "🚫 Stopped: "
	}
	out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), rs.endSeq, 0), Scope: rs.Scope, Text: prefix + rs.Reason + ".", Priority: core.PriorityHigh}
	_, err := d.e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, role: core.RoleNotice, answering: rs.latestHuman()})
	return err
}
