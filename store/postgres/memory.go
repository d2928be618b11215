package postgres

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
)

// MemoryRole is the restricted role every memory transaction switches to
// (SET LOCAL ROLE), created by migration 00002_memory. It is not a
// superuser, has no BYPASSRLS and owns nothing, so the row-level security
// policies on the memory tables always apply to it, even when the
// application connects as a superuser (as the tests do) or as the tables'
// owner. The application's login role must be a member of it.
const MemoryRole = "marlowe_memory"

// MemoryIndex is the PostgreSQL memory.Index: pgvector for the dense cue
// (the partial HNSW index for big channels, an exact scan for small ones),
// PostgreSQL full-text lexemes in a btree-indexed table for the lexical cue
// (a GIN index cannot be used under row-level security; see the
// migration), and a two-layer ringfence: every query names its channel in
// SQL (the code-level filter) and runs in a transaction bound to that
// channel, as MemoryRole, under row-level security (the database-level
// filter), so a query that forgets the channel condition still sees
// nothing of another channel.
type MemoryIndex struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// iterative is set when pgvector (>= 0.8) can continue an HNSW scan
	// past rows the channel filter rejects (hnsw.iterative_scan); without
	// it a filtered HNSW scan returns at most ef_search rows before
	// filtering, which starves small channels in a big table.
	iterative bool
	efSearch  int
	// hnsw remembers the (model, dims) indexes known to exist.
	hnsw sync.Map
	// links caches each channel's effective links for a few seconds (see
	// visible).
	links sync.Map
	// exactMax and counts steer the dense strategy (see useHNSW).
	exactMax int
	counts   sync.Map
}

var _ memory.Index = (*MemoryIndex)(nil)

// MemoryOptions tunes the index.
type MemoryOptions struct {
	Logger *slog.Logger
	// EfSearch is the HNSW candidate list size (pgvector's hnsw.ef_search;
	// default 100): higher is more exact and slower.
	EfSearch int
	// ExactMax: a channel holding at most this many vectors of the query's
	// model is scored exactly; above it the HNSW index is used. 0 means
	// DefaultExactMax; negative means always HNSW.
	ExactMax int
}

// DefaultExactMax is about where a filtered HNSW walk starts to beat an
// exact scan of one channel (see useHNSW).
const DefaultExactMax = 20_000

// maxHNSWDims is pgvector's limit for HNSW on the vector type; larger
// embeddings are searched exactly.
const maxHNSWDims = 2000

// defaultMemoryConns is the memory pool size when the URL does not set
// pool_max_conns: recalls are short read transactions.
const defaultMemoryConns = 8

