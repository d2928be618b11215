package discord

import (
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// postLedger records which idempotency keys were posted (key → message
// ref) and the ids of the bot's own messages. Bounded by size and age;
// after a restart the message nonce (enforce_nonce) stops a second post.
type postLedger struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu      sync.Mutex
	posted  map[string]ledgerEntry
	order   []string
	mine    map[string]struct{}
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
	return &postLedger{
		now: now, ttl: ttl, max: max,
		posted:  make(map[string]ledgerEntry),
		mine:    make(map[string]struct{}),
		keyLock: make(map[string]*keyMutex),
	}
}

// lock serialises work on one key (two concurrent Posts with the same key
// produce one message); the returned func unlocks.
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
