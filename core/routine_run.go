package core

import (
	"context"
	"errors"
	"fmt"
)

// What the scheduler asks of the engine beyond PostDigest and
// StartUnattended: whether a model answers (else a firing posts the
// deterministic digest), what is left of the channel's daily budget before
// a firing (skip rather than overdraw), and a card in the routine owner's DM
// inbox for what nobody would otherwise see (a skipped slot, a post that
// never arrived, drift).

// HasModel reports whether a model answers runs (false: offline).
func (e *Engine) HasModel() bool { return e.cfg.Model != nil }

// DailyBudget returns the tokens sc's channel has spent today (UTC) and its
// daily budget (0 = unlimited).
func (e *Engine) DailyBudget(ctx context.Context, sc Scope) (spent, limit int, err error) {
	v, err := e.channel(ctx, sc.Key())
	if err != nil {
		return 0, 0, fmt.Errorf("daily budget: %w", err)
	}
	err = v.with(ctx, func() {
		limit = e.policyLocked(v).DailyTokenBudget
		spent = v.dayTokens[dayKey(e.now())]
	})
	if limit <= 0 {
		limit = e.budgets.DailyTokens
	}
	return spent, limit, err
}

// DigestPost is a routine's top-level post.
type DigestPost struct {
	Scope Scope  // the channel (Thread is ignored: digests go to top level)
	Key   string // idempotency key, the same on every retry
	Cause string // the routine.fired command
	Text  string
	// Retry says an earlier attempt (maybe by a replica that died) may have
	// posted it: the surface checks the platform for Key before posting.
	Retry bool
}

// PostRoutine is PostDigest with a retry flag.
func (e *Engine) PostRoutine(ctx context.Context, p DigestPost) (MessageRef, error) {
	if p.Key == "" || p.Cause == "" {
		return MessageRef{}, errors.New("post digest: key and cause are required")
	}
	sc := p.Scope
	sc.Thread = ""
	if err := sc.Validate(); err != nil {
		return MessageRef{}, fmt.Errorf("post digest: %w", err)
	}
	s, err := e.surface(sc.Platform)
	if err != nil {
		return MessageRef{}, fmt.Errorf("post digest: %w", err)
	}
	return e.post(ctx, s, nil, Outbound{Key: p.Key, Scope: sc, Text: p.Text, Priority: PriorityHigh, Resumed: p.Retry},
		postRecord{cause: p.Cause, role: RoleMessage})
}

// OwnerNotice is a card for a routine's owner, in their DM inbox.
type OwnerNotice struct {
	Where Scope  // the routine's channel
	Owner string // platform user id
	Key   string // idempotency key: one card per key, across retries and replicas
	Cause string // the command it is about (routine.fired)
	Title string
	Body  string
	// Fields are extra lines (label: value).
	Fields []CardField
}