// OpenMemoryIndex connects to url, applies pending migrations (00002
// creates the vector extension, the tables, the policies and MemoryRole)
// and returns the memory index. It has its own pool because pgvector's
// types are registered on every connection as it is made (AfterConnect),
// which needs the extension to exist first.
func OpenMemoryIndex(ctx context.Context, url string, opts MemoryOptions) (*MemoryIndex, error) {
	if _, err := Migrate(ctx, url); err != nil {
		return nil, fmt.Errorf("open memory index: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open memory index: parse url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, defaultMemoryConns)
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
			return fmt.Errorf("register pgvector types: %w", err)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open memory index: %w", err)
	}
	ix := &MemoryIndex{pool: pool, log: opts.Logger, efSearch: opts.EfSearch}
	if ix.log == nil {
		ix.log = slog.Default()
	}
	if ix.efSearch <= 0 {
		ix.efSearch = 100
	}
	ix.exactMax = opts.ExactMax
	if ix.exactMax == 0 {
		ix.exactMax = DefaultExactMax
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'vector'`).Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open memory index: read the pgvector version: %w", err)
	}
	ix.iterative = versionAtLeast(version, 0, 8)
	if !ix.iterative {
		ix.log.Warn("pgvector is older than 0.8: filtered HNSW scans may return fewer candidates in big tables; upgrade pgvector", "version", version)
	}
	return ix, nil
}

// Close releases the index's connections.
func (ix *MemoryIndex) Close() { ix.pool.Close() }

func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// bindSQL binds a transaction to one channel: the restricted role and the
// setting the row-level security policies read, both transaction-local.
const bindSQL = `SELECT set_config('role', '` + MemoryRole + `', true), set_config('marlowe.channel', $1, true)`

// inChannel runs fn in a transaction bound to ch.
func (ix *MemoryIndex) inChannel(ctx context.Context, ch core.ChannelKey, mode pgx.TxAccessMode, fn func(pgx.Tx) error) error {
	if ch == "" {
		return errors.New("memory index: no channel")
	}
	return pgx.BeginTxFunc(ctx, ix.pool, pgx.TxOptions{AccessMode: mode}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, bindSQL, string(ch)); err != nil {
			return fmt.Errorf("bind the transaction to %s as %s (is the login role a member of it?): %w", ch, MemoryRole, err)
		}
		return fn(tx)
	})
}

const entryColumns = `id, channel, seq, text, origin, actor, trust, derivation, created_at,
	forgotten, forgotten_at, forget_reason, deleted, deleted_at`

func scanEntry(row pgx.Row) (memory.Entry, error) {
	var (
		e                      memory.Entry
		ch                     string
		seq                    int64
		actor                  []byte
		forgottenAt, deletedAt pgtype.Timestamptz
	)
	err := row.Scan(&e.ID, &ch, &seq, &e.Text, &e.Provenance.Origin, &actor, &e.Provenance.Trust, &e.Provenance.Derivation,
		&e.CreatedAt, &e.Forgotten, &forgottenAt, &e.ForgetReason, &e.Deleted, &deletedAt)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(actor, &e.Provenance.Actor); err != nil {
		return e, fmt.Errorf("memory %s: actor: %w", e.ID, err)
	}
	e.Channel, e.Seq, e.CreatedAt = core.ChannelKey(ch), uint64(seq), e.CreatedAt.UTC()
	if forgottenAt.Valid {
		e.ForgottenAt = forgottenAt.Time.UTC()
	}
	if deletedAt.Valid {
		e.DeletedAt = deletedAt.Time.UTC()
	}
	return e, nil
}

func nullTime(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// getEntry reads one memory of ch inside a bound transaction.
func getEntry(ctx context.Context, tx pgx.Tx, ch core.ChannelKey, id string) (memory.Entry, error) {
	e, err := scanEntry(tx.QueryRow(ctx, `SELECT `+entryColumns+` FROM memories WHERE id = $1 AND channel = $2`, id, string(ch)))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, memory.ErrNotFound
	}
	return e, err
}

// Insert implements memory.Index.
func (ix *MemoryIndex) Insert(ctx context.Context, e memory.Entry) (memory.Entry, bool, error) {
	actor, err := json.Marshal(e.Provenance.Actor)
	if err != nil {
		return e, false, err
	}
	var stored memory.Entry
	inserted := false
	err = ix.inChannel(ctx, e.Channel, pgx.ReadWrite, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO memories (id, channel, seq, text, origin, actor, trust, derivation, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
			e.ID, string(e.Channel), int64(e.Seq), e.Text, e.Provenance.Origin, actor, e.Provenance.Trust, e.Provenance.Derivation, e.CreatedAt)
		if err != nil {
			return err
		}
		inserted = tag.RowsAffected() == 1
		stored, err = scanEntry(tx.QueryRow(ctx, `SELECT `+entryColumns+` FROM memories
			WHERE channel = $1 AND (id = $2 OR ($3 <> '' AND origin = $3)) ORDER BY id = $2 DESC LIMIT 1`,
			string(e.Channel), e.ID, e.Provenance.Origin))
		if errors.Is(err, pgx.ErrNoRows) {
			// The id exists, but not in this channel: ids are ULIDs, so
			// this is a bug upstream, never a reason to show that row.
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
	var e memory.Entry
	err := ix.inChannel(ctx, ch, pgx.ReadOnly, func(tx pgx.Tx) error {
		var err error
		e, err = getEntry(ctx, tx, ch, id)
		return err
	})
	return e, err
}

// ByOrigin implements memory.Index.
func (ix *MemoryIndex) ByOrigin(ctx context.Context, ch core.ChannelKey, origin string) (memory.Entry, error) {
	if origin == "" {
		return memory.Entry{}, memory.ErrNotFound
	}
	var e memory.Entry
	err := ix.inChannel(ctx, ch, pgx.ReadOnly, func(tx pgx.Tx) error {
		var err error
		e, err = scanEntry(tx.QueryRow(ctx, `SELECT `+entryColumns+` FROM memories WHERE channel = $1 AND origin = $2`, string(ch), origin))
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrNotFound
		}
		return err
	})
	return e, err
}

// List implements memory.Index.
func (ix *MemoryIndex) List(ctx context.Context, ch core.ChannelKey, q memory.ListQuery) ([]memory.Entry, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []memory.Entry
	err := ix.inChannel(ctx, ch, pgx.ReadOnly, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+entryColumns+` FROM memories
			WHERE channel = $1 AND ($2 OR NOT forgotten) AND ($3 = '' OR id < $3)
			ORDER BY id DESC LIMIT $4 OFFSET $5`, string(ch), q.IncludeForgotten, q.Before, limit, max(q.Offset, 0))
		if err != nil {
			return err
		}
		out, err = collectEntries(rows)
		return err
	})
	return out, err
}

func collectEntries(rows pgx.Rows) ([]memory.Entry, error) {
	defer rows.Close()
	var out []memory.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// validModel keeps model names safe to embed as SQL literals (the partial
// HNSW indexes and the queries that use them must spell the same literal,
// so it cannot be a parameter).
var validModel = regexp.MustCompile(`^[A-Za-z0-9._:/@+-]{1,200}$`)

func checkVector(v memory.Vector) error {
	if !validModel.MatchString(v.Model) {
		return fmt.Errorf("embedding model name %q: want 1-200 of A-Z a-z 0-9 . _ : / @ + -", v.Model)
	}
	if len(v.Values) == 0 || len(v.Values) > 16000 {
		return fmt.Errorf("embedding of %d dimensions: want 1-16000", len(v.Values))
	}
	return nil
}

// SetVector implements memory.Index.
func (ix *MemoryIndex) SetVector(ctx context.Context, ch core.ChannelKey, v memory.Vector) error {
	if err := checkVector(v); err != nil {
		return err
	}
	if err := ix.ensureHNSW(ctx, v.Model, len(v.Values)); err != nil {
		return err
	}
	return ix.inChannel(ctx, ch, pgx.ReadWrite, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO memory_vectors (memory_id, channel, model, dims, embedding)
			SELECT id, channel, $3, $4, $5 FROM memories WHERE id = $1 AND channel = $2 AND NOT forgotten
			ON CONFLICT (memory_id, model) DO UPDATE SET dims = excluded.dims, embedding = excluded.embedding`,
			v.MemoryID, string(ch), v.Model, len(v.Values), pgvector.NewVector(v.Values))
		if err != nil {
			return fmt.Errorf("set vector of %s: %w", v.MemoryID, err)
		}
		if tag.RowsAffected() == 0 {
			_, err := getEntry(ctx, tx, ch, v.MemoryID)
			return err // not found, or forgotten (nil: nothing to do)
		}
		return nil
	})
}

