// Package coretest holds in-memory fakes for testing the core loop without
// a store, a platform or a model provider: a core.Journal, a recording
// core.Surface that dedupes posts by idempotency key, a scripted core.Model
// and a per-channel core.ChannelMemory. Test code only.
package coretest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// NewSigner returns a signer with a fresh key.
func NewSigner(tb testing.TB) *core.Signer {
	tb.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatalf("generate key: %v", err)
	}
	s, err := core.NewSigner(key)
	if err != nil {
		tb.Fatalf("new signer: %v", err)
	}
	return s
}

// MemJournal is an in-memory core.Journal: signed, chained, atomic batches,
// unique command ids, a head record kept apart from the rows (so a deleted
// last row is detected). It passes core/journaltest. Instances made with
// Reopen share one storage, as processes share a database.
type MemJournal struct {
	signer *core.Signer
	st     *memStore
}

type memStore struct {
	mu    sync.Mutex
	rows  map[core.ChannelKey][]core.Record // sorted by Seq
	heads map[core.ChannelKey]memHead
	ids   map[string]bool
	runs  map[string][]runRef
	// leases: name → holder, token, expiry (see lease.go)
	leases map[string]*memLease
}

type memHead struct {
	seq  uint64
	hash core.Hash
}

type runRef struct {
	ch  core.ChannelKey
	seq uint64
}

var _ core.Journal = (*MemJournal)(nil)

// NewMemJournal returns an empty journal sealing with signer (nil: read-only).
func NewMemJournal(signer *core.Signer) *MemJournal {
	return &MemJournal{signer: signer, st: &memStore{
		rows: map[core.ChannelKey][]core.Record{}, heads: map[core.ChannelKey]memHead{},
		ids: map[string]bool{}, runs: map[string][]runRef{}, leases: map[string]*memLease{},
	}}
}

// Reopen returns another instance on the same storage sealing with signer
// (nil: read-only).
func (j *MemJournal) Reopen(signer *core.Signer) *MemJournal {
	return &MemJournal{signer: signer, st: j.st}
}

// Append implements core.Journal.
func (j *MemJournal) Append(ctx context.Context, drafts ...core.Draft) ([]core.Command, error) {
	return j.append(ctx, nil, drafts)
}

// AppendAt implements core.Journal.
func (j *MemJournal) AppendAt(ctx context.Context, exp core.Expect, drafts ...core.Draft) ([]core.Command, error) {
	return j.append(ctx, &exp, drafts)
}

