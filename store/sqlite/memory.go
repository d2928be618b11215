package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
)

// MemoryIndex is the SQLite memory.Index: FTS5 (porter stemming) for the
// lexical cue and a brute-force cosine scan of the channel's float32 blobs
// for the dense cue, which is fast at the sizes an embedded store holds
// (10,000 vectors of 64 dimensions score in a few milliseconds).
//
// SQLite has no row-level security: the ringfence is in code. Every query
// here names its channel (or, for recall, the channel and the channels
// mutually linked with it), and the memory service reaches the index only
// through channel-bound handles. The Postgres index adds a database-level
// fence below the same code-level one.
type MemoryIndex struct {
	w, r *sql.DB
}

var _ memory.Index = (*MemoryIndex)(nil)

// NewMemoryIndex returns the memory index in s's database file (migration
// 00002_memory creates its tables when s opens). Writes share the
// journal's single write connection, so they queue with appends instead of
// contending for the file lock.
func NewMemoryIndex(s *Store) *MemoryIndex { return &MemoryIndex{w: s.w, r: s.r} }

const entryColumns = `n, id, channel, seq, text, origin, actor, trust, derivation, created_at,
	forgotten, forgotten_at, forget_reason, deleted, deleted_at`

// zeroActor is the stored actor of a tombstone: core.Actor{} as JSON.
const zeroActor = `{"type":"","id":"","platform":""}`

type rowScanner interface{ Scan(dest ...any) error }

func scanEntry(row rowScanner) (memory.Entry, int64, error) {
	var (
		e                     memory.Entry
		n, seq, created       int64
		ch, actor             string
		forgotten, deleted    bool
		forgottenAt, deleteAt sql.NullInt64
	)
	err := row.Scan(&n, &e.ID, &ch, &seq, &e.Text, &e.Provenance.Origin, &actor, &e.Provenance.Trust, &e.Provenance.Derivation,
		&created, &forgotten, &forgottenAt, &e.ForgetReason, &deleted, &deleteAt)
	if err != nil {
		return e, 0, err
	}
	if err := json.Unmarshal([]byte(actor), &e.Provenance.Actor); err != nil {
		return e, 0, fmt.Errorf("memory %s: actor: %w", e.ID, err)
	}
	e.Channel, e.Seq, e.CreatedAt = core.ChannelKey(ch), uint64(seq), time.UnixMicro(created).UTC()
	e.Forgotten, e.Deleted = forgotten, deleted
	if forgottenAt.Valid {
		e.ForgottenAt = time.UnixMicro(forgottenAt.Int64).UTC()
	}
	if deleteAt.Valid {
		e.DeletedAt = time.UnixMicro(deleteAt.Int64).UTC()
	}
	return e, n, nil
}

func micros(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: !t.IsZero()}
}

type memQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func getEntry(ctx context.Context, q memQuerier, ch core.ChannelKey, id string) (memory.Entry, int64, error) {
	e, n, err := scanEntry(q.QueryRowContext(ctx, `SELECT `+entryColumns+` FROM memories WHERE id = ? AND channel = ?`, id, string(ch)))
	if errors.Is(err, sql.ErrNoRows) {
		return e, 0, memory.ErrNotFound
	}
	return e, n, err
}

// write runs fn in a write transaction (BEGIN IMMEDIATE on the single
// write connection).
func (ix *MemoryIndex) write(ctx context.Context, fn func(*sql.Tx) error) error {
	return writeTx(ctx, ix.w, fn)
}