// ensureHNSW creates the partial HNSW index of (model, dims) if it does not
// exist. It runs as the connection's own role (the tables' owner): DDL is
// not a memory query. An advisory lock serialises concurrent creators.
func (ix *MemoryIndex) ensureHNSW(ctx context.Context, model string, dims int) error {
	if dims > maxHNSWDims {
		return nil
	}
	key := model + "\x00" + strconv.Itoa(dims)
	if _, ok := ix.hnsw.Load(key); ok {
		return nil
	}
	err := pgx.BeginFunc(ctx, ix.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('marlowe.memory_vectors.hnsw'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, hnswDDL(model, dims))
		return err
	})
	if err != nil {
		return fmt.Errorf("create the HNSW index for %s/%d: %w", model, dims, err)
	}
	ix.hnsw.Store(key, struct{}{})
	return nil
}

func hnswName(model string, dims int) string {
	h := sha256.Sum256([]byte(model))
	return fmt.Sprintf("memory_vectors_hnsw_%s_%d", hex.EncodeToString(h[:6]), dims)
}

func hnswDDL(model string, dims int) string {
	return fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON memory_vectors
		USING hnsw ((embedding::vector(%d)) vector_cosine_ops) WHERE model = %s AND dims = %d`,
		pgx.Identifier{hnswName(model, dims)}.Sanitize(), dims, quoteLiteral(model), dims)
}

// quoteLiteral quotes a validated model name as a SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// denseSQL is the HNSW dense cue in one channel ($2) for one (model,
// dims): the same cast and predicate as the partial HNSW index, so the
// planner uses it, with the channel filter applied during the walk
// (iteratively on pgvector >= 0.8). The K winners' texts are then fetched
// by primary key (LATERAL ... OFFSET 0 keeps the planner from hash-joining
// the memories table instead).
func denseSQL(model string, dims int) string {
	return fmt.Sprintf(`SELECT d.memory_id, d.channel, m.text, m.created_at, 1 - d.dist
FROM (SELECT v.memory_id, v.channel, v.embedding::vector(%[2]d) <=> $1::vector(%[2]d) AS dist
	FROM memory_vectors v
	WHERE v.model = %[1]s AND v.dims = %[2]d AND v.channel = $2
	ORDER BY dist LIMIT $3) d,
LATERAL (SELECT text, created_at FROM memories WHERE id = d.memory_id AND NOT forgotten OFFSET 0) m
ORDER BY d.dist, d.memory_id`, quoteLiteral(model), dims)
}

// exactSQL is the exact dense cue in one channel: no cast, so the HNSW
// index cannot apply; the channel index finds the rows and all are scored.
func exactSQL(model string, dims int) string {
	return fmt.Sprintf(`SELECT d.memory_id, d.channel, m.text, m.created_at, 1 - d.dist
FROM (SELECT v.memory_id, v.channel, v.embedding <=> $1::vector AS dist
	FROM memory_vectors v
	WHERE v.model = %[1]s AND v.dims = %[2]d AND v.channel = $2
	ORDER BY dist LIMIT $3) d,
LATERAL (SELECT text, created_at FROM memories WHERE id = d.memory_id AND NOT forgotten OFFSET 0) m
ORDER BY d.dist, d.memory_id`, quoteLiteral(model), dims)
}

// useHNSW decides the dense strategy for one channel: HNSW when it holds
// more than ExactMax vectors of the model, an exact scan otherwise. The
// HNSW graph is global, so a walk filtered down to one channel passes
// about (table size / channel size) × K tuples with their neighbour
// lists: with 200,000 vectors in 20 channels of 10,000 that is 20-35 ms
// against 4-5 ms to score the channel's 10,000 vectors exactly, while a
// channel holding a large share of a big table is where HNSW wins. The
// planner cannot be left to choose: with the channel known it estimates
// the filtered walk too cheaply and picks HNSW at 5% selectivity. Counts
// are cached for a minute: they steer speed, never what may be seen.
func (ix *MemoryIndex) useHNSW(ctx context.Context, bound, ch core.ChannelKey, model string, dims int) (bool, error) {
	switch {
	case dims > maxHNSWDims:
		return false, nil
	case ix.exactMax < 0:
		return true, nil
	}
	key := countKey{ch: ch, model: model, dims: dims}
	if c, ok := ix.counts.Load(key); ok && time.Since(c.(countVal).at) < countTTL {
		return c.(countVal).n > ix.exactMax, nil
	}
	var n int
	err := ix.inChannel(ctx, bound, pgx.ReadOnly, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM memory_vectors WHERE model = %s AND dims = %d AND channel = $1`,
			quoteLiteral(model), dims), string(ch)).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("count vectors of %s: %w", ch, err)
	}
	ix.counts.Store(key, countVal{n: n, at: time.Now()})
	return n > ix.exactMax, nil
}

