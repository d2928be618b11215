package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// countingJournal counts the commands a load reads; it forwards the
// checkpoint read when the journal under it has one.
type countingJournal struct {
	core.Journal
	read atomic.Int64
}

func (j *countingJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	cmds, err := j.Journal.Read(ctx, ch, from, limit)
	j.read.Add(int64(len(cmds)))
	return cmds, err
}

func (j *countingJournal) LatestOfKind(ctx context.Context, ch core.ChannelKey, k core.Kind) (core.Command, bool, error) {
	return j.Journal.(core.LatestReader).LatestOfKind(ctx, ch, k)
}

// plainJournal counts too, but has no checkpoint read: a journal loaded
// the way every load went before checkpoints.
type plainJournal struct {
	core.Journal
	read atomic.Int64
}

func (j *plainJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	cmds, err := j.Journal.Read(ctx, ch, from, limit)
	j.read.Add(int64(len(cmds)))
	return cmds, err
}

type ckptWorld struct {
	st     *sqlite.Store
	signer *core.Signer
	clk    *clock
	b      *core.Boundary
	sc     core.Scope
}

func newCkptWorld(t *testing.T) *ckptWorld {
	t.Helper()
	w := &ckptWorld{signer: coretest.NewSigner(t), clk: &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}, sc: chanScope("CK")}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "j.db"), w.signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	w.st, w.b = st, core.NewBoundary(w.clk.Now)
	return w
}

func (w *ckptWorld) engine(t *testing.T, j core.Journal, every int) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: w.b, CardKey: cardKey, Clock: w.clk.Now, CheckpointEvery: every, Verifier: w.signer.Verifier(),
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// history appends n commands through e, one append each: messages, and a
// run kept live with steering messages (what a restore reads back by seq).
func (w *ckptWorld) history(t *testing.T, e *engine.Engine, n int, text func(i int) string) {
	t.Helper()
	ctx := t.Context()
	thread := w.sc
	thread.Thread = "M-run"
	for i := range n {
		var d core.Draft
		var err error
		switch {
		case i == 0:
			d, err = w.b.Human(alice, w.sc, core.Meta{Run: "R-live"}, &core.MessageReceived{MessageID: "M-run", Author: alice, Visibility: core.Public, Text: "start"})
		case i == 1:
			d, err = w.b.Agent("R-live", thread, core.Meta{}, &core.RunStarted{Trigger: "M-run"})
		case i%97 == 0:
			d, err = w.b.Human(bob, thread, core.Meta{Run: "R-live"}, &core.MessageReceived{MessageID: fmt.Sprintf("S%d", i), Author: bob, Visibility: core.Public, Text: "steer " + text(i)})
		default:
			d, err = w.b.Human(alice, w.sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("M%d", i), Author: alice, Visibility: core.Public, Text: text(i)})
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.AppendVia(ctx, e, d); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		w.clk.Advance(time.Second)
	}
}