// read runs fn in a read transaction: one WAL snapshot for all its queries.
func (ix *MemoryIndex) read(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := ix.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// Insert implements memory.Index.
func (ix *MemoryIndex) Insert(ctx context.Context, e memory.Entry) (memory.Entry, bool, error) {
	actor, err := json.Marshal(e.Provenance.Actor)
	if err != nil {
		return e, false, err
	}
	var stored memory.Entry
	inserted := false
	err = ix.write(ctx, func(tx *sql.Tx) error {
		var n int64
		err := tx.QueryRowContext(ctx, `INSERT INTO memories (id, channel, seq, text, origin, actor, trust, derivation, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING n`,
			e.ID, string(e.Channel), int64(e.Seq), e.Text, e.Provenance.Origin, string(actor), e.Provenance.Trust,
			e.Provenance.Derivation, e.CreatedAt.UnixMicro()).Scan(&n)
		switch {
		case err == nil:
			inserted = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO memory_fts (rowid, text) VALUES (?, ?)`, n, e.Text); err != nil {
				return fmt.Errorf("index text: %w", err)
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		stored, _, err = scanEntry(tx.QueryRowContext(ctx, `SELECT `+entryColumns+` FROM memories
			WHERE channel = ? AND (id = ? OR (? <> '' AND origin = ?)) ORDER BY id = ? DESC LIMIT 1`,
			string(e.Channel), e.ID, e.Provenance.Origin, e.Provenance.Origin, e.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("memory id %s is taken outside channel %s", e.ID, e.Channel)
		}
		return err
	})
	if err != nil {
		return memory.Entry{}, false, fmt.Errorf("insert memory %s: %w", e.ID, err)
	}
	return stored, inserted, nil
}

// Get implements memory.Index.
func (ix *MemoryIndex) Get(ctx context.Context, ch core.ChannelKey, id string) (memory.Entry, error) {
	e, _, err := getEntry(ctx, ix.r, ch, id)
	return e, err
}

// ByOrigin implements memory.Index.
func (ix *MemoryIndex) ByOrigin(ctx context.Context, ch core.ChannelKey, origin string) (memory.Entry, error) {
	if origin == "" {
		return memory.Entry{}, memory.ErrNotFound
	}
	e, _, err := scanEntry(ix.r.QueryRowContext(ctx, `SELECT `+entryColumns+` FROM memories WHERE channel = ? AND origin = ?`, string(ch), origin))
	if errors.Is(err, sql.ErrNoRows) {
		return e, memory.ErrNotFound
	}
	return e, err
}

// List implements memory.Index.
func (ix *MemoryIndex) List(ctx context.Context, ch core.ChannelKey, q memory.ListQuery) ([]memory.Entry, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := ix.r.QueryContext(ctx, `SELECT `+entryColumns+` FROM memories
		WHERE channel = ? AND (? OR forgotten = 0) AND (? = '' OR id < ?)
		ORDER BY id DESC LIMIT ? OFFSET ?`, string(ch), q.IncludeForgotten, q.Before, q.Before, limit, max(q.Offset, 0))
	if err != nil {
		return nil, fmt.Errorf("list memories of %s: %w", ch, err)
	}
	return collectEntries(rows)
}

func collectEntries(rows *sql.Rows) ([]memory.Entry, error) {
	defer rows.Close()
	var out []memory.Entry
	for rows.Next() {
		e, _, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// SetVector implements memory.Index.
func (ix *MemoryIndex) SetVector(ctx context.Context, ch core.ChannelKey, v memory.Vector) error {
	if v.Model == "" || len(v.Values) == 0 {
		return errors.New("set vector: empty model or vector")
	}
	return ix.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO memory_vectors (memory_id, channel, model, dims, embedding)
			SELECT id, channel, ?, ?, ? FROM memories WHERE id = ? AND channel = ? AND forgotten = 0
			ON CONFLICT (memory_id, model) DO UPDATE SET dims = excluded.dims, embedding = excluded.embedding`,
			v.Model, len(v.Values), encodeVector(v.Values), v.MemoryID, string(ch))
		if err != nil {
			return fmt.Errorf("set vector of %s: %w", v.MemoryID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			_, _, err := getEntry(ctx, tx, ch, v.MemoryID)
			return err // not found, or forgotten (nil: nothing to do)
		}
		return nil
	})
}

// unindex drops a memory's full-text row and vectors.
func unindex(ctx context.Context, tx *sql.Tx, ch core.ChannelKey, id string, n int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_fts WHERE rowid = ?`, n); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM memory_vectors WHERE memory_id = ? AND channel = ?`, id, string(ch))
	return err
}

// Forget implements memory.Index.
func (ix *MemoryIndex) Forget(ctx context.Context, ch core.ChannelKey, id, reason string, at time.Time) error {
	return ix.write(ctx, func(tx *sql.Tx) error {
		var n int64
		err := tx.QueryRowContext(ctx, `UPDATE memories SET forgotten = 1, forgotten_at = ?, forget_reason = ?
			WHERE id = ? AND channel = ? AND forgotten = 0 RETURNING n`, at.UnixMicro(), reason, id, string(ch)).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			_, _, err := getEntry(ctx, tx, ch, id)
			return err
		}
		if err != nil {
			return fmt.Errorf("forget %s: %w", id, err)
		}
		return unindex(ctx, tx, ch, id, n)
	})
}