// countTTL is how long a channel's vector count steers the dense strategy.
const countTTL = time.Minute

type countKey struct {
	ch    core.ChannelKey
	model string
	dims  int
}

type countVal struct {
	n  int
	at time.Time
}

// lexicalSQL is the lexical cue in one channel ($2): the query's
// 'english' lexemes ($1 through to_tsvector) looked up in memory_terms (a
// btree, usable under row-level security), ranked by how many distinct
// lexemes a memory matches, newest first on ties. Each lexeme contributes
// at most its postingsCap newest memories (a backward index-only scan), so
// a very common word costs the same as a rare one: the lexical cue's cost
// is bounded by the query, not by the corpus. Only real matches return.
const lexicalSQL = `SELECT m.id, m.channel, m.text, m.created_at, h.hits
FROM (SELECT p.memory_id, count(*) AS hits
	FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS q(term),
		LATERAL (SELECT t.memory_id FROM memory_terms t WHERE t.channel = $2 AND t.term = q.term
			ORDER BY t.memory_id DESC LIMIT ` + postingsCap + `) p
	GROUP BY p.memory_id
	ORDER BY hits DESC, p.memory_id DESC
	LIMIT $3) h,
LATERAL (SELECT id, channel, text, created_at FROM memories WHERE id = h.memory_id AND NOT forgotten OFFSET 0) m
ORDER BY h.hits DESC, h.memory_id DESC`

