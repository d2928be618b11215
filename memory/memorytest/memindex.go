package memorytest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
)

// MemIndex is an in-process memory.Index: brute-force cosine, term-overlap
// lexical matching, a code-level channel filter. It passes the conformance
// suite and serves unit tests that need no database.
type MemIndex struct {
	mu      sync.Mutex
	entries map[string]*memory.Entry              // by id
	vectors map[string]map[string][]float32       // id → model → values
	links   map[core.ChannelKey][]core.ChannelKey // declared
}

var _ memory.Index = (*MemIndex)(nil)

// NewMemIndex returns an empty index.
func NewMemIndex() *MemIndex {
	return &MemIndex{
		entries: map[string]*memory.Entry{}, vectors: map[string]map[string][]float32{},
		links: map[core.ChannelKey][]core.ChannelKey{},
	}
}

func (m *MemIndex) get(ch core.ChannelKey, id string) (*memory.Entry, error) {
	e := m.entries[id]
	if e == nil || e.Channel != ch {
		return nil, memory.ErrNotFound
	}
	return e, nil
}

// Insert implements memory.Index.
func (m *MemIndex) Insert(_ context.Context, e memory.Entry) (memory.Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.entries[e.ID]; old != nil {
		if old.Channel != e.Channel {
			return memory.Entry{}, false, fmt.Errorf("memory id %s exists in another channel", e.ID)
		}
		return *old, false, nil
	}
	if e.Provenance.Origin != "" {
		for _, old := range m.entries {
			if old.Channel == e.Channel && old.Provenance.Origin == e.Provenance.Origin {
				return *old, false, nil
			}
		}
	}
	e.CreatedAt = e.CreatedAt.UTC()
	m.entries[e.ID] = &e
	return e, true, nil
}

// Get implements memory.Index.
func (m *MemIndex) Get(_ context.Context, ch core.ChannelKey, id string) (memory.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.get(ch, id)
	if err != nil {
		return memory.Entry{}, err
	}
	return *e, nil
}

// ByOrigin implements memory.Index.
func (m *MemIndex) ByOrigin(_ context.Context, ch core.ChannelKey, origin string) (memory.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if origin != "" && e.Channel == ch && e.Provenance.Origin == origin {
			return *e, nil
		}
	}
	return memory.Entry{}, memory.ErrNotFound
}

// List implements memory.Index.
func (m *MemIndex) List(_ context.Context, ch core.ChannelKey, q memory.ListQuery) ([]memory.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []memory.Entry
	for _, e := range m.entries {
		if e.Channel != ch || (!q.IncludeForgotten && !e.Live()) || (q.Before != "" && e.ID >= q.Before) {
			continue
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b memory.Entry) int { return strings.Compare(b.ID, a.ID) })
	out = out[min(max(q.Offset, 0), len(out)):]
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SetVector implements memory.Index.
func (m *MemIndex) SetVector(_ context.Context, ch core.ChannelKey, v memory.Vector) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.get(ch, v.MemoryID)
	if err != nil {
		return err
	}
	if !e.Live() {
		return nil
	}
	if m.vectors[v.MemoryID] == nil {
		m.vectors[v.MemoryID] = map[string][]float32{}
	}
	m.vectors[v.MemoryID][v.Model] = slices.Clone(v.Values)
	return nil
}

// Forget implements memory.Index.
func (m *MemIndex) Forget(_ context.Context, ch core.ChannelKey, id, reason string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.get(ch, id)
	if err != nil {
		return err
	}
	if e.Forgotten {
		return nil
	}
	e.Forgotten, e.ForgottenAt, e.ForgetReason = true, at.UTC(), reason
	delete(m.vectors, id)
	return nil
}

// Delete implements memory.Index.
func (m *MemIndex) Delete(_ context.Context, ch core.ChannelKey, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.get(ch, id)
	if err != nil {
		return err
	}
	if e.Deleted {
		return nil
	}
	e.Text, e.Provenance, e.ForgetReason = "", core.Provenance{}, ""
	e.Deleted, e.DeletedAt = true, at.UTC()
	if !e.Forgotten {
		e.Forgotten, e.ForgottenAt = true, at.UTC()
	}
	delete(m.vectors, id)
	return nil
}

// visible is ch plus its mutually linked channels.
func (m *MemIndex) visible(ch core.ChannelKey) []core.ChannelKey {
	out := []core.ChannelKey{ch}
	for _, l := range m.links[ch] {
		if slices.Contains(m.links[l], ch) {
			out = append(out, l)
		}
	}
	return out
}