func (j *MemJournal) append(ctx context.Context, exp *core.Expect, drafts []core.Draft) ([]core.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := core.CheckBatch(drafts); err != nil {
		return nil, err
	}
	if j.signer == nil {
		return nil, core.ErrReadOnly
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	if exp != nil {
		if h := j.st.heads[drafts[0].Channel()]; h.seq != exp.Head {
			return nil, fmt.Errorf("mem journal: expected head %d, head is %d: %w", exp.Head, h.seq, core.ErrHeadMoved)
		}
		if f := exp.Fence; f != nil {
			var token int64
			if l := j.st.leases[f.Name]; l != nil {
				token = l.token
			}
			if token != f.Token {
				return nil, fmt.Errorf("mem journal: lease %s fence %d, current %d: %w", f.Name, f.Token, token, core.ErrFenced)
			}
		}
	}
	return j.appendLocked(drafts)
}

func (j *MemJournal) appendLocked(drafts []core.Draft) ([]core.Command, error) {
	st := j.st
	ch := drafts[0].Channel()
	head := st.heads[ch]
	seen := map[string]bool{}
	out := make([]core.Command, 0, len(drafts))
	for _, d := range drafts {
		if st.ids[d.ID()] || seen[d.ID()] {
			return nil, fmt.Errorf("mem journal: duplicate command id %s", d.ID())
		}
		seen[d.ID()] = true
		c, err := j.signer.Seal(d, head.seq+1, head.hash)
		if err != nil {
			return nil, err
		}
		head = memHead{seq: c.Seq(), hash: c.Hash()}
		out = append(out, c)
	}
	for _, c := range out {
		st.rows[ch] = append(st.rows[ch], c.Record())
		st.ids[c.ID()] = true
		if c.Run() != "" {
			st.runs[c.Run()] = append(st.runs[c.Run()], runRef{ch, c.Seq()})
		}
	}
	st.heads[ch] = head
	return out, nil
}

// find returns the index of the row of ch at seq. Callers hold st.mu.
func (st *memStore) find(ch core.ChannelKey, seq uint64) (int, bool) {
	rows := st.rows[ch]
	i := sort.Search(len(rows), func(i int) bool { return rows[i].Seq >= seq })
	return i, i < len(rows) && rows[i].Seq == seq
}

// Read implements core.Journal.
func (j *MemJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	i, _ := j.st.find(ch, from)
	rows := j.st.rows[ch][i:]
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	out := make([]core.Command, 0, len(rows))
	for _, r := range rows {
		c, err := core.FromRecord(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ReadRun implements core.Journal.
func (j *MemJournal) ReadRun(ctx context.Context, run string) ([]core.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	refs := slices.Clone(j.st.runs[run])
	sort.SliceStable(refs, func(a, b int) bool {
		if refs[a].ch != refs[b].ch {
			return refs[a].ch < refs[b].ch
		}
		return refs[a].seq < refs[b].seq
	})
	out := make([]core.Command, 0, len(refs))
	for _, r := range refs {
		i, ok := j.st.find(r.ch, r.seq)
		if !ok || j.st.rows[r.ch][i].Run != run {
			continue
		}
		c, err := core.FromRecord(j.st.rows[r.ch][i])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Channels implements core.Journal.
func (j *MemJournal) Channels(ctx context.Context) ([]core.ChannelKey, error) {
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	out := make([]core.ChannelKey, 0, len(j.st.heads))
	for ch := range j.st.heads {
		out = append(out, ch)
	}
	slices.Sort(out)
	return out, nil
}

// Head implements core.Journal.
func (j *MemJournal) Head(ctx context.Context, ch core.ChannelKey) (uint64, core.Hash, error) {
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	h := j.st.heads[ch]
	return h.seq, h.hash, nil
}

// Redact implements core.Journal: the payload is destroyed and the record
// appended in one critical section (the store's transaction).
func (j *MemJournal) Redact(ctx context.Context, seq uint64, record core.Draft) (core.Command, error) {
	return j.redact(ctx, seq, nil, record)
}

// Restate implements core.Restater: Redact, with payload kept in place.
func (j *MemJournal) Restate(ctx context.Context, seq uint64, payload []byte, record core.Draft) (core.Command, error) {
	if payload == nil {
		return core.Command{}, fmt.Errorf("restate seq %d: no payload", seq)
	}
	return j.redact(ctx, seq, payload, record)
}

func (j *MemJournal) redact(ctx context.Context, seq uint64, payload []byte, record core.Draft) (core.Command, error) {
	if err := ctx.Err(); err != nil {
		return core.Command{}, err
	}
	if j.signer == nil {
		return core.Command{}, core.ErrReadOnly
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	ch := record.Channel()
	i, ok := j.st.find(ch, seq)
	if !ok {
		return core.Command{}, fmt.Errorf("redact seq %d of %s: %w", seq, ch, core.ErrNotFound)
	}
	if j.st.rows[ch][i].Redacted {
		return core.Command{}, fmt.Errorf("redact seq %d of %s: already redacted", seq, ch)
	}
	target, err := core.FromRecord(j.st.rows[ch][i])
	if err != nil {
		return core.Command{}, err
	}
	check := core.CheckRedaction(target, record)
	if payload != nil {
		check = core.CheckRestatement(target, payload, record)
	}
	if check != nil {
		return core.Command{}, check
	}
	cmds, err := j.appendLocked([]core.Draft{record})
	if err != nil {
		return core.Command{}, err
	}
	j.st.rows[ch][i].Payload, j.st.rows[ch][i].Redacted = bytes.Clone(payload), true
	return cmds[0], nil
}

// All returns every command of ch (a snapshot).
func (j *MemJournal) All(ch core.ChannelKey) []core.Command {
	cmds, err := j.Read(context.Background(), ch, 1, 0)
	if err != nil {
		panic(err)
	}
	return cmds
}

// Count returns how many commands of kind k the whole journal holds.
func (j *MemJournal) Count(k core.Kind) int {
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	n := 0
	for _, rows := range j.st.rows {
		for _, r := range rows {
			if r.Kind == k.String() {
				n++
			}
		}
	}
	return n
}

// MemTamper edits a MemJournal's stored rows behind its back, as an
// attacker with database access would (journaltest.Tamper).
type MemTamper struct{ st *memStore }

// Tamper returns the journal's tamper hooks.
func (j *MemJournal) Tamper() MemTamper { return MemTamper{st: j.st} }

func (t MemTamper) edit(ch core.ChannelKey, seq uint64, fn func(r *core.Record)) error {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	i, ok := t.st.find(ch, seq)
	if !ok {
		return fmt.Errorf("tamper %s seq %d: %w", ch, seq, core.ErrNotFound)
	}
	fn(&t.st.rows[ch][i])
	return nil
}

func flip(b []byte, i int) {
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0xFF
}

func (t MemTamper) FlipPayloadByte(_ context.Context, ch core.ChannelKey, seq uint64, i int) error {
	return t.edit(ch, seq, func(r *core.Record) { r.Payload = slices.Clone(r.Payload); flip(r.Payload, i) })
}

func (t MemTamper) FlipSigByte(_ context.Context, ch core.ChannelKey, seq uint64, i int) error {
	return t.edit(ch, seq, func(r *core.Record) { r.Sig = slices.Clone(r.Sig); flip(r.Sig, i) })
}

func (t MemTamper) SetActorID(_ context.Context, ch core.ChannelKey, seq uint64, id string) error {
	return t.edit(ch, seq, func(r *core.Record) { r.Actor.ID = id })
}

func (t MemTamper) Delete(_ context.Context, ch core.ChannelKey, seq uint64) error {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	i, ok := t.st.find(ch, seq)
	if !ok {
		return fmt.Errorf("tamper delete %s seq %d: %w", ch, seq, core.ErrNotFound)
	}
	t.st.rows[ch] = slices.Delete(t.st.rows[ch], i, i+1)
	return nil
}

func (t MemTamper) SwapSeq(_ context.Context, ch core.ChannelKey, a, b uint64) error {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	i, ok1 := t.st.find(ch, a)
	k, ok2 := t.st.find(ch, b)
	if !ok1 || !ok2 {
		return fmt.Errorf("tamper swap %s %d %d: %w", ch, a, b, core.ErrNotFound)
	}
	rows := t.st.rows[ch]
	rows[i].Seq, rows[k].Seq = rows[k].Seq, rows[i].Seq
	sort.Slice(rows, func(x, y int) bool { return rows[x].Seq < rows[y].Seq })
	return nil
}

func (t MemTamper) StoredPayload(_ context.Context, ch core.ChannelKey, seq uint64) ([]byte, error) {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	i, ok := t.st.find(ch, seq)
	if !ok {
		return nil, fmt.Errorf("stored payload %s seq %d: %w", ch, seq, core.ErrNotFound)
	}
	return slices.Clone(t.st.rows[ch][i].Payload), nil
}

func (t MemTamper) MarkRedacted(_ context.Context, ch core.ChannelKey, seq uint64) error {
	return t.edit(ch, seq, func(r *core.Record) { r.Payload, r.Redacted = nil, true })
}

func (t MemTamper) SetKeyID(_ context.Context, ch core.ChannelKey, seq uint64, id string) error {
	return t.edit(ch, seq, func(r *core.Record) { r.Key = id })
}

// ErrCrashed is what a CrashJournal returns after its crash point.
var ErrCrashed = errors.New("coretest: journal crashed")

// CrashJournal wraps a journal and "crashes" after a number of appends: the
// append that reaches the limit succeeds, then OnCrash runs (tests cancel
// the engine there) and every later append fails with ErrCrashed. Reads keep
// working, as they would for the half-dead process's in-flight work.
type CrashJournal struct {
	core.Journal
	mu      sync.Mutex
	after   int
	n       int
	OnCrash func()
}

// NewCrashJournal crashes j after `after` successful appends (0: never).
func NewCrashJournal(j core.Journal, after int) *CrashJournal {
	return &CrashJournal{Journal: j, after: after}
}

// Append implements core.Journal.
func (c *CrashJournal) Append(ctx context.Context, drafts ...core.Draft) ([]core.Command, error) {
	return c.count(func() ([]core.Command, error) { return c.Journal.Append(ctx, drafts...) })
}

// AppendAt implements core.Journal, crashing like Append.
func (c *CrashJournal) AppendAt(ctx context.Context, exp core.Expect, drafts ...core.Draft) ([]core.Command, error) {
	return c.count(func() ([]core.Command, error) { return c.Journal.AppendAt(ctx, exp, drafts...) })
}

// count runs one append unless the journal has crashed, and crashes it
// after the configured number of successes.
func (c *CrashJournal) count(appendFn func() ([]core.Command, error)) ([]core.Command, error) {
	c.mu.Lock()
	if c.after > 0 && c.n >= c.after {
		c.mu.Unlock()
		return nil, ErrCrashed
	}
	cmds, err := appendFn()
	if err == nil {
		c.n++
	}
	crash := c.after > 0 && c.n == c.after && err == nil
	c.mu.Unlock()
	if crash && c.OnCrash != nil {
		c.OnCrash()
	}
	return cmds, err
}

// Appends returns how many appends succeeded.
func (c *CrashJournal) Appends() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