// postingsCap bounds the memories one lexeme contributes to a lexical
// search (see lexicalSQL).
const postingsCap = "400"

// linksTTL is how long a channel's effective links are cached. Staleness
// is safe: a removed link is enforced at once by row-level security (the
// policies read memory_links live); a new one shows within the TTL on
// other processes, at once in this one (SetLinks and Replace clear it).
const linksTTL = 10 * time.Second

type linksVal struct {
	links []core.ChannelKey
	at    time.Time
}

// visible returns ch and the channels mutually linked with it.
func (ix *MemoryIndex) visible(ctx context.Context, ch core.ChannelKey) ([]core.ChannelKey, error) {
	if v, ok := ix.links.Load(ch); ok && time.Since(v.(linksVal).at) < linksTTL {
		return append([]core.ChannelKey{ch}, v.(linksVal).links...), nil
	}
	links, err := ix.Links(ctx, ch)
	if err != nil {
		return nil, err
	}
	ix.links.Store(ch, linksVal{links: links, at: time.Now()})
	return append([]core.ChannelKey{ch}, links...), nil
}

// Search implements memory.Index: the binding and both cues, for the
// channel and each channel mutually linked with it, in one round trip.
// Each query names its channel (the code-level filter); row-level security
// filters again below it.
func (ix *MemoryIndex) Search(ctx context.Context, q memory.SearchQuery) (memory.Candidates, error) {
	var c memory.Candidates
	dense := q.Vector != nil
	if dense {
		if err := checkVector(memory.Vector{Model: q.Model, Values: q.Vector}); err != nil {
			return c, err
		}
	}
	lexical := len(q.Terms) > 0
	if !dense && !lexical {
		return c, nil
	}
	vis, err := ix.visible(ctx, q.Channel)
	if err != nil {
		return c, fmt.Errorf("search memories of %s: links: %w", q.Channel, err)
	}
	k := max(q.K, 1)
	hnsw := make([]bool, len(vis))
	anyHNSW := false
	if dense {
		for i, ch := range vis {
			if hnsw[i], err = ix.useHNSW(ctx, q.Channel, ch, q.Model, len(q.Vector)); err != nil {
				return c, fmt.Errorf("search memories of %s: %w", q.Channel, err)
			}
			anyHNSW = anyHNSW || hnsw[i]
		}
	}
	// One batch, one round trip: pgx runs a batch as one implicit
	// transaction, so the transaction-local binding of its first statement
	// holds for the searches after it. Should that ever not hold, the
	// searches run unbound and see nothing: it fails closed.
	b := &pgx.Batch{}
	b.Queue(bindSQL, string(q.Channel))
	if anyHNSW && ix.iterative {
		b.Queue(`SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true)`,
			strconv.Itoa(max(ix.efSearch, k)))
	}
	terms := strings.Join(q.Terms, " ")
	for i, ch := range vis {
		switch {
		case dense && hnsw[i]:
			b.Queue(denseSQL(q.Model, len(q.Vector)), pgvector.NewVector(q.Vector), string(ch), k)
		case dense:
			b.Queue(exactSQL(q.Model, len(q.Vector)), pgvector.NewVector(q.Vector), string(ch), k)
		}
		if lexical {
			b.Queue(lexicalSQL, terms, string(ch), k)
		}
	}
	type lexHit struct {
		memory.Hit
		hits int
	}
	var lex []lexHit
	err = func() error {
		br := ix.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("bind the search to %s as %s: %w", q.Channel, MemoryRole, err)
		}
		if anyHNSW && ix.iterative {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("set hnsw scan options: %w", err)
			}
		}
		for range vis {
			if dense {
				rows, err := br.Query()
				if err != nil {
					return fmt.Errorf("dense search: %w", err)
				}
				hits, err := collectHits(rows, true)
				if err != nil {
					return fmt.Errorf("dense search: %w", err)
				}
				c.Dense = append(c.Dense, hits...)
			}
			if lexical {
				rows, err := br.Query()
				if err != nil {
					return fmt.Errorf("lexical search: %w", err)
				}
				hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lexHit, error) {
					var h lexHit
					var ch string
					err := r.Scan(&h.ID, &ch, &h.Text, &h.CreatedAt, &h.hits)
					h.Channel, h.CreatedAt = core.ChannelKey(ch), h.CreatedAt.UTC()
					return h, err
				})
				if err != nil {
					return fmt.Errorf("lexical search: %w", err)
				}
				lex = append(lex, hits...)
			}
		}
		return br.Close()
	}()
	if err != nil {
		return memory.Candidates{}, fmt.Errorf("search memories of %s: %w", q.Channel, err)
	}
	// Merge the channels' lists (a no-op without links).
	slices.SortStableFunc(c.Dense, func(a, b memory.Hit) int {
		return cmp.Or(cmp.Compare(b.Similarity, a.Similarity), strings.Compare(a.ID, b.ID))
	})
	slices.SortStableFunc(lex, func(a, b lexHit) int { return cmp.Or(cmp.Compare(b.hits, a.hits), strings.Compare(b.ID, a.ID)) })
	c.Dense = c.Dense[:min(k, len(c.Dense))]
	for _, h := range lex[:min(k, len(lex))] {
		c.Lexical = append(c.Lexical, h.Hit)
	}
	return c, nil
}

