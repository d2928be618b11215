package memorytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
)

// Harness is what a store gives the suite: a journal, the memory index on
// the same storage and, where the store has a database-level ringfence, a
// way around the code-level one.
type Harness struct {
	Journal  core.Journal
	Index    memory.Index
	Verifier *core.Verifier
	// Bypass runs a raw query inside a channel-bound transaction, with no
	// channel condition at all, and returns the channel of every memory
	// and vector row it can see: only the database's own ringfence (row-
	// level security) stands between it and other channels. nil for stores
	// without one (SQLite: the ringfence is in code only).
	Bypass func(ctx context.Context, ch core.ChannelKey) ([]core.ChannelKey, error)
}

// Dims is the suite's embedding dimension.
const Dims = 64

// Run runs the conformance suite. newHarness is called once per subtest
// (subtests run in parallel and use channels of their own, so harnesses may
// share a database).
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"RememberRecall", testRememberRecall},
		{"RememberValidates", testRememberValidates},
		{"IdempotentOrigin", testIdempotentOrigin},
		{"JournalFirst", testJournalFirst},
		{"Forget", testForget},
		{"Delete", testDelete},
		{"ListPages", testListPages},
		{"Correct", testCorrect},
		{"Rebuild", testRebuild},
		{"RebuildAfterOutsideRedaction", testRebuildOutsideRedaction},
		{"ModelChange", testModelChange},
		{"Degraded", testDegraded},
		{"FloorRuntime", testFloorRuntime},
		{"Budget", testBudget},
		{"Dedup", testDedup},
		{"SameTextOnce", testSameTextOnce},
		{"Links", testLinks},
		{"Ringfence", testRingfence},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			tc.fn(t, newFixture(t, h))
		})
	}
}

// fixture is one subtest's world: a service over the harness, a boundary
// and a run that "calls the remember tool".
type fixture struct {
	t   *testing.T
	h   Harness
	b   *core.Boundary
	emb *Embedder
	svc *memory.Service
	run string
	tag string // makes channel names unique per subtest
}

func newFixture(t *testing.T, h Harness) *fixture {
	b := core.NewBoundary(nil)
	f := &fixture{t: t, h: h, b: b, emb: NewEmbedder(Dims), run: "run-" + b.NewID(),
		tag: strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))}
	f.svc = f.service(f.emb, memory.Options{})
	return f
}

// service builds another service over the same journal and index.
func (f *fixture) service(emb core.Embedder, o memory.Options) *memory.Service {
	f.t.Helper()
	cfg := memory.Config{Journal: f.h.Journal, Boundary: f.b, Index: f.h.Index, Options: o}
	if emb != nil {
		cfg.Embedder = emb
	}
	s, err := memory.New(cfg)
	if err != nil {
		f.t.Fatalf("memory.New: %v", err)
	}
	return s
}

func (f *fixture) key(name string) core.ChannelKey {
	return core.Scope{Platform: "test", Workspace: "w", Channel: f.tag + "-" + name}.Key()
}

// prov is the provenance the remember tool gives: a fresh origin command.
func (f *fixture) prov() core.Provenance {
	return core.Provenance{Origin: f.b.NewID(), Actor: core.Actor{Type: core.ActorAgent, ID: f.run},
		Trust: string(core.Trusted), Derivation: "remember tool on behalf of U1"}
}

func (f *fixture) remember(ch *memory.Channel, text string) string {
	f.t.Helper()
	id, err := ch.Remember(f.t.Context(), text, f.prov())
	if err != nil {
		f.t.Fatalf("remember %q: %v", text, err)
	}
	return id
}

func (f *fixture) recall(ch *memory.Channel, q string) memory.Result {
	f.t.Helper()
	r, err := ch.RecallResult(f.t.Context(), q, 0)
	if err != nil {
		f.t.Fatalf("recall %q: %v", q, err)
	}
	return r
}

func ids(r memory.Result) []string {
	out := make([]string, len(r.Snippets))
	for i, s := range r.Snippets {
		out[i] = s.ID
	}
	return out
}

// commands returns ch's journal commands of kind k.
func (f *fixture) commands(ch core.ChannelKey, k core.Kind) []core.Command {
	f.t.Helper()
	all, err := f.h.Journal.Read(f.t.Context(), ch, 1, 0)
	if err != nil {
		f.t.Fatalf("read journal: %v", err)
	}
	var out []core.Command
	for _, c := range all {
		if c.Kind() == k {
			out = append(out, c)
		}
	}
	return out
}

func (f *fixture) verify(ch core.ChannelKey) {
	f.t.Helper()
	if f.h.Verifier == nil {
		return
	}
	if _, err := core.VerifyChannel(f.t.Context(), f.h.Journal, f.h.Verifier, ch); err != nil {
		f.t.Fatalf("journal of %s does not verify: %v", ch, err)
	}
}

func (f *fixture) snapshot(ch core.ChannelKey) memory.Snapshot {
	f.t.Helper()
	s, err := f.h.Index.Snapshot(f.t.Context(), ch)
	if err != nil {
		f.t.Fatalf("snapshot %s: %v", ch, err)
	}
	return s
}

