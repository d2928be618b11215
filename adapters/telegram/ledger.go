package telegram

import (
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// postLedger records which idempotency keys were posted (key → message
// ref), bounded by size and age, and serialises work on one key. The Bot
// API has no way to find a message again by a key (no metadata, no history
// read), so across restarts the engine's journal (message.posted) is what
// keeps a post from repeating; see Post.
type postLedger struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu      sync.Mutex
	posted  map[string]ledgerEntry
	order   []string
	keyLock map[string]*keyMutex
}

type ledgerEntry struct {
	ref core.MessageRef
	at  time.Time
}

type keyMutex struct {
	mu   sync.Mutex
	refs int
}

func newPostLedger(now func() time.Time, ttl time.Duration, max int) *postLedger {
	return &postLedger{now: now, ttl: ttl, max: max, posted: map[string]ledgerEntry{}, keyLock: map[string]*keyMutex{}}
}

// lock serialises work on one key; the returned func unlocks.
func (l *postLedger) lock(key string) func() {
	l.mu.Lock()
	km := l.keyLock[key]
	if km == nil {
		km = &keyMutex{}
		l.keyLock[key] = km
	}
	km.refs++
	l.mu.Unlock()
	km.mu.Lock()
	return func() {
		km.mu.Unlock()
		l.mu.Lock()
		km.refs--
		if km.refs == 0 {
			delete(l.keyLock, key)
		}
		l.mu.Unlock()
	}
}

func (l *postLedger) get(key string) (core.MessageRef, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.posted[key]
	if !ok || l.now().Sub(e.at) > l.ttl {
		return core.MessageRef{}, false
	}
	return e.ref, true
}

func (l *postLedger) put(key string, ref core.MessageRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.posted[key]; !ok {
		l.order = append(l.order, key)
	}
	l.posted[key] = ledgerEntry{ref: ref, at: l.now()}
	for len(l.order) > 0 && (len(l.posted) > l.max || l.now().Sub(l.posted[l.order[0]].at) > l.ttl) {
		delete(l.posted, l.order[0])
		l.order = l.order[1:]
	}
}
