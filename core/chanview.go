package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// chanView is the engine's cache of one channel: a fold over the channel's
// journal (policy, consents, approvals, runs per thread, token use per day,
// delivered message ids). It is rebuilt from the journal when first touched
// and advanced by every append the engine makes, so it is a cache with a
// rebuild path, never a second truth. Appends go through it, under its lock,
// which makes check-then-append (is this approval still pending? did a
// steering message arrive before completion?) atomic within the process.
type chanView struct {
	key ChannelKey
	j   Journal

	mu        sync.Mutex
	loaded    bool
	seq       uint64
	policy    Policy
	policySet bool
	consents  map[string]*consentGrant // by consent id (see consent.go)
	// revokedConsents are the ids of revoked grants (a repeated revoke says so).
	revokedConsents map[string]bool
	approvals       map[string]*approvalView
	runs            map[string]*chanRun
	threads         map[string]string   // thread root → latest run id
	seen            map[string]struct{} // delivered message ids (redelivery dedupe)
	dayTokens       map[string]int      // UTC date → tokens spent
	// history keeps each thread's recent conversation (routed messages and
	// the bot's answers) so a new run in a thread knows what came before.
	history      map[string][]ThreadTurn
	historyOrder []string // threads in first-seen order, to bound the map

	// touched is when the engine last handed the view out (guarded by
	// Engine.chMu): eviction drops views untouched for a while (evict.go).
	touched time.Time
}

// Bounds of the per-thread history a new run is given.
const (
	historyTurns      = 12   // most recent turns kept per thread
	historyTurnChars  = 1500 // each turn's text is cut to this
	historyMaxThreads = 4096 // threads remembered per channel
)

// remember adds a turn to a thread's history.
func (v *chanView) remember(thread string, t ThreadTurn) {
	if len(t.Text) > historyTurnChars {
		t.Text = truncate(t.Text, historyTurnChars)
	}
	h, ok := v.history[thread]
	if !ok {
		v.historyOrder = append(v.historyOrder, thread)
		if len(v.historyOrder) > historyMaxThreads {
			delete(v.history, v.historyOrder[0])
			v.historyOrder = v.historyOrder[1:]
		}
	}
	h = append(h, t)
	if len(h) > historyTurns {
		h = slices.Clone(h[len(h)-historyTurns:])
	}
	v.history[thread] = h
}

// chanRun is a run as the channel sees it.
type chanRun struct {
	id     string
	thread string
	status RunStatus
	// steer holds the run's message.received commands while it is live:
	// the driver picks up any it has not seen before each model call.
	steer []Command
	// endNotice is the effect id of a failed run's notice until it is
	// recorded as posted: Start re-drives such runs to post it.
	endNotice string
	// requester is the author of the message that started the run (empty
	// for unattended runs); startedAt its run.started time. The chat
	// commands use them: who may cancel, who added a memory, what runs.
	requester Person
	startedAt time.Time
}

func newChanView(key ChannelKey, j Journal) *chanView {
	return &chanView{
		key: key, j: j, consents: map[string]*consentGrant{}, approvals: map[string]*approvalView{},
		runs: map[string]*chanRun{}, threads: map[string]string{}, seen: map[string]struct{}{},
		dayTokens: map[string]int{}, history: map[string][]ThreadTurn{},
	}
}

// load folds the channel's journal once. Callers hold v.mu.
func (v *chanView) load(ctx context.Context) error {
	if v.loaded {
		return nil
	}
	if err := v.catchUp(ctx); err != nil {
		return err
	}
	v.loaded = true
	return nil
}

// catchUp applies whatever the journal holds past v.seq (another process's
// appends, or a gap). Callers hold v.mu.
func (v *chanView) catchUp(ctx context.Context) error {
	const page = 2048
	for {
		cmds, err := v.j.Read(ctx, v.key, v.seq+1, page)
		if err != nil {
			return fmt.Errorf("load channel %s from seq %d: %w", v.key, v.seq+1, err)
		}
		for _, c := range cmds {
			if err := v.apply(c); err != nil {
				return err
			}
		}
		if len(cmds) < page {
			return nil
		}
	}
}

// errCheckFailed wraps a refused conditional append.
var errCheckFailed = errors.New("append precondition failed")

// append appends drafts atomically after check (run under the lock) passes,
// then folds the result. check may be nil.
func (v *chanView) append(ctx context.Context, check func() error, drafts ...Draft) ([]Command, error) {
	return v.appendPlan(ctx, func() ([]Draft, error) {
		if check != nil {
			if err := check(); err != nil {
				return nil, err
			}
		}
		return drafts, nil
	})
}

