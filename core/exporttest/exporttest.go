// Package exporttest holds the core.ExportStore contract as a suite every
// store runs, and an in-memory store for tests.
package exporttest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Mem is an in-memory core.ExportStore.
type Mem struct {
	mu    sync.Mutex
	files map[string]core.ExportFile
}

var _ core.ExportStore = (*Mem)(nil)

// PutExport implements core.ExportStore.
func (m *Mem) PutExport(_ context.Context, f core.ExportFile) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]core.ExportFile{}
	}
	f.Data = slices.Clone(f.Data)
	m.files[f.ID] = f
	return nil
}

// GetExport implements core.ExportStore.
func (m *Mem) GetExport(_ context.Context, id string) (core.ExportFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[id]
	if !ok {
		return core.ExportFile{}, core.ErrExportGone
	}
	f.Data = slices.Clone(f.Data)
	return f, nil
}

// DeleteExports implements core.ExportStore.
func (m *Mem) DeleteExports(_ context.Context, platform, user string) (int, error) {
	return m.deleteIf(func(f core.ExportFile) bool { return f.Platform == platform && f.User == user }), nil
}

// DeleteExpiredExports implements core.ExportStore.
func (m *Mem) DeleteExpiredExports(_ context.Context, now time.Time) (int, error) {
	return m.deleteIf(func(f core.ExportFile) bool { return !now.Before(f.Expires) }), nil
}

func (m *Mem) deleteIf(match func(core.ExportFile) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, f := range m.files {
		if match(f) {
			delete(m.files, id)
			n++
		}
	}
	return n
}

// Len counts the archives held.
func (m *Mem) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.files)
}

// Suite checks s against the core.ExportStore contract: an archive reads
// back byte for byte until it is deleted, by person or by expiry, and only
// the archives named go.
func Suite(t *testing.T, s core.ExportStore) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	files := []core.ExportFile{
		{ID: "x1", Platform: "slack", User: "UALICE", Data: []byte(`{"a":1}`), Expires: at.Add(15 * time.Minute)},
		{ID: "x2", Platform: "slack", User: "UALICE", Data: []byte(`{"a":2}`), Expires: at.Add(time.Hour)},
		{ID: "x3", Platform: "slack", User: "UBOB", Data: []byte(`{"b":1}`), Expires: at.Add(15 * time.Minute)},
		{ID: "x4", Platform: "discord", User: "UALICE", Data: []byte(`{"d":1}`), Expires: at.Add(time.Hour)},
	}
	for _, f := range files {
		if err := s.PutExport(ctx, f); err != nil {
			t.Fatalf("put %s: %v", f.ID, err)
		}
	}
	for _, f := range files {
		got, err := s.GetExport(ctx, f.ID)
		if err != nil || string(got.Data) != string(f.Data) || got.User != f.User || got.Platform != f.Platform || !got.Expires.Equal(f.Expires) {
			t.Fatalf("get %s: %+v, %v; want %+v", f.ID, got, err, f)
		}
	}
	if _, err := s.GetExport(ctx, "nope"); !errors.Is(err, core.ErrExportGone) {
		t.Fatalf("get of an unknown id: %v, want ErrExportGone", err)
	}
	if n, err := s.DeleteExpiredExports(ctx, at.Add(15*time.Minute)); err != nil || n != 2 {
		t.Fatalf("delete expired: %d, %v; want x1 and x3", n, err)
	}
	if n, err := s.DeleteExports(ctx, "slack", "UALICE"); err != nil || n != 1 {
		t.Fatalf("delete Alice's on slack: %d, %v; want x2", n, err)
	}
	for id, kept := range map[string]bool{"x1": false, "x2": false, "x3": false, "x4": true} {
		_, err := s.GetExport(ctx, id)
		if kept && err != nil || !kept && !errors.Is(err, core.ErrExportGone) {
			t.Errorf("%s after the deletes: %v (kept: %v)", id, err, kept)
		}
	}
}
