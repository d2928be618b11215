package slack

import (
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// postLedger records which idempotency keys were posted (key → message ref)
// and which posts are in doubt (sent, response lost). Bounded by size and
// age; after a restart the in-doubt check falls back to message metadata
// (see Post).
type postLedger struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu      sync.Mutex
	posted  map[string]ledgerEntry
	order   []string
	doubt   map[string]time.Time // key → when the in-doubt attempt started
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
		doubt:   make(map[string]time.Time),
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
	delete(l.doubt, key)
	if _, ok := l.posted[key]; !ok {
		l.order = append(l.order, key)
	}
	l.posted[key] = ledgerEntry{ref: ref, at: l.now()}
	for len(l.order) > 0 && (len(l.posted) > l.max || l.now().Sub(l.posted[l.order[0]].at) > l.ttl) {
		delete(l.posted, l.order[0])
		l.order = l.order[1:]
	}
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