func (w *ckptWorld) all(t *testing.T) []core.Command {
	t.Helper()
	cmds, err := w.st.Read(t.Context(), w.sc.Key(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

func countKind(cmds []core.Command, k core.Kind, redacted bool) int {
	n := 0
	for _, c := range cmds {
		if c.Kind() == k && c.Redacted() == redacted {
			n++
		}
	}
	return n
}

// A channel with a checkpoint loads by reading the checkpoint and what
// follows it, not the whole journal, into the same fold as a full fold;
// the checkpoints are commands of the chain that `bot verify`'s check passes.
func TestCheckpointLoadReadsOnlyTheTail(t *testing.T) {
	w := newCkptWorld(t)
	const every, n = 100, 1050
	w.history(t, w.engine(t, w.st, every), n, func(i int) string { return fmt.Sprintf("hello %d", i) })
	cmds := w.all(t)
	// One checkpoint every `every` commands, or one command per 512 bytes
	// of the previous checkpoint when that is more (engine/checkpoint.go).
	var at uint64
	size, spacing, taken := 0, uint64(every), 0
	for _, c := range cmds {
		if c.Kind() != core.KindFoldCheckpoint {
			continue
		}
		want := at + uint64(max(every, size/512)) + 1
		if c.Seq() != want {
			t.Fatalf("checkpoint at seq %d, want %d (previous at %d, %d bytes)", c.Seq(), want, at, size)
		}
		spacing = max(spacing, c.Seq()-at)
		at, size, taken = c.Seq(), len(c.RawPayload()), taken+1
	}
	if taken < 2 {
		t.Fatalf("%d checkpoints in %d commands", taken, len(cmds))
	}
	if _, err := core.VerifyChannel(t.Context(), w.st, w.signer.Verifier(), w.sc.Key()); err != nil {
		t.Fatalf("verify the chain with checkpoints: %v", err)
	}
	want, err := engine.FoldDumpOf(w.sc.Key(), cmds)
	if err != nil {
		t.Fatal(err)
	}

	cj := &countingJournal{Journal: w.st}
	got, err := engine.EngineFoldDump(t.Context(), w.engine(t, cj, every), w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	sameFold(t, "restored from a checkpoint", got, want)
	// After the last checkpoint: the commands since (at most every), plus
	// the live run's steering messages read back by seq.
	if r := cj.read.Load(); r > int64(uint64(len(cmds))-at)+int64(n/97)+2 || r > int64(spacing)*2 {
		t.Fatalf("load read %d commands of %d: not from the checkpoint", r, len(cmds))
	}

	// Without the checkpoint read, the same journal folds whole, alike.
	cj2 := &plainJournal{Journal: w.st}
	got, err = engine.EngineFoldDump(t.Context(), w.engine(t, cj2, -1), w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	sameFold(t, "folded whole", got, want)
	if r := cj2.read.Load(); r != int64(len(cmds)) {
		t.Fatalf("without the read: load read %d commands, want all %d", r, len(cmds))
	}
}

// A checkpoint that does not verify or decode is ignored: full fold.
func TestCheckpointUnusableIsIgnored(t *testing.T) {
	w := newCkptWorld(t)
	w.history(t, w.engine(t, w.st, -1), 300, func(i int) string { return fmt.Sprintf("hi %d", i) })
	ctx := t.Context()
	head, _, err := w.st.Head(ctx, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	// An unknown format, then one sealed by a key nobody trusts.
	d, err := w.b.System("checkpoint", w.sc, core.Meta{}, &core.FoldCheckpoint{Format: 99, Seq: head, Snapshot: []byte(`{"format":99}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Append(ctx, d); err != nil {
		t.Fatal(err)
	}
	forged, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "forged.db"), coretest.NewSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = forged.Close() })
	for _, tc := range []struct {
		name string
		j    core.Journal
	}{{"unknown format", w.st}} {
		cmds := w.all(t)
		want, err := engine.FoldDumpOf(w.sc.Key(), cmds)
		if err != nil {
			t.Fatal(err)
		}
		cj := &countingJournal{Journal: tc.j}
		got, err := engine.EngineFoldDump(ctx, w.engine(t, cj, 100), w.sc.Key())
		if err != nil {
			t.Fatal(err)
		}
		sameFold(t, tc.name, got, want)
		if r := cj.read.Load(); r != int64(len(cmds)) {
			t.Fatalf("%s: load read %d commands, want all %d", tc.name, r, len(cmds))
		}
	}
	// A checkpoint from another key: a second engine whose verifier does not
	// trust the store's key folds whole.
	e := w.engine(t, w.st, 100)
	w.history(t, e, 150, func(i int) string { return "more" }) // takes a checkpoint
	if countKind(w.all(t), core.KindFoldCheckpoint, false) != 2 {
		t.Fatal("no valid checkpoint taken")
	}
	cj := &countingJournal{Journal: w.st}
	other, err := engine.New(engine.Config{
		Journal: cj, Boundary: w.b, CardKey: cardKey, Clock: w.clk.Now, Verifier: coretest.NewSigner(t).Verifier(),
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	cmds := w.all(t)
	want, _ := engine.FoldDumpOf(w.sc.Key(), cmds)
	got, err := engine.EngineFoldDump(ctx, other, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	sameFold(t, "untrusted checkpoint", got, want)
	if r := cj.read.Load(); r != int64(len(cmds)) {
		t.Fatalf("untrusted checkpoint: load read %d commands, want all %d", r, len(cmds))
	}
}

// Retention with live work in the channel: the run kept live by
// w.history stops eviction (the old workaround only dropped idle folds),
// and checkpoints were taken after the text was said. Afterwards no row
// holds the text; the live engine's fold keeps no turn of what was
// redacted (its next run is never given it); the checkpoints taken after
// the cutoff stay usable (a fresh load restores the latest and reads only
// the tail) and load into the fold of the redacted journal.
func TestCheckpointRetentionWithLiveWork(t *testing.T) {
	w := newCkptWorld(t)
	const secret = "my locker code is 4417"
	e := w.engine(t, w.st, 100)
	w.history(t, e, 20, func(i int) string {
		if i == 5 {
			return secret
		}
		return fmt.Sprintf("old %d", i)
	})
	w.clk.Advance(48 * time.Hour)
	w.history(t, e, 250, func(i int) string { return fmt.Sprintf("new %d", i) })
	var said uint64
	for _, c := range w.all(t) {
		if !c.Redacted() && c.Kind() == core.KindMessageReceived && strings.Contains(string(c.RawPayload()), "4417") {
			said = c.Seq()
		}
	}
	refs, err := engine.EngineTurnRefs(t.Context(), e, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	if said == 0 || !slices.Contains(refs, said) || countKind(w.all(t), core.KindFoldCheckpoint, false) < 2 {
		t.Fatalf("the test needs the text said (seq %d), kept as a turn of the live fold, and checkpoints after it", said)
	}
	if _, err := e.Retain(t.Context(), 24*time.Hour, -1); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.all(t) {
		if !c.Redacted() && strings.Contains(string(c.RawPayload()), "4417") {
			t.Errorf("after retention, seq %d (%s) still holds the erased text", c.Seq(), c.Kind())
		}
	}
	refs, err = engine.EngineTurnRefs(t.Context(), e, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(refs, said) {
		t.Errorf("after retention, the live fold still gives the next run the turn of seq %d", said)
	}
	cmds := w.all(t)
	var latest core.Command
	for _, c := range cmds {
		if c.Kind() == core.KindFoldCheckpoint {
			latest = c
		}
	}
	if latest.Redacted() {
		t.Fatalf("retention redacted the latest checkpoint (seq %d): the channel folds whole", latest.Seq())
	}
	want, err := engine.FoldDumpOf(w.sc.Key(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	cj := &countingJournal{Journal: w.st}
	fresh := w.engine(t, cj, 100)
	got, err := engine.EngineFoldDump(t.Context(), fresh, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	if got.State != want.State {
		t.Fatalf("reloaded after retention: state differs\n got: %s\nwant: %s", got.State, want.State)
	}
	if r := cj.read.Load(); r > int64(len(cmds))/2 {
		t.Fatalf("reloaded after retention: read %d commands of %d, not from the checkpoint", r, len(cmds))
	}
	if refs, _ := engine.EngineTurnRefs(t.Context(), fresh, w.sc.Key()); slices.Contains(refs, said) {
		t.Errorf("the reloaded fold keeps the turn of redacted seq %d", said)
	}
	if _, err := core.VerifyChannel(t.Context(), w.st, w.signer.Verifier(), w.sc.Key()); err != nil {
		t.Fatalf("verify after retention: %v", err)
	}
}

// A redaction appended after a checkpoint, of a command the checkpoint
// covers, leaves the checkpoint usable: the load restores it, folds the
// redaction (which drops the turn the checkpoint names by seq) and reads
// only the tail. It used to make the checkpoint stale and fold whole.
func TestCheckpointUsableAfterRedaction(t *testing.T) {
	w := newCkptWorld(t)
	w.history(t, w.engine(t, w.st, 100), 150, func(i int) string { return fmt.Sprintf("text %d", i) })
	ctx := t.Context()
	target := w.all(t)[9] // a plain message, folded into the checkpoint at 101
	rd, err := w.b.System("operator", w.sc, core.Meta{Cause: target.ID()},
		&core.CommandRedacted{Seq: target.Seq(), ID: target.ID(), Reason: "test", TargetKind: target.Kind().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Redact(ctx, target.Seq(), rd); err != nil {
		t.Fatal(err)
	}
	cmds := w.all(t)
	if countKind(cmds, core.KindFoldCheckpoint, false) != 1 {
		t.Fatal("want the one checkpoint left unredacted")
	}
	want, err := engine.FoldDumpOf(w.sc.Key(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	cj := &countingJournal{Journal: w.st}
	e := w.engine(t, cj, 100)
	got, err := engine.EngineFoldDump(ctx, e, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	if got.State != want.State {
		t.Fatalf("load after a redaction the checkpoint predates: state differs\n got: %s\nwant: %s", got.State, want.State)
	}
	if r := cj.read.Load(); r > 60 {
		t.Fatalf("load after a redaction read %d commands of %d: not from the checkpoint", r, len(cmds))
	}
	refs, err := engine.EngineTurnRefs(ctx, e, w.sc.Key())
	if err != nil {
		t.Fatal(err)
	}
	wantRefs := fold.NewChannel(w.sc.Key())
	for _, c := range cmds {
		if err := wantRefs.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	if slices.Contains(refs, target.Seq()) || !slices.Equal(refs, wantRefs.TurnRefs()) {
		t.Fatalf("turns after the load: %v, want those of the redacted journal %v", refs, wantRefs.TurnRefs())
	}
}

// A journal wrapper hides the store's own verifier: an engine given none
// then takes and restores no checkpoint, and says so at start rather than
// folding every channel whole in silence (serve passes its verifier).
func TestCheckpointsOffWithoutAVerifierAreLogged(t *testing.T) {
	w := newCkptWorld(t)
	var logs strings.Builder
	e, err := engine.New(engine.Config{
		Journal: &plainJournal{Journal: w.st}, Boundary: w.b, CardKey: cardKey, Clock: w.clk.Now,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if !strings.Contains(logs.String(), "checkpoints off") {
		t.Fatalf("no warning that checkpoints are off:\n%s", logs.String())
	}
}