// appendPlan builds the drafts under the lock, from the current state, and
// appends them atomically. plan returning no drafts appends nothing.
func (v *chanView) appendPlan(ctx context.Context, plan func() ([]Draft, error)) ([]Command, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.load(ctx); err != nil {
		return nil, journalFailed(err)
	}
	drafts, err := plan()
	if err != nil || len(drafts) == 0 {
		return nil, err
	}
	cmds, err := v.j.Append(ctx, drafts...)
	if err != nil {
		return nil, fmt.Errorf("append %s to %s: %w", drafts[0].Kind(), v.key, journalFailed(err))
	}
	if len(cmds) > 0 && cmds[0].Seq() != v.seq+1 {
		// Someone else appended in between: fold their commands too.
		return cmds, v.catchUp(ctx)
	}
	for _, c := range cmds {
		if err := v.apply(c); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// with runs fn under the lock on the loaded view.
func (v *chanView) with(ctx context.Context, fn func()) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.load(ctx); err != nil {
		return err
	}
	fn()
	return nil
}

func (v *chanView) run(id string) *chanRun {
	r := v.runs[id]
	if r == nil {
		r = &chanRun{id: id, status: RunQueued}
		v.runs[id] = r
	}
	return r
}

func dayKey(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// apply folds one command. Callers hold v.mu.
func (v *chanView) apply(c Command) error {
	if c.Seq() <= v.seq {
		return nil
	}
	v.seq = c.Seq()
	if c.Redacted() {
		return nil
	}
	p, err := c.Payload()
	if err != nil {
		return fmt.Errorf("fold channel %s: %w", v.key, err)
	}
	switch p := p.(type) {
	case *MessageReceived:
		v.seen[p.MessageID] = struct{}{}
		thread := c.Scope().Thread
		if thread == "" && p.Visibility != DM {
			thread = p.MessageID // a top-level message is answered in a thread under it
		}
		v.remember(thread, ThreadTurn{Author: p.Author, Text: p.Text})
		if c.Run() != "" {
			r := v.run(c.Run())
			if r.requester.ID == "" && r.startedAt.IsZero() {
				r.requester = p.Author // the trigger: journaled before run.started
			}
			if !r.status.Terminal() {
				r.steer = append(r.steer, c)
			}
		}
	case *RunStarted:
		r := v.run(c.Run())
		r.thread, r.status, r.startedAt = c.Scope().Thread, RunWorking, c.At()
		v.threads[r.thread] = r.id
	case *ModelStep:
		v.dayTokens[dayKey(c.At())] += p.Usage.InputTokens + p.Usage.OutputTokens
	case *ApprovalRequested:
		v.run(c.Run()).status = RunWaitingApproval
		v.approvals[p.ApprovalID] = &approvalView{
			ID: p.ApprovalID, Run: c.Run(), Scope: c.Scope(), CallID: p.CallID, Tool: p.Tool,
			Consequence: Consequence(p.Consequence), Requester: p.Requester, Question: p.Question,
			Options: p.Options, Destination: p.Destination, ExpiresAt: p.ExpiresAt,
			Notify: p.Notify, Unattended: p.Unattended, RequestedAt: c.At(), Summary: p.Summary, Reason: p.Reason,
		}
	case *ApprovalResolved:
		if a := v.approvals[p.ApprovalID]; a != nil && a.pending() {
			a.Decision, a.By, a.At = p.Decision, p.By, c.At()
			if r := v.runs[a.Run]; r != nil && (r.status == RunWaitingApproval || r.status == RunNeedsPermission) && !v.hasPending(a.Run) {
				r.status = RunWorking
			}
		}
	case *ConsentGranted:
		v.grantConsent(c, p)
	case *ConsentRevoked:
		v.revokeConsent(p)
	case *RunPaused:
		v.run(c.Run()).status = p.Status
	case *RunCompleted:
		r := v.run(c.Run())
		r.status, r.steer = RunDone, nil
	case *RunFailed:
		r := v.run(c.Run())
		r.status, r.steer = p.Status, nil
		if p.Status == RunBroken || p.Status == RunCancelled && p.Cause != causeSuperseded {
			r.endNotice = EffectID(v.key, c.Seq(), 0)
		}
	case *PolicyChanged:
		v.policy, v.policySet = p.Policy, true
	case *MessagePosted:
		if r := v.runs[c.Run()]; r != nil && r.endNotice == p.EffectID {
			r.endNotice = ""
		}
		if p.Role == RoleAnswer && p.Text != "" {
			v.remember(c.Scope().Thread, ThreadTurn{Bot: true, Text: p.Text})
		}
	case *CardClicked, *ToolRequested, *PermissionDecided, *ToolCompleted,
		*MessageUpdated, *MemoryWritten, *MemoryForgotten, *MemoryRedacted, *RoutineCreated,
		*RoutineChanged, *RoutineFired, *CommandRedacted:
		// Nothing the engine's channel cache needs.
	default:
		return fmt.Errorf("fold channel %s: unhandled kind %s", v.key, c.Kind())
	}
	return nil
}

func (v *chanView) hasPending(run string) bool {
	for _, a := range v.approvals {
		if a.Run == run && a.pending() {
			return true
		}
	}
	return false
}

// liveRun returns the thread's run that a new message should steer: one
// that is queued, working or waiting for approval. Callers hold v.mu.
func (v *chanView) liveRun(thread string) (*chanRun, *chanRun) {
	id, ok := v.threads[thread]
	if !ok {
		return nil, nil
	}
	r := v.runs[id]
	switch r.status {
	case RunQueued, RunWorking, RunWaitingApproval:
		return r, nil
	case RunBlocked, RunNeedsPermission:
		return nil, r // parked: a new message replaces it
	case RunBroken, RunCancelled, RunDone:
		return nil, nil
	}
	panic(fmt.Sprintf("core: unhandled run status %q", r.status))
}