// Search implements memory.Index.
func (m *MemIndex) Search(_ context.Context, q memory.SearchQuery) (memory.Candidates, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vis := m.visible(q.Channel)
	var c memory.Candidates
	type scored struct {
		h memory.Hit
		s float64
	}
	var dense, lex []scored
	stems := make([]string, len(q.Terms))
	for i, t := range q.Terms {
		stems[i] = stem(t)
	}
	for id, e := range m.entries {
		if !slices.Contains(vis, e.Channel) || !e.Live() {
			continue
		}
		h := memory.Hit{ID: id, Channel: e.Channel, Text: e.Text, CreatedAt: e.CreatedAt}
		if q.Vector != nil {
			if v, ok := m.vectors[id][q.Model]; ok && len(v) == len(q.Vector) {
				h.Similarity = Cosine(v, q.Vector)
				dense = append(dense, scored{h, h.Similarity})
			}
		}
		if len(stems) > 0 {
			n := 0
			for _, t := range memory.Terms(e.Text) {
				if slices.Contains(stems, stem(t)) {
					n++
				}
			}
			if n > 0 {
				h.Similarity = 0
				lex = append(lex, scored{h, float64(n)})
			}
		}
	}
	order := func(a, b scored) int { return cmp.Or(cmp.Compare(b.s, a.s), strings.Compare(a.h.ID, b.h.ID)) }
	slices.SortFunc(dense, order)
	slices.SortFunc(lex, order)
	for i := 0; i < len(dense) && i < q.K; i++ {
		c.Dense = append(c.Dense, dense[i].h)
	}
	for i := 0; i < len(lex) && i < q.K; i++ {
		c.Lexical = append(c.Lexical, lex[i].h)
	}
	return c, nil
}

// SetLinks implements memory.Index.
func (m *MemIndex) SetLinks(_ context.Context, ch core.ChannelKey, linked []core.ChannelKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.links[ch] = sortedLinks(linked)
	return nil
}

func sortedLinks(l []core.ChannelKey) []core.ChannelKey {
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}

// Links implements memory.Index.
func (m *MemIndex) Links(_ context.Context, ch core.ChannelKey) ([]core.ChannelKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.visible(ch)[1:], nil
}

// Snapshot implements memory.Index.
func (m *MemIndex) Snapshot(_ context.Context, ch core.ChannelKey) (memory.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s memory.Snapshot
	for id, e := range m.entries {
		if e.Channel != ch {
			continue
		}
		s.Entries = append(s.Entries, *e)
		for model, v := range m.vectors[id] {
			s.Vectors = append(s.Vectors, memory.Vector{MemoryID: id, Model: model, Values: slices.Clone(v)})
		}
	}
	slices.SortFunc(s.Entries, func(a, b memory.Entry) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.Vectors, func(a, b memory.Vector) int {
		return cmp.Or(strings.Compare(a.MemoryID, b.MemoryID), strings.Compare(a.Model, b.Model))
	})
	if l := m.links[ch]; len(l) > 0 {
		s.Links = slices.Clone(l)
	}
	return s, nil
}

// Replace implements memory.Index.
func (m *MemIndex) Replace(_ context.Context, ch core.ChannelKey, s memory.Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range s.Entries {
		if e.Channel != ch {
			return fmt.Errorf("replace %s: entry %s belongs to %s", ch, e.ID, e.Channel)
		}
		if old := m.entries[e.ID]; old != nil && old.Channel != ch {
			return fmt.Errorf("replace %s: memory id %s exists in another channel", ch, e.ID)
		}
	}
	for id, e := range m.entries {
		if e.Channel == ch {
			delete(m.entries, id)
			delete(m.vectors, id)
		}
	}
	for _, e := range s.Entries {
		e.CreatedAt, e.ForgottenAt, e.DeletedAt = utc(e.CreatedAt), utc(e.ForgottenAt), utc(e.DeletedAt)
		m.entries[e.ID] = &e
	}
	for _, v := range s.Vectors {
		if m.entries[v.MemoryID] == nil {
			return fmt.Errorf("replace %s: vector of unknown memory %s", ch, v.MemoryID)
		}
		if m.vectors[v.MemoryID] == nil {
			m.vectors[v.MemoryID] = map[string][]float32{}
		}
		m.vectors[v.MemoryID][v.Model] = slices.Clone(v.Values)
	}
	m.links[ch] = sortedLinks(s.Links)
	if len(m.links[ch]) == 0 {
		delete(m.links, ch)
	}
	return nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
