package discord

import (
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/postledger"
)

// postLedger records which idempotency keys were posted (key → message
// ref) and the ids of the bot's own messages. Bounded by size and age;
// after a restart the message nonce (enforce_nonce) stops a second post.
type postLedger struct {
	posts *postledger.Ledger[core.MessageRef]
	max   int

	mu   sync.Mutex
	mine map[string]struct{}
}

func newPostLedger(now func() time.Time, ttl time.Duration, max int) *postLedger {
	return &postLedger{
		posts: postledger.New[core.MessageRef](now, ttl, max),
		max:   max,
		mine:  make(map[string]struct{}),
	}
}

// lock serialises work on one key (two concurrent Posts with the same key
// produce one message); the returned func unlocks.
func (l *postLedger) lock(key string) func() { return l.posts.Lock(key) }

// ours records the id of a message the bot posted, so a reply to it is
// known as a reply to the bot when Discord omits referenced_message.
func (l *postLedger) ours(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mine) >= l.max {
		clear(l.mine)
	}
	l.mine[id] = struct{}{}
}

// isOurs reports whether id is one of the bot's recent messages.
func (l *postLedger) isOurs(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.mine[id]
	return ok
}
