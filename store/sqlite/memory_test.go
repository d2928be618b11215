package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// TestMemoryConformance runs the memory suite on one database file shared
// by the subtests. There is no Bypass: SQLite has no row-level security,
// the ringfence is the code-level channel condition the suite exercises.
func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	signer := journaltest.NewSigner(t)
	s := open(t, filepath.Join(t.TempDir(), "memory.db"), signer)
	ix := sqlite.NewMemoryIndex(s)
	memorytest.Run(t, func(t *testing.T) memorytest.Harness {
		return memorytest.Harness{Journal: s, Index: ix, Verifier: signer.Verifier()}
	})
}

// BenchmarkMemoryRecall: recall over 20 channels of 50 and of 500
// memories (brute-force cosine, FTS5), single queries and three-query
// turns: latency and injected tokens per turn.
func BenchmarkMemoryRecall(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("memories=%d", n), func(b *testing.B) {
			s := open(b, filepath.Join(b.TempDir(), "memory.db"), journaltest.NewSigner(b))
			ix := sqlite.NewMemoryIndex(s)
			ds := memorytest.NewDataset(20, n/20, memorytest.Dims, 1)
			start := time.Now()
			for _, ch := range ds.Channels {
				var snap memory.Snapshot
				for _, e := range ds.Entries {
					if e.Channel == ch {
						snap.Entries = append(snap.Entries, e)
					}
				}
				ids := map[string]bool{}
				for _, e := range snap.Entries {
					ids[e.ID] = true
				}
				for _, v := range ds.Vectors {
					if ids[v.MemoryID] {
						snap.Vectors = append(snap.Vectors, v)
					}
				}
				if err := ix.Replace(b.Context(), ch, snap); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("loaded %d memories in %s", n, time.Since(start).Round(time.Millisecond))
			svc, err := memory.New(memory.Config{Journal: s, Boundary: core.NewBoundary(nil), Index: ix, Embedder: ds.Emb})
			if err != nil {
				b.Fatal(err)
			}
			for _, q := range []int{1, 3} {
				b.Run(fmt.Sprintf("queries=%d", q), func(b *testing.B) { memorytest.BenchRecall(b, svc, ds, q) })
			}
		})
	}
}
