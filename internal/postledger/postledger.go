// Package postledger is the adapters' in-process idempotency ledger for
// outbound posts: which keys were already posted (key → message ref),
// bounded by size and age, plus a per-key lock so two concurrent posts with
// one key produce one message. What survives a restart differs per platform
// (Slack message metadata, a Discord nonce, Telegram's journal), so that
// stays in the adapters.
package postledger

import (
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Ledger maps idempotency keys to the refs of the messages posted for them.
type Ledger[Ref any] struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu      sync.Mutex
	posted  map[string]entry[Ref]
	order   []string
	keyLock map[string]*keyMutex
}

type entry[Ref any] struct {
	ref Ref
	at  time.Time
}

type keyMutex struct {
	mu   sync.Mutex
	refs int
}

// New returns an empty ledger that forgets a key after ttl and holds at
// most max keys (the oldest go first).
func New[Ref any](now func() time.Time, ttl time.Duration, max int) *Ledger[Ref] {
	return &Ledger[Ref]{
		now: now, ttl: ttl, max: max,
		posted:  make(map[string]entry[Ref]),
		keyLock: make(map[string]*keyMutex),
	}
}

// Lock serialises work on one key (two concurrent posts with the same key
// produce one message); the returned func unlocks. Lock entries are
// dropped when their last holder unlocks.
func (l *Ledger[Ref]) Lock(key string) func() {
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

// Get returns the ref posted for key, if it is known and not older than ttl.
func (l *Ledger[Ref]) Get(key string) (Ref, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.posted[key]
	if !ok || l.now().Sub(e.at) > l.ttl {
		var zero Ref
		return zero, false
	}
	return e.ref, true
}

// Put records that key was posted as ref, evicting the oldest keys beyond
// max and any older than ttl.
func (l *Ledger[Ref]) Put(key string, ref Ref) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.posted[key]; !ok {
		l.order = append(l.order, key)
	}
	l.posted[key] = entry[Ref]{ref: ref, at: l.now()}
	for len(l.order) > 0 && (len(l.posted) > l.max || l.now().Sub(l.posted[l.order[0]].at) > l.ttl) {
		delete(l.posted, l.order[0])
		l.order = l.order[1:]
	}
}

// Len reports how many keys are held, for tests and metrics.
func (l *Ledger[Ref]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.posted)
}

// PartKey is the idempotency key of part i of an n-part message posted
// under key: the first part keeps the message's own key.
func PartKey(key string, i, n int) string {
	if key == "" || n == 1 || i == 0 {
		return key
	}
	return key + "#" + strconv.Itoa(i)
}

// PostParts posts the n parts of one message under key, in order: a part
// the ledger already holds is not posted again, each part posted is
// recorded, and the first part's ref is returned. post sends part i under
// its part key. A failure after the first part returns the first ref with
// the error (the message is partly out), named "<name>: part i of n".
// Callers hold Lock(key).
func (l *Ledger[Ref]) PostParts(name, key string, n int, post func(i int, partKey string) (Ref, error)) (Ref, error) {
	var first, zero Ref
	for i := range n {
		pk := PartKey(key, i, n)
		if pk != "" {
			if ref, ok := l.Get(pk); ok {
				if i == 0 {
					first = ref
				}
				continue
			}
		}
		ref, err := post(i, pk)
		if err != nil {
			if i > 0 {
				return first, fmt.Errorf("%s: part %d of %d: %w", name, i+1, n, err)
			}
			return zero, err
		}
		if pk != "" {
			l.Put(pk, ref)
		}
		if i == 0 {
			first = ref
		}
	}
	return first, nil
}
