package memory

import (
	"context"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Index is the store side of memory: a derived, rebuildable copy of the
// channel's memory.* commands, laid out for search (store/postgres with
// pgvector and row-level security, store/sqlite with FTS5 and brute-force
// cosine). Every method names the one channel it acts in, and an
// implementation must never read or write another channel's rows except the
// mutually linked channels Search is allowed to read: a point operation on
// an id held by another channel returns ErrNotFound and changes nothing.
// The conformance suite in memory/memorytest holds every implementation to
// this contract.
//
// Only the memory service calls an Index: it journals first and indexes
// second, so an Index never decides anything a rebuild could not reproduce.
type Index interface {
	// Insert adds e (a live memory). It is idempotent: when the channel
	// already holds a memory with e.ID or, for a non-empty origin, with
	// e.Provenance.Origin, nothing is written and that memory is returned
	// with inserted = false.
	Insert(ctx context.Context, e Entry) (stored Entry, inserted bool, err error)
	// Get returns one memory of ch in any state; ErrNotFound when ch has no
	// memory with that id (including when another channel has one).
	Get(ctx context.Context, ch core.ChannelKey, id string) (Entry, error)
	// ByOrigin returns the memory of ch written for origin (a command id);
	// ErrNotFound when there is none.
	ByOrigin(ctx context.Context, ch core.ChannelKey, origin string) (Entry, error)
	// List returns memories of ch, newest id first.
	List(ctx context.Context, ch core.ChannelKey, q ListQuery) ([]Entry, error)
	// SetVector stores (or replaces) the embedding of a live memory of ch
	// under its model; it is a no-op for a forgotten or deleted memory.
	SetVector(ctx context.Context, ch core.ChannelKey, v Vector) error
	// Forget tombstones a memory: out of search, its vectors dropped, its
	// text kept for admins. Forgetting a forgotten memory changes nothing.
	Forget(ctx context.Context, ch core.ChannelKey, id, reason string, at time.Time) error
	// Delete destroys a memory's text, provenance and vectors, keeping a
	// tombstone row (id, seq, times). Deleting a deleted memory changes
	// nothing.
	Delete(ctx context.Context, ch core.ChannelKey, id string, at time.Time) error
	// Search returns the dense and lexical candidates of q.Channel (and of
	// the channels mutually linked with it) among live memories. It applies
	// no floor and no budget: the service fuses and cuts.
	Search(ctx context.Context, q SearchQuery) (Candidates, error)
	// SetLinks records the channels ch's policy links to (its side only;
	// a link is effective only when both sides declare it).
	SetLinks(ctx context.Context, ch core.ChannelKey, linked []core.ChannelKey) error
	// Links returns the channels effectively (mutually) linked with ch.
	Links(ctx context.Context, ch core.ChannelKey) ([]core.ChannelKey, error)
	// Snapshot returns everything the index holds for ch, in a canonical
	// order: entries by id, vectors by (memory id, model), declared links
	// sorted. Rebuild compares and replaces with it.
	Snapshot(ctx context.Context, ch core.ChannelKey) (Snapshot, error)
	// Replace atomically swaps everything ch holds for s.
	Replace(ctx context.Context, ch core.ChannelKey, s Snapshot) error
}

// ErrNotFound is returned for a memory id the channel does not hold (also
// when another channel holds it: the ringfence does not confirm existence).
// errors.Is(err, core.ErrNotFound) holds for it too.
var ErrNotFound error = notFound{}

type notFound struct{}

func (notFound) Error() string        { return "no such memory in this channel" }
func (notFound) Is(target error) bool { return target == core.ErrNotFound }

// Entry is one memory as the index holds it.
type Entry struct {
	ID      string
	Channel core.ChannelKey
	// Seq is the journal seq of the memory.written command: Delete redacts
	// that command's payload.
	Seq          uint64
	Text         string
	Provenance   core.Provenance
	CreatedAt    time.Time // the memory.written command's time
	Forgotten    bool
	ForgottenAt  time.Time
	ForgetReason string
	Deleted      bool
	DeletedAt    time.Time
}

// Live reports whether the memory takes part in recall.
func (e Entry) Live() bool { return !e.Forgotten && !e.Deleted }

// Vector is the embedding of one memory under one embedding model. Its
// dimension is len(Values); stores keep model and dimension beside it so
// vectors of different models never mix in one search.
type Vector struct {
	MemoryID string
	Model    string
	Values   []float32
}

// ListQuery selects memories for admins.
type ListQuery struct {
	// IncludeForgotten adds forgotten and deleted (tombstone) memories.
	IncludeForgotten bool
	// Before is an id cursor: only memories with a smaller id ("" = newest).
	Before string
	// Offset skips that many memories of the selection, newest first (a
	// page number for people; Before is the cursor for programs).
	Offset int
	// Limit caps the page (<= 0: 100).
	Limit int
}

// SearchQuery is one recall's request to the index.
type SearchQuery struct {
	Channel core.ChannelKey
	// Terms are the normalised lexical terms (see Terms), OR-ed; empty
	// means no lexical cue.
	Terms []string
	// Vector and Model are the query embedding; nil means no dense cue.
	// Only vectors of the same model and dimension are compared.
	Vector []float32
	Model  string
	// K caps each cue's candidates.
	K int
}

// Hit is one candidate of one cue.
type Hit struct {
	ID        string
	Channel   core.ChannelKey
	Text      string
	CreatedAt time.Time
	// Similarity is the cosine similarity to the query (dense hits only).
	Similarity float64
}

// Candidates are the two ranked lists a search returns, best first.
type Candidates struct {
	Dense   []Hit
	Lexical []Hit
}

// Snapshot is the full index content of one channel.
type Snapshot struct {
	Entries []Entry
	Vectors []Vector
	Links   []core.ChannelKey // declared by this channel's policy
}
