package slack

import (
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/postledger"
)

// postLedger records which idempotency keys were posted (key → message ref)
// and which posts are in doubt (sent, response lost). Bounded by size and
// age; after a restart the in-doubt check falls back to message metadata
// (see Post).
type postLedger struct {
	posts *postledger.Ledger[core.MessageRef]
	max   int

	mu    sync.Mutex
	doubt map[string]time.Time // key → when the in-doubt attempt started
}

func newPostLedger(now func() time.Time, ttl time.Duration, max int) *postLedger {
	return &postLedger{
		posts: postledger.New[core.MessageRef](now, ttl, max),
		max:   max,
		doubt: make(map[string]time.Time),
	}
}

// lock serialises work on one key (two concurrent Posts with the same key
// produce one message); the returned func unlocks.
func (l *postLedger) lock(key string) func() { return l.posts.Lock(key) }

// markDoubt records that a post for key may have happened.
func (l *postLedger) markDoubt(key string, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.doubt[key]; !ok {
		if len(l.doubt) >= l.max {
			clear(l.doubt) // bounded; only a flood of lost responses gets here
		}
		l.doubt[key] = since
	}
}

func (l *postLedger) inDoubt(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.doubt[key]
	return t, ok
}

// clearDoubt settles a post that landed (sent, or found by its key).
func (l *postLedger) clearDoubt(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.doubt, key)
}