func collectHits(rows pgx.Rows, dense bool) ([]memory.Hit, error) {
	defer rows.Close()
	var out []memory.Hit
	for rows.Next() {
		var h memory.Hit
		var ch string
		dst := []any{&h.ID, &ch, &h.Text, &h.CreatedAt}
		if dense {
			dst = append(dst, &h.Similarity)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		h.Channel, h.CreatedAt = core.ChannelKey(ch), h.CreatedAt.UTC()
		out = append(out, h)
	}
	return out, rows.Err()
}

// Forget implements memory.Index.
func (ix *MemoryIndex) Forget(ctx context.Context, ch core.ChannelKey, id, reason string, at time.Time) error {
	return ix.inChannel(ctx, ch, pgx.ReadWrite, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE memories SET forgotten = true, forgotten_at = $3, forget_reason = $4
			WHERE id = $1 AND channel = $2 AND NOT forgotten`, id, string(ch), at, reason)
		if err != nil {
			return fmt.Errorf("forget %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			_, err := getEntry(ctx, tx, ch, id)
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM memory_vectors WHERE memory_id = $1 AND channel = $2`, id, string(ch))
		return err
	})
}

// Delete implements memory.Index. The row's text, provenance and reason are
// overwritten and its vectors deleted; PostgreSQL frees the old row versions
// at the next (auto)vacuum.
func (ix *MemoryIndex) Delete(ctx context.Context, ch core.ChannelKey, id string, at time.Time) error {
	return ix.inChannel(ctx, ch, pgx.ReadWrite, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE memories SET text = '', origin = '', actor = $3, trust = '', derivation = '',
				forget_reason = '', deleted = true, deleted_at = $4,
				forgotten = true, forgotten_at = coalesce(forgotten_at, $4)
			WHERE id = $1 AND channel = $2 AND NOT deleted`, id, string(ch), zeroActor, at)
		if err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			_, err := getEntry(ctx, tx, ch, id)
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM memory_vectors WHERE memory_id = $1 AND channel = $2`, id, string(ch))
		return err
	})
}

