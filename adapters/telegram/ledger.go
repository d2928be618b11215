package telegram

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/postledger"
)

// postLedger records which idempotency keys were posted (key → message
// ref), bounded by size and age, and serialises work on one key. The Bot
// API has no way to find a message again by a key (no metadata, no history
// read), so across restarts the engine's journal (message.posted) is what
// keeps a post from repeating; see Post.
type postLedger struct {
	posts *postledger.Ledger[core.MessageRef]
}

func newPostLedger(now func() time.Time, ttl time.Duration, max int) *postLedger {
	return &postLedger{posts: postledger.New[core.MessageRef](now, ttl, max)}
}

// lock serialises work on one key; the returned func unlocks.
func (l *postLedger) lock(key string) func() { return l.posts.Lock(key) }
