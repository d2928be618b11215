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

func (l *postLedger) get(key string) (core.MessageRef, bool) { return l.posts.Get(key) }

// put records the post and settles any doubt about it. The ref is recorded
// before the doubt is dropped, so a key is never seen as neither.
func (l *postLedger) put(key string, ref core.MessageRef) {
	l.posts.Put(key, ref)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.doubt, key)
	if len(l.doubt) > l.max {
		clear(l.doubt)
	}
}

// markDoubt records that a post for key may have happened.
func (l *postLedger) markDoubt(key string, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.doubt[key]; !ok {
		l.doubt[key] = since
	}
}

func (l *postLedger) inDoubt(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.doubt[key]
	return t, ok
}

func (l *postLedger) clearDoubt(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.doubt, key)
}