// zeroActor is the stored actor of a tombstone: core.Actor{} as JSON.
const zeroActor = `{"type":"","id":"","platform":""}`

// SetLinks implements memory.Index.
func (ix *MemoryIndex) SetLinks(ctx context.Context, ch core.ChannelKey, linked []core.ChannelKey) error {
	defer ix.links.Clear() // links of both sides change
	return ix.inChannel(ctx, ch, pgx.ReadWrite, func(tx pgx.Tx) error {
		return writeLinks(ctx, tx, ch, linked)
	})
}

func writeLinks(ctx context.Context, tx pgx.Tx, ch core.ChannelKey, linked []core.ChannelKey) error {
	if _, err := tx.Exec(ctx, `DELETE FROM memory_links WHERE channel = $1`, string(ch)); err != nil {
		return fmt.Errorf("set links of %s: %w", ch, err)
	}
	ls := make([]string, 0, len(linked))
	for _, l := range linked {
		if l != ch {
			ls = append(ls, string(l))
		}
	}
	if len(ls) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO memory_links (channel, linked) SELECT $1, l FROM unnest($2::text[]) AS l ON CONFLICT DO NOTHING`, string(ch), ls)
	if err != nil {
		return fmt.Errorf("set links of %s: %w", ch, err)
	}
	return nil
}

// Links implements memory.Index.
func (ix *MemoryIndex) Links(ctx context.Context, ch core.ChannelKey) ([]core.ChannelKey, error) {
	var out []core.ChannelKey
	err := ix.inChannel(ctx, ch, pgx.ReadOnly, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT l.linked FROM memory_links l
			JOIN memory_links r ON r.channel = l.linked AND r.linked = l.channel
			WHERE l.channel = $1 ORDER BY l.linked`, string(ch))
		if err != nil {
			return err
		}
		out, err = collectKeys(rows)
		return err
	})
	return out, err
}

func collectKeys(rows pgx.Rows) ([]core.ChannelKey, error) {
	ks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out []core.ChannelKey
	for _, k := range ks {
		out = append(out, core.ChannelKey(k))
	}
	return out, nil
}

// Snapshot implements memory.Index.
func (ix *MemoryIndex) Snapshot(ctx context.Context, ch core.ChannelKey) (memory.Snapshot, error) {
	var s memory.Snapshot
	err := ix.inChannel(ctx, ch, pgx.ReadOnly, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+entryColumns+` FROM memories WHERE channel = $1 ORDER BY id`, string(ch))
		if err != nil {
			return err
		}
		if s.Entries, err = collectEntries(rows); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT memory_id, model, embedding FROM memory_vectors WHERE channel = $1`, string(ch))
		if err != nil {
			return err
		}
		s.Vectors, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Vector, error) {
			var v memory.Vector
			var vec pgvector.Vector
			err := r.Scan(&v.MemoryID, &v.Model, &vec)
			v.Values = vec.Slice()
			return v, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT linked FROM memory_links WHERE channel = $1 ORDER BY linked`, string(ch))
		if err != nil {
			return err
		}
		s.Links, err = collectKeys(rows)
		return err
	})
	if err != nil {
		return memory.Snapshot{}, fmt.Errorf("snapshot memories of %s: %w", ch, err)
	}
	slices.SortFunc(s.Vectors, func(a, b memory.Vector) int {
		return cmp.Or(strings.Compare(a.MemoryID, b.MemoryID), strings.Compare(a.Model, b.Model))
	})
	return s, nil
}

