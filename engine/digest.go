package engine

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

// PostDigest posts a routine's digest at the top level of sc's channel as a
// bot post, through the same path as every other post: the surface gets key
// as its idempotency key, message.posted is journaled (caused by cause, the
// routine.fired command) and the post observer hears of it, so the digest
// opens a thread window and replies to it reach the bot.
func (e *Engine) PostDigest(ctx context.Context, sc core.Scope, key, cause, text string) (core.MessageRef, error) {
	return e.PostRoutine(ctx, core.DigestPost{Scope: sc, Key: key, Cause: cause, Text: text})
}
