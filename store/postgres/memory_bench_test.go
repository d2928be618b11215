package postgres_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// EnvBenchLarge, set to 1, adds the 200,000-memory case to
// BenchmarkMemoryRecall (its setup takes about two minutes on two cores:
// COPY, the lexeme trigger and the HNSW build).
const EnvBenchLarge = "MARLOWE_BENCH_LARGE"

// BenchmarkMemoryRecall: recall over 20 channels at 1,000 and (opt-in)
// 200,000 memories, 64-dimension test embeddings, the pgvector HNSW index
// built: single-query recalls and three-query turns, with the default
// dense strategy (exact scan of a channel up to DefaultExactMax vectors,
// HNSW above) and with HNSW forced. Reports p50/p95/p99 latency and
// injected tokens per turn (the budget must hold it flat across sizes).
func BenchmarkMemoryRecall(b *testing.B) {
	sizes := []int{1000}
	if os.Getenv(EnvBenchLarge) == "1" {
		sizes = append(sizes, 200_000)
	} else {
		b.Logf("set %s=1 to add the 200,000-memory case", EnvBenchLarge)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("memories=%d", n), func(b *testing.B) {
			url := testpg.New(b)
			s, auto := openMemory(b, url, journaltest.NewSigner(b))
			hnsw, err := postgres.OpenMemoryIndex(b.Context(), url, postgres.MemoryOptions{ExactMax: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(hnsw.Close)
			start := time.Now()
			ds := memorytest.NewDataset(20, n/20, memorytest.Dims, 1)
			if err := auto.BulkLoadForTest(b.Context(), ds.Entries, ds.Vectors); err != nil {
				b.Fatal(err)
			}
			b.Logf("loaded %d memories (COPY, lexemes, HNSW build, VACUUM ANALYZE) in %s", n, time.Since(start).Round(time.Millisecond))
			for _, strategy := range []struct {
				name string
				ix   *postgres.MemoryIndex
			}{{"auto", auto}, {"hnsw", hnsw}} {
				svc, err := memory.New(memory.Config{Journal: s, Boundary: core.NewBoundary(nil), Index: strategy.ix, Embedder: ds.Emb})
				if err != nil {
					b.Fatal(err)
				}
				for _, q := range []int{1, 3} {
					b.Run(fmt.Sprintf("dense=%s/queries=%d", strategy.name, q), func(b *testing.B) { memorytest.BenchRecall(b, svc, ds, q) })
				}
			}
		})
	}
}