func testRememberRecall(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	freeze := f.remember(ch, "The release freeze starts every Thursday at 15:00 UTC.")
	f.remember(ch, "Ann prefers tea over coffee.")
	f.remember(ch, "The staging database is called kestrel.")
	f.remember(ch, "Quarterly budget reviews happen in the big room.")

	r := f.recall(ch, "when does the release freeze start?")
	if len(r.Snippets) == 0 || r.Snippets[0].ID != freeze {
		t.Fatalf("recall: want %s first, got %+v", freeze, r.Snippets)
	}
	top := r.Snippets[0]
	if !top.Dense || !top.Lexical || top.Similarity < memory.DefaultFloor || top.Channel != k {
		t.Errorf("top snippet %+v: want dense and lexical, similarity over the floor, channel %s", top, k)
	}
	if r.Degraded || r.Model != f.emb.Model() || r.Tokens != (r.Chars+3)/4 || r.Latency <= 0 {
		t.Errorf("result: degraded %v model %q tokens %d chars %d latency %v", r.Degraded, r.Model, r.Tokens, r.Chars, r.Latency)
	}
	// The core port gives the same, as core.Recalled.
	got, err := ch.Recall(ctx, "staging database name", 6)
	if err != nil || len(got) == 0 || !strings.Contains(got[0].Text, "kestrel") {
		t.Fatalf("Recall: %+v, %v", got, err)
	}

	// memory.written is journaled with the stamped provenance.
	ws := f.commands(k, core.KindMemoryWritten)
	if len(ws) != 4 {
		t.Fatalf("memory.written commands: %d, want 4", len(ws))
	}
	w := ws[0]
	p, err := core.Decode[*core.MemoryWritten](w)
	if err != nil {
		t.Fatal(err)
	}
	if p.MemoryID != freeze || w.Actor().Type != core.ActorAgent || w.Actor().ID != f.run || w.Run() != f.run ||
		w.Cause() != p.Provenance.Origin || p.Provenance.Trust != "trusted" || p.Provenance.Actor.Platform != "test" {
		t.Errorf("memory.written %v: actor %+v run %q cause %q payload %+v", w, w.Actor(), w.Run(), w.Cause(), p)
	}
	e, err := ch.Get(ctx, freeze)
	if err != nil || e.Seq != w.Seq() || !e.CreatedAt.Equal(w.At()) || e.Provenance != p.Provenance || !e.Live() {
		t.Errorf("index entry %+v (%v) does not match the journal", e, err)
	}
	f.verify(k)
}

func testRememberValidates(t *testing.T, f *fixture) {
	ctx := t.Context()
	ch := f.svc.For(f.key("c"))
	if _, err := ch.Remember(ctx, "  \n\t ", f.prov()); !errors.Is(err, memory.ErrEmpty) {
		t.Errorf("blank: %v, want ErrEmpty", err)
	}
	if _, err := ch.Remember(ctx, strings.Repeat("x", memory.DefaultMaxTextLen+1), f.prov()); !errors.Is(err, memory.ErrTooLong) {
		t.Errorf("too long: %v, want ErrTooLong", err)
	}
	bad := f.prov()
	bad.Trust = "very"
	if _, err := ch.Remember(ctx, "fine text", bad); err == nil {
		t.Error("unknown trust class accepted")
	}
	id := f.remember(ch, "  tabs\tand\x00 nul\x07 bytes  ")
	e, err := ch.Get(ctx, id)
	if err != nil || e.Text != "tabs\tand nul bytes" {
		t.Errorf("cleaned text %q (%v)", e.Text, err)
	}
	// No provenance at all: the system, untrusted.
	id, err = ch.Remember(ctx, "operator note", core.Provenance{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ = ch.Get(ctx, id)
	if e.Provenance.Actor.Type != core.ActorSystem || e.Provenance.Trust != "untrusted" || e.Provenance.Derivation != "remember" {
		t.Errorf("default provenance %+v", e.Provenance)
	}
	if _, err := f.svc.For("not-a-key").Remember(ctx, "x", f.prov()); err == nil {
		t.Error("handle of an invalid channel key accepted a remember")
	}
}

func testIdempotentOrigin(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	prov := f.prov()
	a, err := ch.Remember(ctx, "deploys need two approvals", prov)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ch.Remember(ctx, "deploys need two approvals", prov)
	if err != nil || a != b {
		t.Fatalf("same origin twice: %s then %s (%v)", a, b, err)
	}
	// Concurrent re-executions store once too.
	p2 := f.prov()
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			id, err := ch.Remember(ctx, "the wiki lives at wiki.internal", p2)
			if err != nil {
				t.Error(err)
			}
			got[i] = id
		})
	}
	wg.Wait()
	if len(slices.Compact(slices.Sorted(slices.Values(got)))) != 1 {
		t.Errorf("concurrent remembers of one origin gave ids %v", got)
	}

	// A crash after journaling, before indexing: the journal holds the
	// memory, the index does not. The re-executed call finds it.
	for _, actor := range []core.Actor{{Type: core.ActorAgent, ID: f.run}, {Type: core.ActorSystem, ID: "cli"}} {
		p := core.Provenance{Origin: f.b.NewID(), Actor: actor, Trust: "trusted", Derivation: "remember"}
		p.Actor.Platform = "test"
		sc, _ := core.ParseChannelKey(string(k))
		mid := f.b.NewID()
		var d core.Draft
		if actor.Type == core.ActorAgent {
			d, err = f.b.Agent(actor.ID, sc, core.Meta{Cause: p.Origin}, &core.MemoryWritten{MemoryID: mid, Text: "crashed before indexing " + string(actor.Type), Provenance: p})
		} else {
			d, err = f.b.System(actor.ID, sc, core.Meta{Cause: p.Origin}, &core.MemoryWritten{MemoryID: mid, Text: "crashed before indexing " + string(actor.Type), Provenance: p})
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.h.Journal.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
		id, err := ch.Remember(ctx, "crashed before indexing "+string(actor.Type), p)
		if err != nil || id != mid {
			t.Fatalf("%s re-execution: got %s (%v), want the journaled %s", actor.Type, id, err, mid)
		}
		if e, err := ch.Get(ctx, mid); err != nil || !e.Live() {
			t.Fatalf("journaled memory not indexed on retry: %+v %v", e, err)
		}
	}
	if n := len(f.commands(k, core.KindMemoryWritten)); n != 4 {
		t.Errorf("memory.written commands: %d, want 4 (one per origin)", n)
	}
	if st := f.svc.Stats(); st.RememberDuplicates < 3 {
		t.Errorf("stats: %d duplicates", st.RememberDuplicates)
	}
}

// failingIndex fails Insert while fail is set.
type failingIndex struct {
	memory.Index
	fail atomic.Bool
}

