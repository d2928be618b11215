package discord

import (
	"sync"
	"time"
)

// chanCache remembers channels learnt from GUILD_CREATE, CHANNEL_* and
// THREAD_* events and from GET channels/{id}. Bounded: reset when full, it
// refills from the next events and lookups.
type chanCache struct {
	mu  sync.RWMutex
	max int
	m   map[string]chanInfo
}

func newChanCache(max int) *chanCache {
	return &chanCache{max: max, m: make(map[string]chanInfo)}
}

func (c *chanCache) get(id string) (chanInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *chanCache) put(id string, v chanInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok && len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[id] = v
}

func (c *chanCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// ttlCache is a small bounded map whose entries expire (guild roles and
// owners, members' roles, thread-name hints).
type ttlCache[V any] struct {
	mu  sync.Mutex
	now func() time.Time
	ttl time.Duration
	max int
	m   map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v  V
	at time.Time
}

func newTTLCache[V any](now func() time.Time, ttl time.Duration, max int) *ttlCache[V] {
	return &ttlCache[V]{now: now, ttl: ttl, max: max, m: make(map[string]ttlEntry[V])}
}

func (c *ttlCache[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || c.now().Sub(e.at) > c.ttl {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		now := c.now()
		for key, e := range c.m {
			if now.Sub(e.at) > c.ttl {
				delete(c.m, key)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[k] = ttlEntry[V]{v: v, at: c.now()}
}

func (c *ttlCache[V]) drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// lookalikes remembers which users were already reported as sharing the
// bot's name, so each is warned about once.
type lookalikes struct {
	mu   sync.Mutex
	seen map[string]bool
}

func newLookalikes() *lookalikes { return &lookalikes{seen: map[string]bool{}} }

// first reports whether id is new (and records it).
func (l *lookalikes) first(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[id] || len(l.seen) > 10000 {
		return false
	}
	l.seen[id] = true
	return true
}
