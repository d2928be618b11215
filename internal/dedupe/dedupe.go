// Package dedupe holds the inbound-delivery claim protocol the platform
// adapters share (Slack retries, Discord gateway replays, Telegram webhook
// redeliveries) and its in-process implementation. The adapters re-export
// these as their own Deduper and MemoryDeduper, since adapters do not
// import each other.
package dedupe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Deduper remembers which inbound deliveries were already handed to the
// engine, so a platform's redelivery reaches the engine once. Keys are ids
// only, never text.
//
// The protocol is claim → deliver → commit (or release):
//
//   - Claim returns a non-empty token when the caller now holds key and must
//     deliver it, then call Commit (success) or Release (failure, so a
//     redelivery can try again). A claim that is neither committed nor
//     released expires after lease (a crashed process).
//   - Claim returns done=true when key was delivered already: acknowledge
//     without delivering.
//   - Claim returns an empty token and done=false when another delivery of key
//     is in flight: wait and claim again, or leave the event unacknowledged.
//
// Only builtin types appear here so a store can implement it without
// importing this package (store/redis.Deduper does).
type Deduper interface {
	Claim(ctx context.Context, key string, lease time.Duration) (token string, done bool, err error)
	Commit(ctx context.Context, key, token string, ttl time.Duration) error
	Release(ctx context.Context, key, token string) error
}

// Memory is the in-process Deduper for a single replica. Expired keys are
// swept as new ones arrive, so memory is bounded by the key rate × TTL.
type Memory struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]memEntry
	order   []memExpiry // insertion order; lazily compared with entries
	head    int
}

type memEntry struct {
	token   string // "" once done
	expires time.Time
}

type memExpiry struct {
	key     string
	expires time.Time
}

// NewMemory returns an empty in-process Deduper. now may be nil (time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, entries: make(map[string]memEntry)}
}

// Claim implements Deduper.
func (d *Memory) Claim(_ context.Context, key string, lease time.Duration) (string, bool, error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepLocked(now)
	if e, ok := d.entries[key]; ok && now.Before(e.expires) {
		if e.token == "" {
			return "", true, nil
		}
		return "", false, nil
	}
	tok := newToken()
	d.setLocked(key, memEntry{token: tok, expires: now.Add(lease)})
	return tok, false, nil
}

// Commit implements Deduper. Committing with a stale token (the claim
// expired and someone else took it) still marks the key done: the message was
// delivered.
func (d *Memory) Commit(_ context.Context, key, _ string, ttl time.Duration) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setLocked(key, memEntry{expires: now.Add(ttl)})
	return nil
}

// Release implements Deduper: it drops the claim if token still holds it.
func (d *Memory) Release(_ context.Context, key, token string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[key]; ok && e.token != "" && e.token == token {
		delete(d.entries, key)
	}
	return nil
}

// Len reports how many keys are held (claims and done), for tests and metrics.
func (d *Memory) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}

func (d *Memory) setLocked(key string, e memEntry) {
	d.entries[key] = e
	d.order = append(d.order, memExpiry{key: key, expires: e.expires})
}

// sweepLocked drops expired entries from the front of the insertion queue.
// Leases are shorter than TTLs, so the queue is only roughly ordered; an entry
// is deleted only when the map still holds that exact expiry.
func (d *Memory) sweepLocked(now time.Time) {
	for d.head < len(d.order) {
		x := d.order[d.head]
		if now.Before(x.expires) {
			break
		}
		if e, ok := d.entries[x.key]; ok && e.expires.Equal(x.expires) {
			delete(d.entries, x.key)
		}
		d.order[d.head] = memExpiry{}
		d.head++
	}
	if d.head > 1024 && d.head*2 > len(d.order) {
		d.order = append([]memExpiry(nil), d.order[d.head:]...)
		d.head = 0
	}
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
