package core

import (
	"context"
	"errors"
	"fmt"
)

// PostDigest posts a routine's digest at the top level of sc's channel as a
// bot post, through the same path as every other post: the surface gets key
// as its idempotency key, message.posted is journaled (caused by cause, the
// routine.fired command) and the post observer hears of it, so the digest
// opens a thread window and replies to it reach the bot.
func (e *Engine) PostDigest(ctx context.Context, sc Scope, key, cause, text string) (MessageRef, error) {
	if key == "" || cause == "" {
		return MessageRef{}, errors.New("post digest: key and cause are required")
	}
	sc.Thread = ""
	if err := sc.Validate(); err != nil {
		return MessageRef{}, fmt.Errorf("post digest: %w", err)
	}
	s, err := e.surface(sc.Platform)
	if err != nil {
		return MessageRef{}, fmt.Errorf("post digest: %w", err)
	}
	return e.post(ctx, s, nil, Outbound{Key: key, Scope: sc, Text: text, Priority: PriorityHigh},
		postRecord{cause: cause, role: RoleMessage})
}
