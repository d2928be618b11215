package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
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
func (e *Engine) DailyBudget(ctx context.Context, sc core.Scope) (spent, limit int, err error) {
	v, err := e.channel(ctx, sc.Key())
	if err != nil {
		return 0, 0, fmt.Errorf("daily budget: %w", err)
	}
	err = v.with(ctx, func() {
		limit = e.policyLocked(v).DailyTokenBudget
		spent = v.fold.TokensOn(e.now())
	})
	if limit <= 0 {
		limit = e.budgets.DailyTokens
	}
	return spent, limit, err
}

// PostRoutine is PostDigest with a retry flag.
func (e *Engine) PostRoutine(ctx context.Context, p core.DigestPost) (core.MessageRef, error) {
	if p.Key == "" || p.Cause == "" {
		return core.MessageRef{}, errors.New("post digest: key and cause are required")
	}
	sc := p.Scope
	sc.Thread = ""
	if err := sc.Validate(); err != nil {
		return core.MessageRef{}, fmt.Errorf("post digest: %w", err)
	}
	s, err := e.surface(sc.Platform)
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("post digest: %w", err)
	}
	return e.post(ctx, s, nil, core.Outbound{Key: p.Key, Scope: sc, Text: p.Text, Priority: core.PriorityHigh, Resumed: p.Retry},
		postRecord{cause: p.Cause, role: core.RoleMessage})
}