// Replace implements memory.Index: one bound transaction deletes the
// channel's rows and inserts the snapshot, so recall sees the old index or
// the new one, never a mix.
func (ix *MemoryIndex) Replace(ctx context.Context, ch core.ChannelKey, s memory.Snapshot) error {
	n := len(s.Entries)
	var (
		ids, chs, texts, origins, actors, trusts, derivs, reasons = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		seqs                         = make([]int64, n)
		created, forgottenAt, deleAt = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		forgotten, deleted           = make([]bool, n), make([]bool, n)
	)
	for i, e := range s.Entries {
		if e.Channel != ch {
			return fmt.Errorf("replace memories of %s: entry %s belongs to %s", ch, e.ID, e.Channel)
		}
		actor, err := json.Marshal(e.Provenance.Actor)
		if err != nil {
			return err
		}
		ids[i], chs[i], texts[i], origins[i], actors[i] = e.ID, string(e.Channel), e.Text, e.Provenance.Origin, string(actor)
		trusts[i], derivs[i], reasons[i], seqs[i] = e.Provenance.Trust, e.Provenance.Derivation, e.ForgetReason, int64(e.Seq)
		created[i], forgottenAt[i], deleAt[i] = nullTime(e.CreatedAt), nullTime(e.ForgottenAt), nullTime(e.DeletedAt)
		forgotten[i], deleted[i] = e.Forgotten, e.Deleted
	}
	vids, vchs, models := make([]string, len(s.Vectors)), make([]string, len(s.Vectors)), make([]string, len(s.Vectors))
	dims, vecs := make([]int32, len(s.Vectors)), make([]pgvector.Vector, len(s.Vectors))
	for i, v := range s.Vectors {
		if err := checkVector(v); err != nil {
			return err
		}
		if err := ix.ensureHNSW(ctx, v.Model, len(v.Values)); err != nil {
			return err
		}
		vids[i], vchs[i], models[i], dims[i], vecs[i] = v.MemoryID, string(ch), v.Model, int32(len(v.Values)), pgvector.NewVector(v.Values)
	}
	err := ix.inChannel(ctx, ch, pgx.ReadWrite, func(tx pgx.Tx) error {
		for _, q := range []string{`DELETE FROM memory_vectors WHERE channel = $1`, `DELETE FROM memories WHERE channel = $1`} {
			if _, err := tx.Exec(ctx, q, string(ch)); err != nil {
				return err
			}
		}
		if n > 0 {
			_, err := tx.Exec(ctx, `INSERT INTO memories (id, channel, seq, text, origin, actor, trust, derivation,
					created_at, forgotten, forgotten_at, forget_reason, deleted, deleted_at)
				SELECT id, ch, seq, txt, origin, actor::jsonb, trust, deriv, created, fgt, fgt_at, reason, del, del_at
				FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
					$9::timestamptz[], $10::bool[], $11::timestamptz[], $12::text[], $13::bool[], $14::timestamptz[])
					AS u(id, ch, seq, txt, origin, actor, trust, deriv, created, fgt, fgt_at, reason, del, del_at)`,
				ids, chs, seqs, texts, origins, actors, trusts, derivs, created, forgotten, forgottenAt, reasons, deleted, deleAt)
			if err != nil {
				return fmt.Errorf("insert entries: %w", err)
			}
		}
		if len(vids) > 0 {
			_, err := tx.Exec(ctx, `INSERT INTO memory_vectors (memory_id, channel, model, dims, embedding)
				SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::vector[])`,
				vids, vchs, models, dims, vecs)
			if err != nil {
				return fmt.Errorf("insert vectors: %w", err)
			}
		}
		return writeLinks(ctx, tx, ch, s.Links)
	})
	ix.links.Clear()
	if err != nil {
		return fmt.Errorf("replace memories of %s: %w", ch, err)
	}
	return nil
}