// Delete implements memory.Index. With secure_delete (the store's pragma)
// and FTS5 secure-delete, the destroyed text is overwritten on disk, not
// left in free pages or old index segments.
func (ix *MemoryIndex) Delete(ctx context.Context, ch core.ChannelKey, id string, at time.Time) error {
	return ix.write(ctx, func(tx *sql.Tx) error {
		var n int64
		err := tx.QueryRowContext(ctx, `UPDATE memories SET text = '', origin = '', actor = ?, trust = '', derivation = '',
				forget_reason = '', deleted = 1, deleted_at = ?, forgotten = 1, forgotten_at = coalesce(forgotten_at, ?)
			WHERE id = ? AND channel = ? AND deleted = 0 RETURNING n`,
			zeroActor, at.UnixMicro(), at.UnixMicro(), id, string(ch)).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			_, _, err := getEntry(ctx, tx, ch, id)
			return err
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
		return unindex(ctx, tx, ch, id, n)
	})
}

// visible is ch and the channels mutually linked with it.
func visible(ctx context.Context, q memQuerier, ch core.ChannelKey) ([]any, error) {
	rows, err := q.QueryContext(ctx, `SELECT l.linked FROM memory_links l
		JOIN memory_links r ON r.channel = l.linked AND r.linked = l.channel
		WHERE l.channel = ? ORDER BY l.linked`, string(ch))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []any{string(ch)}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// Search implements memory.Index.
func (ix *MemoryIndex) Search(ctx context.Context, q memory.SearchQuery) (memory.Candidates, error) {
	var c memory.Candidates
	if q.Vector == nil && len(q.Terms) == 0 {
		return c, nil
	}
	k := max(q.K, 1)
	err := ix.read(ctx, func(tx *sql.Tx) error {
		vis, err := visible(ctx, tx, q.Channel)
		if err != nil {
			return fmt.Errorf("links: %w", err)
		}
		in := placeholders(len(vis))
		if q.Vector != nil {
			if c.Dense, err = dense(ctx, tx, q, vis, in, k); err != nil {
				return fmt.Errorf("dense search: %w", err)
			}
		}
		if len(q.Terms) > 0 {
			if c.Lexical, err = lexical(ctx, tx, q, vis, in, k); err != nil {
				return fmt.Errorf("lexical search: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return memory.Candidates{}, fmt.Errorf("search memories of %s: %w", q.Channel, err)
	}
	return c, nil
}

// dense scores every vector of the query's model and dimension in the
// visible channels and returns the k most similar live memories.
func dense(ctx context.Context, tx *sql.Tx, q memory.SearchQuery, vis []any, in string, k int) ([]memory.Hit, error) {
	args := append([]any{q.Model, len(q.Vector)}, vis...)
	rows, err := tx.QueryContext(ctx, `SELECT memory_id, embedding FROM memory_vectors
		WHERE model = ? AND dims = ? AND channel IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	type scored struct {
		id  string
		sim float64
	}
	var all []scored
	var qn float64
	for _, x := range q.Vector {
		qn += float64(x) * float64(x)
	}
	qn = math.Sqrt(qn)
	for rows.Next() {
		var id string
		var blob []byte
		if err := rows.Scan(&id, &blob); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, scored{id, cosine(q.Vector, qn, blob)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Or(cmp.Compare(b.sim, a.sim), strings.Compare(a.id, b.id)) })
	all = all[:min(k, len(all))]
	if len(all) == 0 {
		return nil, nil
	}
	sims := make(map[string]float64, len(all))
	args = args[:0]
	for _, s := range all {
		sims[s.id] = s.sim
		args = append(args, s.id)
	}
	args = append(args, vis...)
	hits, err := hitsByID(ctx, tx, `SELECT id, channel, text, created_at FROM memories
		WHERE id IN (`+placeholders(len(all))+`) AND channel IN (`+in+`) AND forgotten = 0`, args)
	if err != nil {
		return nil, err
	}
	for i := range hits {
		hits[i].Similarity = sims[hits[i].ID]
	}
	slices.SortFunc(hits, func(a, b memory.Hit) int {
		return cmp.Or(cmp.Compare(b.Similarity, a.Similarity), strings.Compare(a.ID, b.ID))
	})
	return hits, nil
}

// cosine is the cosine similarity of q (norm qn) and a stored blob.
func cosine(q []float32, qn float64, blob []byte) float64 {
	if len(blob) != 4*len(q) || qn == 0 {
		return 0
	}
	var dot, n float64
	for i, x := range q {
		y := float64(math.Float32frombits(binary.LittleEndian.Uint32(blob[4*i:])))
		dot += float64(x) * y
		n += y * y
	}
	if n == 0 {
		return 0
	}
	return dot / (qn * math.Sqrt(n))
}

// lexical matches the terms (OR-ed, porter-stemmed by FTS5) among live
// memories of the visible channels, best bm25 first.
func lexical(ctx context.Context, tx *sql.Tx, q memory.SearchQuery, vis []any, in string, k int) ([]memory.Hit, error) {
	quoted := make([]string, len(q.Terms))
	for i, t := range q.Terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	args := append([]any{strings.Join(quoted, " OR ")}, vis...)
	args = append(args, k)
	return hitsByID(ctx, tx, `SELECT m.id, m.channel, m.text, m.created_at
		FROM memory_fts JOIN memories m ON m.n = memory_fts.rowid
		WHERE memory_fts MATCH ? AND m.channel IN (`+in+`) AND m.forgotten = 0
		ORDER BY bm25(memory_fts), m.id LIMIT ?`, args)
}

func hitsByID(ctx context.Context, tx *sql.Tx, query string, args []any) ([]memory.Hit, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.Hit
	for rows.Next() {
		var h memory.Hit
		var ch string
		var created int64
		if err := rows.Scan(&h.ID, &ch, &h.Text, &created); err != nil {
			return nil, err
		}
		h.Channel, h.CreatedAt = core.ChannelKey(ch), time.UnixMicro(created).UTC()
		out = append(out, h)
	}
	return out, rows.Err()
}

// SetLinks implements memory.Index.
func (ix *MemoryIndex) SetLinks(ctx context.Context, ch core.ChannelKey, linked []core.ChannelKey) error {
	return ix.write(ctx, func(tx *sql.Tx) error { return writeLinks(ctx, tx, ch, linked) })
}

func writeLinks(ctx context.Context, tx *sql.Tx, ch core.ChannelKey, linked []core.ChannelKey) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_links WHERE channel = ?`, string(ch)); err != nil {
		return fmt.Errorf("set links of %s: %w", ch, err)
	}
	for _, l := range linked {
		if l == ch {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO memory_links (channel, linked) VALUES (?, ?) ON CONFLICT DO NOTHING`, string(ch), string(l)); err != nil {
			return fmt.Errorf("set links of %s: %w", ch, err)
		}
	}
	return nil
}

// Links implements memory.Index.
func (ix *MemoryIndex) Links(ctx context.Context, ch core.ChannelKey) ([]core.ChannelKey, error) {
	vis, err := visible(ctx, ix.r, ch)
	if err != nil {
		return nil, fmt.Errorf("links of %s: %w", ch, err)
	}
	var out []core.ChannelKey
	for _, v := range vis[1:] {
		out = append(out, core.ChannelKey(v.(string)))
	}
	return out, nil
}

// Snapshot implements memory.Index.
func (ix *MemoryIndex) Snapshot(ctx context.Context, ch core.ChannelKey) (memory.Snapshot, error) {
	var s memory.Snapshot
	err := ix.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+entryColumns+` FROM memories WHERE channel = ? ORDER BY id`, string(ch))
		if err != nil {
			return err
		}
		if s.Entries, err = collectEntries(rows); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT memory_id, model, embedding FROM memory_vectors WHERE channel = ? ORDER BY memory_id, model`, string(ch))
		if err != nil {
			return err
		}
		for rows.Next() {
			var v memory.Vector
			var blob []byte
			if err := rows.Scan(&v.MemoryID, &v.Model, &blob); err != nil {
				rows.Close()
				return err
			}
			v.Values = decodeVector(blob)
			s.Vectors = append(s.Vectors, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT linked FROM memory_links WHERE channel = ? ORDER BY linked`, string(ch))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				return err
			}
			s.Links = append(s.Links, core.ChannelKey(l))
		}
		return rows.Err()
	})
	if err != nil {
		return memory.Snapshot{}, fmt.Errorf("snapshot memories of %s: %w", ch, err)
	}
	return s, nil
}

// Replace implements memory.Index: one write transaction, so recall sees
// the old index or the new one.
func (ix *MemoryIndex) Replace(ctx context.Context, ch core.ChannelKey, s memory.Snapshot) error {
	for _, e := range s.Entries {
		if e.Channel != ch {
			return fmt.Errorf("replace memories of %s: entry %s belongs to %s", ch, e.ID, e.Channel)
		}
	}
	err := ix.write(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM memory_fts WHERE rowid IN (SELECT n FROM memories WHERE channel = ?)`,
			`DELETE FROM memory_vectors WHERE channel = ?`,
			`DELETE FROM memories WHERE channel = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, string(ch)); err != nil {
				return err
			}
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO memories (id, channel, seq, text, origin, actor, trust, derivation,
			created_at, forgotten, forgotten_at, forget_reason, deleted, deleted_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING n`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for _, e := range s.Entries {
			actor, err := json.Marshal(e.Provenance.Actor)
			if err != nil {
				return err
			}
			var n int64
			if err := ins.QueryRowContext(ctx, e.ID, string(ch), int64(e.Seq), e.Text, e.Provenance.Origin, string(actor),
				e.Provenance.Trust, e.Provenance.Derivation, e.CreatedAt.UnixMicro(), e.Forgotten, micros(e.ForgottenAt),
				e.ForgetReason, e.Deleted, micros(e.DeletedAt)).Scan(&n); err != nil {
				return fmt.Errorf("insert %s: %w", e.ID, err)
			}
			if e.Live() {
				if _, err := tx.ExecContext(ctx, `INSERT INTO memory_fts (rowid, text) VALUES (?, ?)`, n, e.Text); err != nil {
					return err
				}
			}
		}
		for _, v := range s.Vectors {
			if _, err := tx.ExecContext(ctx, `INSERT INTO memory_vectors (memory_id, channel, model, dims, embedding)
				SELECT id, channel, ?, ?, ? FROM memories WHERE id = ? AND channel = ?`,
				v.Model, len(v.Values), encodeVector(v.Values), v.MemoryID, string(ch)); err != nil {
				return fmt.Errorf("insert vector of %s: %w", v.MemoryID, err)
			}
		}
		return writeLinks(ctx, tx, ch, s.Links)
	})
	if err != nil {
		return fmt.Errorf("replace memories of %s: %w", ch, err)
	}
	return nil
}
