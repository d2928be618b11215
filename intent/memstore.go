package intent

import (
	"context"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// sweepEvery is how often, at most, a write to the memory store prunes
// expired windows. Reads treat expired entries as absent in between.
const sweepEvery = time.Minute

type threadKey struct {
	ch     core.ChannelKey
	thread string
}

// MemoryStore is the in-process WindowStore of the embedded, single-replica
// mode. It is safe for concurrent use. Expired windows read as absent and
// are pruned by a sweep that runs on writes at most once a minute, so memory
// is bounded by the windows opened in the last window length plus a minute.
type MemoryStore struct {
	now func() time.Time

	mu        sync.RWMutex
	threads   map[threadKey]time.Time
	tops      map[core.ChannelKey]Toplevel
	lastSweep time.Time
}

var _ WindowStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store reading time from clock (time.Now
// when nil).
func NewMemoryStore(clock func() time.Time) *MemoryStore {
	if clock == nil {
		clock = time.Now
	}
	return &MemoryStore{now: clock, threads: map[threadKey]time.Time{}, tops: map[core.ChannelKey]Toplevel{}}
}

// Windows implements WindowStore.
func (m *MemoryStore) Windows(ctx context.Context, ch core.ChannelKey, thread string) (Windows, error) {
	if err := ctx.Err(); err != nil {
		return Windows{}, err
	}
	now := m.now()
	var w Windows
	m.mu.RLock()
	if thread != "" {
		if until, ok := m.threads[threadKey{ch, thread}]; ok && now.Before(until) {
			w.ThreadUntil = until
		}
	}
	if top, ok := m.tops[ch]; ok && now.Before(top.Until) {
		w.Toplevel = top
	}
	m.mu.RUnlock()
	return w, nil
}

// ExtendThread implements WindowStore.
func (m *MemoryStore) ExtendThread(ctx context.Context, ch core.ChannelKey, thread string, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	if !now.Before(until) {
		return nil
	}
	k := threadKey{ch, thread}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.threads[k]; !ok || until.After(cur) {
		m.threads[k] = until
	}
	m.sweepLocked(now)
	return nil
}

// SetToplevel implements WindowStore.
func (m *MemoryStore) SetToplevel(ctx context.Context, ch core.ChannelKey, w Toplevel) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.tops[ch]
	if ok && now.Before(cur.Until) && w.At.Before(cur.At) {
		return nil // an older answer never displaces a newer open window
	}
	if now.Before(w.Until) {
		m.tops[ch] = w
	} else {
		delete(m.tops, ch) // the most recent answer's window is over
	}
	m.sweepLocked(now)
	return nil
}

// Len returns the number of stored windows, expired ones not yet pruned
// included (for tests and metrics).
func (m *MemoryStore) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.threads) + len(m.tops)
}

// Prune drops every expired window now.
func (m *MemoryStore) Prune() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastSweep = time.Time{}
	m.sweepLocked(now)
}

func (m *MemoryStore) sweepLocked(now time.Time) {
	if !m.lastSweep.IsZero() && !now.Before(m.lastSweep) && now.Sub(m.lastSweep) < sweepEvery {
		return
	}
	m.lastSweep = now
	for k, until := range m.threads {
		if !now.Before(until) {
			delete(m.threads, k)
		}
	}
	for ch, top := range m.tops {
		if !now.Before(top.Until) {
			delete(m.tops, ch)
		}
	}
}
