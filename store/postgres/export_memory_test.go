package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
)

// BypassForTest deliberately skips the code-level channel filter: a raw
// query with no channel condition at all, inside a transaction bound to ch
// (MemoryRole, marlowe.channel). It returns the channel of every memory,
// vector and link-owning row it can see; only row-level security limits it.
func (ix *MemoryIndex) BypassForTest(ctx context.Context, ch core.ChannelKey) ([]core.ChannelKey, error) {
	var out []core.ChannelKey
	err := ix.inChannel(ctx, ch, pgx.ReadOnly, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT channel FROM memories UNION ALL SELECT channel FROM memory_vectors`)
		if err != nil {
			return err
		}
		out, err = collectKeys(rows)
		return err
	})
	return out, err
}

// RawQueryForTest runs sql as the connection's own role, in a transaction
// whose first statement is setup (e.g. a role switch without a channel).
func (ix *MemoryIndex) RawQueryForTest(ctx context.Context, setup, sql string) ([]string, error) {
	var out []string
	err := pgx.BeginFunc(ctx, ix.pool, func(tx pgx.Tx) error {
		if setup != "" {
			if _, err := tx.Exec(ctx, setup); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, sql)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out, err
}

// BulkLoadForTest writes entries and their vectors with COPY, as the
// connection's role (the tests' superuser: COPY is refused on tables under
// row-level security for anyone it applies to), then builds the HNSW index
// of each (model, dims) and analyses the tables. Benchmarks only.
func (ix *MemoryIndex) BulkLoadForTest(ctx context.Context, entries []memory.Entry, vecs []memory.Vector) error {
	conn, err := ix.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET maintenance_work_mem = '1GB'`); err != nil {
		return err
	}
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"memories"},
		[]string{"id", "channel", "seq", "text", "origin", "actor", "trust", "derivation", "created_at"},
		pgx.CopyFromSlice(len(entries), func(i int) ([]any, error) {
			e := entries[i]
			return []any{e.ID, string(e.Channel), int64(e.Seq), e.Text, e.Provenance.Origin,
				[]byte(`{"type":"system","id":"bench","platform":"test"}`), "trusted", "bench", e.CreatedAt}, nil
		}))
	if err != nil {
		return fmt.Errorf("copy memories: %w", err)
	}
	chOf := make(map[string]string, len(entries))
	for _, e := range entries {
		chOf[e.ID] = string(e.Channel)
	}
	models := map[string]int{}
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"memory_vectors"},
		[]string{"memory_id", "channel", "model", "dims", "embedding"},
		pgx.CopyFromSlice(len(vecs), func(i int) ([]any, error) {
			v := vecs[i]
			models[v.Model] = len(v.Values)
			return []any{v.MemoryID, chOf[v.MemoryID], v.Model, int32(len(v.Values)), pgvector.NewVector(v.Values)}, nil
		}))
	if err != nil {
		return fmt.Errorf("copy vectors: %w", err)
	}
	// The terms trigger fired per copied row; nothing else to do for them.
	for m, d := range models {
		if _, err := conn.Exec(ctx, hnswDDL(m, d)); err != nil {
			return fmt.Errorf("build hnsw: %w", err)
		}
	}
	// VACUUM sets the visibility map autovacuum would have set by now, so
	// index-only scans of memory_terms are planned as in steady state.
	_, err = conn.Exec(ctx, `VACUUM ANALYZE memories, memory_vectors, memory_terms`)
	return err
}

// ExplainForTest returns the plans of one search's dense (HNSW, exact) and
// lexical queries in q.Channel, run as a bound transaction would.
func (ix *MemoryIndex) ExplainForTest(ctx context.Context, q memory.SearchQuery) (string, error) {
	var b strings.Builder
	err := ix.inChannel(ctx, q.Channel, pgx.ReadOnly, func(tx pgx.Tx) error {
		if ix.iterative {
			if _, err := tx.Exec(ctx, `SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true)`, fmt.Sprint(max(ix.efSearch, q.K))); err != nil {
				return err
			}
		}
		for _, part := range []struct {
			sql  string
			args []any
		}{
			{denseSQL(q.Model, len(q.Vector)), []any{pgvector.NewVector(q.Vector), string(q.Channel), q.K}},
			{exactSQL(q.Model, len(q.Vector)), []any{pgvector.NewVector(q.Vector), string(q.Channel), q.K}},
			{lexicalSQL, []any{strings.Join(q.Terms, " "), string(q.Channel), q.K}},
		} {
			rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+part.sql, part.args...)
			if err != nil {
				return err
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			b.WriteString(strings.Join(lines, "\n") + "\n\n")
		}
		return nil
	})
	return b.String(), err
}
