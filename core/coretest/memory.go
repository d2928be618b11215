package coretest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Memory is an in-memory, per-channel memory with word-overlap recall.
type Memory struct {
	mu    sync.Mutex
	notes map[core.ChannelKey][]*note
	next  int
}

type note struct {
	id        string
	text      string
	prov      core.Provenance
	at        time.Time
	forgotten bool
	deleted   bool
	deletedBy core.Actor
}

// NewMemory returns an empty memory.
func NewMemory() *Memory { return &Memory{notes: map[core.ChannelKey][]*note{}} }

// For returns the handle bound to ch (what engine.Config.Memory wants).
func (m *Memory) For(ch core.ChannelKey) core.ChannelMemory { return &channelMemory{m: m, ch: ch} }

// Notes returns the live notes of ch.
func (m *Memory) Notes(ch core.ChannelKey) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, n := range m.notes[ch] {
		if !n.forgotten {
			out = append(out, n.text)
		}
	}
	return out
}

// Provenances returns the provenance of every note of ch, in write order.
func (m *Memory) Provenances(ch core.ChannelKey) []core.Provenance {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []core.Provenance
	for _, n := range m.notes[ch] {
		out = append(out, n.prov)
	}
	return out
}

type channelMemory struct {
	m  *Memory
	ch core.ChannelKey
}

func (c *channelMemory) Remember(ctx context.Context, text string, prov core.Provenance) (string, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	// Idempotent on origin: a re-executed call after a crash stores once.
	for _, n := range c.m.notes[c.ch] {
		if prov.Origin != "" && n.prov.Origin == prov.Origin {
			return n.id, nil
		}
	}
	c.m.next++
	id := fmt.Sprintf("m%d", c.m.next)
	c.m.notes[c.ch] = append(c.m.notes[c.ch], &note{id: id, text: text, prov: prov, at: time.Date(2026, 3, 2, 9, 0, c.m.next, 0, time.UTC)})
	return id, nil
}

func (c *channelMemory) Recall(ctx context.Context, query string, limit int) ([]core.Recalled, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	words := strings.Fields(strings.ToLower(query))
	var out []core.Recalled
	for _, n := range c.m.notes[c.ch] {
		if n.forgotten {
			continue
		}
		hits := 0
		for _, w := range words {
			if strings.Contains(strings.ToLower(n.text), w) {
				hits++
			}
		}
		if hits > 0 || len(words) == 0 {
			out = append(out, core.Recalled{ID: n.id, Text: n.text, Score: float64(hits)})
		}
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

func (c *channelMemory) Forget(ctx context.Context, id, reason string) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for _, n := range c.m.notes[c.ch] {
		if n.id == id && !n.forgotten {
			n.forgotten = true
			return nil
		}
	}
	return fmt.Errorf("no memory %q in this channel", id)
}

// Deletions returns who deleted each deleted note of ch, by id.
func (m *Memory) Deletions(ch core.ChannelKey) map[string]core.Actor {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]core.Actor{}
	for _, n := range m.notes[ch] {
		if n.deleted {
			out[n.id] = n.deletedBy
		}
	}
	return out
}

var _ core.MemoryLister = (*channelMemory)(nil)

// ListMemories lists the live notes, newest first.
func (c *channelMemory) ListMemories(ctx context.Context, offset, limit int) ([]core.MemoryInfo, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	var out []core.MemoryInfo
	ns := c.m.notes[c.ch]
	for i := len(ns) - 1; i >= 0; i-- {
		if n := ns[i]; !n.forgotten {
			out = append(out, info(n))
		}
	}
	out = out[min(max(offset, 0), len(out)):]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DescribeMemory returns one note of this channel in any state.
func (c *channelMemory) DescribeMemory(ctx context.Context, id string) (core.MemoryInfo, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for _, n := range c.m.notes[c.ch] {
		if n.id == id {
			return info(n), nil
		}
	}
	return core.MemoryInfo{}, fmt.Errorf("memory %q: %w", id, core.ErrNotFound)
}

// Delete destroys a note (its text and provenance), recording who did it.
func (c *channelMemory) Delete(ctx context.Context, by core.Actor, id, reason string) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for _, n := range c.m.notes[c.ch] {
		if n.id == id {
			if !n.deleted {
				n.deleted, n.forgotten, n.deletedBy = true, true, by
				n.text, n.prov = "", core.Provenance{}
			}
			return nil
		}
	}
	return fmt.Errorf("memory %q: %w", id, core.ErrNotFound)
}

func info(n *note) core.MemoryInfo {
	return core.MemoryInfo{ID: n.id, Text: n.text, At: n.at, By: n.prov.Actor, Forgotten: n.forgotten, Deleted: n.deleted}
}