func (fi *failingIndex) Insert(ctx context.Context, e memory.Entry) (memory.Entry, bool, error) {
	if fi.fail.Load() {
		return memory.Entry{}, false, errors.New("index down")
	}
	return fi.Index.Insert(ctx, e)
}

func testJournalFirst(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	fi := &failingIndex{Index: f.h.Index}
	svc, err := memory.New(memory.Config{Journal: f.h.Journal, Boundary: f.b, Index: fi, Embedder: f.emb})
	if err != nil {
		t.Fatal(err)
	}
	ch := svc.For(k)
	prov := f.prov()
	fi.fail.Store(true)
	if _, err := ch.Remember(ctx, "journal before index", prov); err == nil {
		t.Fatal("remember succeeded with the index down")
	}
	if n := len(f.commands(k, core.KindMemoryWritten)); n != 1 {
		t.Fatalf("memory.written after a failed index: %d, want 1 (the journal comes first)", n)
	}
	fi.fail.Store(false)
	id, err := ch.Remember(ctx, "journal before index", prov)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.commands(k, core.KindMemoryWritten)); n != 1 {
		t.Errorf("the retry journaled again: %d memory.written", n)
	}
	if r := f.recall(ch, "journal index"); !slices.Contains(ids(r), id) {
		t.Errorf("repaired memory not recalled: %v", ids(r))
	}
}

func testForget(t *testing.T, f *fixture) {
	ctx := t.Context()
	k, other := f.key("c"), f.key("other")
	ch := f.svc.For(k)
	id := f.remember(ch, "The coffee machine on floor 3 is broken.")
	keep := f.remember(ch, "The coffee beans are in the left cupboard.")
	foreign := f.remember(f.svc.For(other), "The coffee in the other channel is great.")

	if err := ch.Forget(ctx, id, "fixed now"); err != nil {
		t.Fatal(err)
	}
	r := f.recall(ch, "coffee machine broken")
	if slices.Contains(ids(r), id) || !slices.Contains(ids(r), keep) {
		t.Errorf("after forget: recalled %v", ids(r))
	}
	e, err := ch.Get(ctx, id)
	if err != nil || !e.Forgotten || e.ForgetReason != "fixed now" || e.Text == "" || e.Deleted {
		t.Errorf("forgotten entry %+v %v: want forgotten, reason kept, text kept for admins", e, err)
	}
	if ls, _ := ch.List(ctx, memory.ListQuery{}); slices.ContainsFunc(ls, func(e memory.Entry) bool { return e.ID == id }) {
		t.Error("List shows a forgotten memory by default")
	}
	if ls, _ := ch.List(ctx, memory.ListQuery{IncludeForgotten: true}); !slices.ContainsFunc(ls, func(e memory.Entry) bool { return e.ID == id }) {
		t.Error("List with IncludeForgotten misses the forgotten memory")
	}
	for _, v := range f.snapshot(k).Vectors {
		if v.MemoryID == id {
			t.Error("a forgotten memory kept its vector")
		}
	}
	fs := f.commands(k, core.KindMemoryForgotten)
	if len(fs) != 1 {
		t.Fatalf("memory.forgotten commands: %d", len(fs))
	}
	if err := ch.Forget(ctx, id, "again"); err != nil {
		t.Errorf("forget twice: %v", err)
	}
	if len(f.commands(k, core.KindMemoryForgotten)) != 1 {
		t.Error("forgetting a forgotten memory journaled again")
	}
	if err := ch.Forget(ctx, "01NOSUCHMEMORY", ""); !errors.Is(err, core.ErrNotFound) || !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("forget unknown id: %v", err)
	}
	// Another channel's id is not found from here, and stays live there.
	if err := ch.Forget(ctx, foreign, "reach across"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("forget another channel's memory: %v", err)
	}
	if e, err := f.svc.For(other).Get(ctx, foreign); err != nil || !e.Live() {
		t.Errorf("other channel's memory after a cross-channel forget: %+v %v", e, err)
	}
	f.verify(k)
}

func testDelete(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	admin := core.Actor{Type: core.ActorHuman, ID: "UADMIN"}
	id := f.remember(ch, "Bob's home address is 12 Quillfeather Lane.")
	keep := f.remember(ch, "Bob's desk is next to the window.")
	e, _ := ch.Get(ctx, id)

	if err := ch.Delete(ctx, admin, id, "Bob asked"); err != nil {
		t.Fatal(err)
	}
	// Index: text, provenance and vectors gone; a tombstone remains.
	got, err := ch.Get(ctx, id)
	if err != nil || !got.Deleted || !got.Forgotten || got.Text != "" || got.Provenance != (core.Provenance{}) || got.ForgetReason != "" || got.Seq != e.Seq {
		t.Errorf("deleted entry %+v %v", got, err)
	}
	for _, v := range f.snapshot(k).Vectors {
		if v.MemoryID == id {
			t.Error("a deleted memory kept its vector")
		}
	}
	if r := f.recall(ch, "Quillfeather address"); slices.Contains(ids(r), id) {
		t.Error("a deleted memory is recalled")
	}
	cands, err := f.h.Index.Search(ctx, memory.SearchQuery{Channel: k, Terms: []string{"quillfeather"}, K: 10})
	if err != nil || len(cands.Lexical) != 0 {
		t.Errorf("lexical index still matches deleted text: %+v %v", cands.Lexical, err)
	}
	if r := f.recall(ch, "Bob desk window"); !slices.Contains(ids(r), keep) {
		t.Error("the other memory went too")
	}
	// Journal: the memory.written payload is destroyed, the act recorded
	// twice over (command.redacted and memory.redacted), the chain intact.
	cmds, err := f.h.Journal.Read(ctx, k, e.Seq, 1)
	if err != nil || len(cmds) != 1 || !cmds[0].Redacted() || cmds[0].Kind() != core.KindMemoryWritten {
		t.Fatalf("memory.written after delete: %v %v", cmds, err)
	}
	if strings.Contains(string(cmds[0].RawPayload()), "Quillfeather") {
		t.Error("the journal still holds the deleted text")
	}
	crs := f.commands(k, core.KindCommandRedacted)
	mrs := f.commands(k, core.KindMemoryRedacted)
	if len(crs) != 1 || len(mrs) != 1 {
		t.Fatalf("command.redacted %d, memory.redacted %d; want 1 each", len(crs), len(mrs))
	}
	if p, _ := core.Decode[*core.MemoryRedacted](mrs[0]); p.MemoryID != id || p.Seq != e.Seq || mrs[0].Actor().ID != "UADMIN" {
		t.Errorf("memory.redacted %+v by %+v", p, mrs[0].Actor())
	}
	f.verify(k)
	// Idempotent; the kept memory can still be forgotten, then deleted.
	if err := ch.Delete(ctx, admin, id, "again"); err != nil || len(f.commands(k, core.KindMemoryRedacted)) != 1 {
		t.Errorf("delete twice: %v", err)
	}
	if err := ch.Forget(ctx, keep, "moved"); err != nil {
		t.Fatal(err)
	}
	if err := ch.Delete(ctx, admin, keep, ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := ch.Get(ctx, keep); !got.Deleted || got.ForgottenAt.IsZero() || got.DeletedAt.Before(got.ForgottenAt) {
		t.Errorf("forgotten then deleted: %+v", got)
	}
	f.verify(k)
}

// testListPages: the `memories` chat command pages through a channel's
// live memories, newest first, by offset, and never sees another channel's.
func testListPages(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	var want []string // newest first
	for i := range 7 {
		want = append([]string{f.remember(ch, fmt.Sprintf("Fact number %d about the garden.", i))}, want...)
	}
	f.remember(f.svc.For(f.key("other")), "Another channel's fact.")
	if err := ch.Forget(ctx, want[2], "wrong"); err != nil {
		t.Fatal(err)
	}
	live := slices.Delete(slices.Clone(want), 2, 3)
	var got []string
	for off := 0; ; off += 3 {
		page, err := ch.ListMemories(ctx, off, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page {
			got = append(got, m.ID)
			if m.Text == "" || m.At.IsZero() || m.By.Type != core.ActorAgent || m.By.ID != f.run || m.Forgotten || m.Deleted {
				t.Errorf("listed %+v", m)
			}
		}
		if len(page) < 3 {
			break
		}
	}
	if !slices.Equal(got, live) {
		t.Errorf("pages = %v, want %v (newest first, live only)", got, live)
	}
	if page, err := ch.ListMemories(ctx, 100, 3); err != nil || len(page) != 0 {
		t.Errorf("past the end: %v %v", page, err)
	}
	// Offset applies after the other conditions, on the index too.
	es, err := f.h.Index.List(ctx, k, memory.ListQuery{IncludeForgotten: true, Offset: 2, Limit: 2})
	if err != nil || len(es) != 2 || es[0].ID != want[2] || es[1].ID != want[3] {
		t.Errorf("index list offset 2 = %+v %v", es, err)
	}
	d, err := ch.DescribeMemory(ctx, want[2])
	if err != nil || !d.Forgotten || d.ID != want[2] {
		t.Errorf("describe a forgotten memory = %+v %v", d, err)
	}
	if _, err := f.svc.For(f.key("other")).DescribeMemory(ctx, want[0]); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("describe across channels = %v, want not found", err)
	}
}

func testCorrect(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	old := f.remember(ch, "The offsite is in Lisbon in May.")
	admin := core.Actor{Type: core.ActorHuman, ID: "UADMIN"}
	nid, err := ch.Correct(ctx, admin, old, "The offsite is in Porto in June.")
	if err != nil {
		t.Fatal(err)
	}
	r := f.recall(ch, "where is the offsite")
	if !slices.Contains(ids(r), nid) || slices.Contains(ids(r), old) {
		t.Errorf("after correction recalled %v (new %s, old %s)", ids(r), nid, old)
	}
	e, _ := ch.Get(ctx, nid)
	if e.Provenance.Derivation != "correction of "+old || e.Provenance.Actor.ID != "UADMIN" || e.Provenance.Trust != "trusted" {
		t.Errorf("correction provenance %+v", e.Provenance)
	}
	if o, _ := ch.Get(ctx, old); !o.Forgotten || !strings.Contains(o.ForgetReason, nid) {
		t.Errorf("corrected memory %+v", o)
	}
	if _, err := ch.Correct(ctx, admin, old, "again"); err == nil {
		t.Error("corrected a forgotten memory")
	}
}

// populate writes a mixed history: remembers, forgets, deletes, a
// correction, a link.
func (f *fixture) populate(k core.ChannelKey) {
	f.t.Helper()
	ctx := f.t.Context()
	ch := f.svc.For(k)
	var mids []string
	for i := range 12 {
		mids = append(mids, f.remember(ch, fmt.Sprintf("fact %d: the %s service runs on port %d", i, []string{"billing", "search", "auth", "mail"}[i%4], 8000+i)))
	}
	admin := core.Actor{Type: core.ActorHuman, ID: "UADMIN"}
	for _, i := range []int{1, 4, 7} {
		if err := ch.Forget(f.t.Context(), mids[i], fmt.Sprintf("stale %d", i)); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, i := range []int{2, 7} {
		if err := ch.Delete(ctx, admin, mids[i], "privacy"); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := ch.Correct(ctx, admin, mids[3], "fact 3: the auth service moved to port 9443"); err != nil {
		f.t.Fatal(err)
	}
	if err := f.svc.Link(ctx, core.Actor{Type: core.ActorSystem, ID: "cli"}, k, f.key("partner")); err != nil {
		f.t.Fatal(err)
	}
}

func testRebuild(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	f.populate(k)
	live := f.snapshot(k)
	if len(live.Entries) != 13 || len(live.Links) != 1 {
		t.Fatalf("live snapshot: %d entries, links %v", len(live.Entries), live.Links)
	}

	// The live index already is what the journal says.
	rep, err := f.svc.Rebuild(ctx, k, memory.RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed {
		t.Errorf("rebuild of a consistent index changed it: %s", memory.SnapshotDiff(live, f.snapshot(k)))
	}
	if rep.Live != 8 || rep.Forgotten != 3 || rep.Deleted != 2 || rep.Links != 1 {
		t.Errorf("report %+v: want 8 live, 3 forgotten (1, 4, 3 corrected), 2 deleted", rep)
	}

	// From nothing: row for row the live state, vectors re-embedded.
	if err := f.h.Index.Replace(ctx, k, memory.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if s := f.snapshot(k); len(s.Entries) != 0 {
		t.Fatal("index not emptied")
	}
	rep, err = f.svc.Rebuild(ctx, k, memory.RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := memory.SnapshotDiff(live, f.snapshot(k)); d != "" {
		t.Fatalf("rebuilt index differs from the live one: %s", d)
	}
	if !rep.Changed || rep.Embedded != 8 || rep.Unembedded != 0 {
		t.Errorf("report %+v", rep)
	}
	// Reembed gives the same (the embedder is deterministic); a dry run
	// leaves the index alone.
	if _, err := f.svc.Rebuild(ctx, k, memory.RebuildOptions{Reembed: true}); err != nil {
		t.Fatal(err)
	}
	if d := memory.SnapshotDiff(live, f.snapshot(k)); d != "" {
		t.Fatalf("re-embedded index differs: %s", d)
	}
	if err := f.h.Index.Replace(ctx, k, memory.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.svc.Rebuild(ctx, k, memory.RebuildOptions{DryRun: true}); err != nil || !rep.Changed || len(f.snapshot(k).Entries) != 0 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	// Without an embedder: everything but the vectors, which a later
	// rebuild with one restores.
	if _, err := f.service(nil, memory.Options{}).Rebuild(ctx, k, memory.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	s := f.snapshot(k)
	if len(s.Vectors) != 0 || len(s.Entries) != len(live.Entries) {
		t.Fatalf("lexical-only rebuild: %d entries, %d vectors", len(s.Entries), len(s.Vectors))
	}
	var buf strings.Builder
	if err := memory.RebuildCommand(ctx, f.svc, memory.RebuildArgs{Channel: string(k)}, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "8 live") {
		t.Errorf("RebuildCommand output %q", buf.String())
	}
	if d := memory.SnapshotDiff(live, f.snapshot(k)); d != "" {
		t.Fatalf("rebuilt index differs after restoring vectors: %s", d)
	}
	if err := memory.RebuildCommand(ctx, f.svc, memory.RebuildArgs{}, &buf); err == nil {
		t.Error("RebuildCommand without --channel or --all succeeded")
	}
	f.verify(k)
}

// testRebuildOutsideRedaction: a privacy deletion made on the journal
// directly (Journal.Redact of a memory.written, no memory.redacted) is
// carried into the index by a rebuild: the memory becomes a tombstone.
func testRebuildOutsideRedaction(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	id := f.remember(ch, "Dana's phone number is 555 0199.")
	keep := f.remember(ch, "Dana sits in room 4.")
	e, _ := ch.Get(ctx, id)
	cmds, err := f.h.Journal.Read(ctx, k, e.Seq, 1)
	if err != nil || len(cmds) != 1 {
		t.Fatal(cmds, err)
	}
	sc, _ := core.ParseChannelKey(string(k))
	d, err := f.b.System("operator", sc, core.Meta{}, &core.CommandRedacted{Seq: e.Seq, ID: cmds[0].ID(), Reason: "erasure request"})
	if err != nil {
		t.Fatal(err)
	}
	red, err := f.h.Journal.Redact(ctx, e.Seq, d)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := f.svc.Rebuild(ctx, k, memory.RebuildOptions{})
	if err != nil || !rep.Changed || rep.Deleted != 1 || rep.Live != 1 {
		t.Fatalf("rebuild: %+v %v", rep, err)
	}
	got, err := ch.Get(ctx, id)
	if err != nil || !got.Deleted || got.Text != "" || !got.DeletedAt.Equal(red.At()) {
		t.Errorf("memory redacted on the journal, after rebuild: %+v %v", got, err)
	}
	if r := f.recall(ch, "Dana phone number"); slices.Contains(ids(r), id) || !slices.Contains(ids(r), keep) {
		t.Errorf("recall after rebuild: %v", ids(r))
	}
	// A second rebuild changes nothing; one from an empty index cannot
	// name the memory any more (its id was in the destroyed payload).
	if rep, err := f.svc.Rebuild(ctx, k, memory.RebuildOptions{}); err != nil || rep.Changed {
		t.Errorf("second rebuild: %+v %v", rep, err)
	}
	if err := f.h.Index.Replace(ctx, k, memory.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.svc.Rebuild(ctx, k, memory.RebuildOptions{}); err != nil || rep.Orphans != 1 || rep.Live != 1 || rep.Deleted != 0 {
		t.Errorf("rebuild from nothing: %+v %v", rep, err)
	}
	f.verify(k)
}

func testModelChange(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	id := f.remember(f.svc.For(k), "the car is parked in bay seven")
	v2 := f.emb.WithModel("bow-64-v2")
	svc2 := f.service(v2, memory.Options{})
	// The new model has no index yet: its dense cue finds nothing, and
	// vectors never mix across models.
	r := f.recall(svc2.For(k), "automobile")
	if len(r.Snippets) != 0 || r.Model != "bow-64-v2" {
		t.Errorf("new model before rebuild: %+v", r)
	}
	rep, err := svc2.Rebuild(ctx, k, memory.RebuildOptions{})
	if err != nil || rep.Embedded != 1 || rep.Reused != 1 {
		t.Fatalf("rebuild with a new model: %+v %v", rep, err)
	}
	models := []string{}
	for _, v := range f.snapshot(k).Vectors {
		models = append(models, v.Model)
	}
	if !slices.Equal(models, []string{"bow-64", "bow-64-v2"}) {
		t.Errorf("vectors after the model change: %v (the old index stays beside the new)", models)
	}
	if r := f.recall(svc2.For(k), "automobile"); !slices.Contains(ids(r), id) {
		t.Errorf("new model after rebuild: %v", ids(r))
	}
}

func testDegraded(t *testing.T, f *fixture) {
	k := f.key("c")
	f.remember(f.svc.For(k), "The car is blue.")
	lex := f.remember(f.svc.For(k), "Lunch orders go in the food channel.")

	// Healthy: the dense cue finds the car without a shared word.
	if r := f.recall(f.svc.For(k), "automobile"); r.Degraded || len(r.Snippets) != 1 {
		t.Fatalf("healthy semantic recall: %+v", r)
	}
	// No embedder: lexical only, and it says so.
	plain := f.service(nil, memory.Options{})
	if !plain.Degraded() {
		t.Error("a service without an embedder does not report Degraded")
	}
	r := f.recall(plain.For(k), "automobile")
	if !r.Degraded || len(r.Snippets) != 0 {
		t.Errorf("no embedder, semantic query: %+v", r)
	}
	r = f.recall(plain.For(k), "lunch orders")
	if !r.Degraded || !slices.Equal(ids(r), []string{lex}) || r.Snippets[0].Dense || r.Model != "" {
		t.Errorf("no embedder, lexical query: %+v", r)
	}
	recalled, degraded, err := plain.For(k).RecallWithStatus(t.Context(), "lunch", 3)
	if err != nil || !degraded || len(recalled) != 1 {
		t.Errorf("RecallWithStatus: %v %v %v", recalled, degraded, err)
	}
	// A failing embedder degrades the recall, not the call; remember still
	// works (lexically) and a rebuild embeds the memory later.
	f.emb.Fail(true)
	r = f.recall(f.svc.For(k), "lunch orders")
	if !r.Degraded || len(r.Snippets) != 1 {
		t.Errorf("failing embedder: %+v", r)
	}
	late := f.remember(f.svc.For(k), "The vehicle needs new tyres.")
	f.emb.Fail(false)
	if r := f.recall(f.svc.For(k), "tyres"); !slices.Contains(ids(r), late) {
		t.Errorf("memory written while the embedder was down not recalled lexically: %v", ids(r))
	}
	rep, err := f.svc.Rebuild(t.Context(), k, memory.RebuildOptions{})
	if err != nil || rep.Embedded != 1 {
		t.Errorf("rebuild after the outage: %+v %v", rep, err)
	}
	st := f.svc.Stats()
	if st.DegradedRecalls < 1 || st.EmbedErrors < 2 {
		t.Errorf("stats: %+v", st)
	}
}

func testFloorRuntime(t *testing.T, f *fixture) {
	k := f.key("c")
	ch := f.svc.For(k)
	id := f.remember(ch, "The car is blue.")
	// "automobile colour" shares no word with the memory: only the dense
	// cue (concepts car, color vs car, blue: similarity ≈ 0.5) can find it.
	r := f.recall(ch, "automobile colour")
	if !slices.Equal(ids(r), []string{id}) || !r.Snippets[0].Dense || r.Snippets[0].Lexical {
		t.Fatalf("at the default floor: %+v", r)
	}
	sim := r.Snippets[0].Similarity
	if err := f.svc.SetFloor(sim + 0.01); err != nil {
		t.Fatal(err)
	}
	r = f.recall(ch, "automobile colour")
	if len(r.Snippets) != 0 || r.BelowFloor != 1 || r.Floor != sim+0.01 || r.TopSimilarity != sim {
		t.Errorf("above the floor: %+v", r)
	}
	if err := f.svc.SetFloor(memory.DefaultFloor); err != nil {
		t.Fatal(err)
	}
	if r = f.recall(ch, "automobile colour"); len(r.Snippets) != 1 {
		t.Errorf("floor restored: %+v", r)
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if err := f.svc.SetFloor(bad); err == nil {
			t.Errorf("SetFloor(%v) accepted", bad)
		}
	}
	if f.svc.Floor() != memory.DefaultFloor {
		t.Errorf("floor %v", f.svc.Floor())
	}
}

func testBudget(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	opt := f.svc.Options()
	for i := range 30 {
		f.remember(ch, fmt.Sprintf("invoice %d for the mail project: ", i)+strings.Repeat("padding words about invoices ", 50))
	}
	r, err := ch.RecallResult(ctx, "invoice mail project", 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Snippets) != opt.PerQuery {
		t.Errorf("one query returned %d snippets, want the per-query cap %d", len(r.Snippets), opt.PerQuery)
	}
	got, _ := ch.Recall(ctx, "invoice", 20)
	if len(got) != opt.PerQuery {
		t.Errorf("Recall(limit 20) returned %d", len(got))
	}
	r, err = ch.RecallTurn(ctx, "invoice", "mail project", "padding words", "invoices 3", "project invoice 7")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Snippets) != opt.MaxSnippets {
		t.Errorf("turn of 5 queries injected %d snippets, want %d", len(r.Snippets), opt.MaxSnippets)
	}
	seen := map[string]bool{}
	chars := 0
	for _, s := range r.Snippets {
		if seen[s.ID] {
			t.Errorf("snippet %s injected twice in one turn", s.ID)
		}
		seen[s.ID] = true
		n := utf8.RuneCountInString(s.Text)
		if n > opt.MaxChars || !strings.HasSuffix(s.Text, "…") {
			t.Errorf("snippet of %d characters (cap %d): %q", n, opt.MaxChars, s.Text[:20])
		}
		chars += n
	}
	if r.Chars != chars || r.Tokens > opt.MaxSnippets*opt.MaxChars/4 {
		t.Errorf("cost: %d chars (counted %d), %d tokens", r.Chars, chars, r.Tokens)
	}
}

// The same note twice is one memory: the second remember answers with the
// first one's id (core.DuplicateMemoryError) and journals nothing; case and
// spacing do not make a note new, a forgotten note does not count, and
// another channel's note is another channel's.
func testSameTextOnce(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	ch := f.svc.For(k)
	first := f.remember(ch, "The launch moved to Friday")
	f.remember(ch, "the launch moved to Friday afternoon") // a different note
	before := len(f.commands(k, core.KindMemoryWritten))
	for _, again := range []string{"The launch moved to Friday", "  the LAUNCH   moved to friday "} {
		id, err := ch.Remember(ctx, again, f.prov())
		var dup *core.DuplicateMemoryError
		if !errors.As(err, &dup) || dup.ID != first || id != first {
			t.Fatalf("remember %q again: id %q, err %v; want DuplicateMemoryError{%s}", again, id, err, first)
		}
	}
	if n := len(f.commands(k, core.KindMemoryWritten)); n != before {
		t.Fatalf("a repeated note was journaled: %d memory.written, want %d", n, before)
	}
	f.remember(f.svc.For(f.key("other")), "The launch moved to Friday")
	if err := ch.Forget(ctx, first, "outdated"); err != nil {
		t.Fatal(err)
	}
	if id := f.remember(ch, "The launch moved to Friday"); id == first {
		t.Fatalf("a forgotten note still counts as remembered")
	}
}

func testDedup(t *testing.T, f *fixture) {
	ctx := t.Context()
	k := f.key("c")
	for i := range 8 {
		f.remember(f.svc.For(k), fmt.Sprintf("runbook step %d: restart the queue worker", i))
	}
	th := f.svc.For(k).Thread("T1")
	first, err := th.RecallTurn(ctx, "queue worker runbook")
	if err != nil {
		t.Fatal(err)
	}
	second, err := th.RecallTurn(ctx, "queue worker runbook")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Snippets) == 0 || len(second.Snippets) == 0 || second.Suppressed != len(first.Snippets) {
		t.Fatalf("first %v, second %v (suppressed %d)", ids(first), ids(second), second.Suppressed)
	}
	for _, id := range ids(second) {
		if slices.Contains(ids(first), id) {
			t.Errorf("memory %s injected twice in thread T1", id)
		}
	}
	// Another thread, or the thread-less handle, is not affected.
	other, _ := f.svc.For(k).Thread("T2").RecallTurn(ctx, "queue worker runbook")
	plain, _ := f.svc.For(k).RecallTurn(ctx, "queue worker runbook")
	if !slices.Equal(ids(other), ids(first)) || !slices.Equal(ids(plain), ids(first)) {
		t.Errorf("T2 %v, no thread %v, T1 first %v", ids(other), ids(plain), ids(first))
	}
}

func testLinks(t *testing.T, f *fixture) {
	ctx := t.Context()
	a, b, c := f.key("a"), f.key("b"), f.key("c")
	pol := core.Policy{Admins: []string{"UADMIN"}, Approvers: []string{"U2"}}
	// Linking journals a whole policy: it must start from the default.
	svc, err := memory.New(memory.Config{Journal: f.h.Journal, Boundary: f.b, Index: f.h.Index, Embedder: f.emb, DefaultPolicy: pol})
	if err != nil {
		t.Fatal(err)
	}
	ma := f.remember(svc.For(a), "alpha team uses the zircon cluster")
	mb := f.remember(svc.For(b), "beta team uses the zircon cluster too")
	mc := f.remember(svc.For(c), "gamma team also mentions the zircon cluster")
	only := func(k core.ChannelKey) []string {
		r := f.recall(svc.For(k), "zircon cluster")
		return slices.Sorted(slices.Values(ids(r)))
	}
	if got := only(a); !slices.Equal(got, []string{ma}) {
		t.Fatalf("before linking a sees %v", got)
	}
	by := core.Actor{Type: core.ActorHuman, ID: "UADMIN"}
	if err := svc.Link(ctx, by, a, b); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values([]string{ma, mb}))
	if got := only(a); !slices.Equal(got, want) {
		t.Errorf("linked a sees %v, want %v", got, want)
	}
	if got := only(b); !slices.Equal(got, want) {
		t.Errorf("linked b sees %v, want %v", got, want)
	}
	if got := only(c); !slices.Equal(got, []string{mc}) {
		t.Errorf("unlinked c sees %v", got)
	}
	rec, _ := svc.For(a).Recall(ctx, "beta zircon", 3)
	if i := slices.IndexFunc(rec, func(r core.Recalled) bool { return r.ID == mb }); i < 0 || !strings.Contains(rec[i].Text, "linked channel "+string(b)) {
		t.Errorf("a linked memory does not say where it is from: %+v", rec)
	}
	// Links are for reading: no forget or delete across them.
	if err := svc.For(a).Forget(ctx, mb, ""); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("forget across a link: %v", err)
	}
	// Journaled as policy.changed in both channels, on top of the default
	// policy (not wiping it).
	for _, k := range []core.ChannelKey{a, b} {
		pcs := f.commands(k, core.KindPolicyChanged)
		if len(pcs) != 1 {
			t.Fatalf("%s: %d policy.changed", k, len(pcs))
		}
		p, _ := core.Decode[*core.PolicyChanged](pcs[0])
		other := map[core.ChannelKey]core.ChannelKey{a: b, b: a}[k]
		if !slices.Equal(p.Policy.LinkedChannels, []core.ChannelKey{other}) || !slices.Equal(p.Policy.Admins, pol.Admins) ||
			pcs[0].Actor().ID != "UADMIN" {
			t.Errorf("%s policy.changed %+v by %+v", k, p.Policy, pcs[0].Actor())
		}
	}
	if l, err := f.h.Index.Links(ctx, a); err != nil || !slices.Equal(l, []core.ChannelKey{b}) {
		t.Errorf("Links(a) = %v %v", l, err)
	}
	// One side alone opens nothing: c declares a, a does not declare c.
	if err := f.h.Index.SetLinks(ctx, c, []core.ChannelKey{a}); err != nil {
		t.Fatal(err)
	}
	if got := only(c); !slices.Equal(got, []string{mc}) {
		t.Errorf("one-sided link: c sees %v", got)
	}
	if got := only(a); !slices.Equal(got, want) {
		t.Errorf("one-sided link: a sees %v", got)
	}
	if f.h.Bypass != nil {
		for _, k := range []core.ChannelKey{a, c} {
			seen, err := f.h.Bypass(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			allowed := map[core.ChannelKey][]core.ChannelKey{a: {a, b}, c: {c}}[k]
			for _, s := range seen {
				if !slices.Contains(allowed, s) {
					t.Errorf("raw query bound to %s saw a row of %s", k, s)
				}
			}
		}
	}
	if err := svc.Unlink(ctx, by, b, a); err != nil {
		t.Fatal(err)
	}
	if got := only(a); !slices.Equal(got, []string{ma}) {
		t.Errorf("after unlink a sees %v", got)
	}
	if err := svc.Link(ctx, by, a, a); err == nil {
		t.Error("linked a channel with itself")
	}
}

// testRingfence is the adversarial leak test: many channels whose memories
// share vocabulary, queried with other channels' exact texts.
func testRingfence(t *testing.T, f *fixture) {
	ctx := t.Context()
	const channels, per = 20, 50
	shared := []string{"deploy", "budget", "invoice", "meeting", "customer", "release", "incident", "roadmap", "hiring", "vacation"}
	keys := make([]core.ChannelKey, channels)
	texts := make([][]string, channels)
	mids := make([][]string, channels)
	var wg sync.WaitGroup
	for c := range channels {
		keys[c] = f.key(fmt.Sprintf("ch%02d", c))
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			ch := f.svc.For(keys[c])
			for i := range per {
				text := fmt.Sprintf("%s %s note %d: secret%02dx%03d codename%02d %s", shared[rng.IntN(len(shared))],
					shared[rng.IntN(len(shared))], i, c, i, c, shared[rng.IntN(len(shared))])
				id, err := ch.Remember(ctx, text, f.prov())
				if err != nil {
					t.Error(err)
					return
				}
				texts[c] = append(texts[c], text)
				mids[c] = append(mids[c], id)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	owner := map[string]int{}
	for c := range channels {
		for _, id := range mids[c] {
			owner[id] = c
		}
	}
	rng := rand.New(rand.NewPCG(42, 42))
	foreignSeen := 0
	for c := range channels {
		ch := f.svc.For(keys[c])
		for range 10 {
			o := (c + 1 + rng.IntN(channels-1)) % channels
			q := texts[o][rng.IntN(per)] // another channel's exact memory
			r, err := ch.RecallTurn(ctx, q, fmt.Sprintf("codename%02d secret%02dx%03d", o, o, rng.IntN(per)))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range r.Snippets {
				if s.Channel != keys[c] || owner[s.ID] != c {
					foreignSeen++
					t.Errorf("channel %d recalled %s of channel %d (%s)", c, s.ID, owner[s.ID], s.Channel)
				}
			}
			// The index itself, asked directly with the foreign terms.
			cands, err := f.h.Index.Search(ctx, memory.SearchQuery{Channel: keys[c], Terms: memory.Terms(q), Vector: f.emb.Vector(q), Model: f.emb.Model(), K: 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range append(cands.Dense, cands.Lexical...) {
				if h.Channel != keys[c] || owner[h.ID] != c {
					foreignSeen++
					t.Errorf("index search of channel %d returned %s of channel %d", c, h.ID, owner[h.ID])
				}
			}
		}
		// Point operations on a foreign id: not found, nothing changes.
		fid := mids[(c+1)%channels][0]
		if _, err := ch.Get(ctx, fid); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("Get of a foreign id: %v", err)
		}
		if err := ch.Delete(ctx, core.Actor{}, fid, ""); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("Delete of a foreign id: %v", err)
		}
		if err := f.h.Index.SetVector(ctx, keys[c], memory.Vector{MemoryID: fid, Model: f.emb.Model(), Values: f.emb.Vector("x")}); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("SetVector on a foreign id: %v", err)
		}
		if err := f.h.Index.Forget(ctx, keys[c], fid, "", f.b.Now()); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("index Forget of a foreign id: %v", err)
		}
		if err := f.h.Index.Delete(ctx, keys[c], fid, f.b.Now()); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("index Delete of a foreign id: %v", err)
		}
		if e, err := f.svc.For(keys[(c+1)%channels]).Get(ctx, fid); err != nil || !e.Live() {
			t.Errorf("foreign memory changed: %+v %v", e, err)
		}
		ls, err := ch.List(ctx, memory.ListQuery{IncludeForgotten: true, Limit: 1000})
		if err != nil || len(ls) != per {
			t.Errorf("List: %d entries, %v", len(ls), err)
		}
		for _, e := range ls {
			if e.Channel != keys[c] {
				t.Errorf("List of channel %d returned a row of %s", c, e.Channel)
			}
		}
	}
	// Below the code: a raw query with no channel condition at all.
	if f.h.Bypass != nil {
		for c := range channels {
			seen, err := f.h.Bypass(ctx, keys[c])
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) == 0 {
				t.Errorf("bypass query of channel %d saw nothing, not even its own rows", c)
			}
			for _, s := range seen {
				if s != keys[c] {
					foreignSeen++
					t.Errorf("raw query bound to channel %d saw a row of %s (row-level security failed)", c, s)
				}
			}
		}
	}
	t.Logf("ringfence: %d channels × %d memories, %d adversarial queries, %d foreign rows seen", channels, per, channels*10, foreignSeen)
}
