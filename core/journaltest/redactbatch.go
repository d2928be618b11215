package journaltest

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// testRedactBatch: many redactions in one write (core.BatchRedactor), as
// an erasure makes them. Every target's payload is destroyed and every
// record appended in order; a target redacted already is skipped without
// a second record (an erasure run again); one bad redaction in a batch
// (wrong id, missing seq, another channel, a seq twice, a read-only
// journal) writes nothing at all; the chain verifies and the fold knows
// every redaction.
func testRedactBatch(t *testing.T, f *fixture) {
	br, ok := f.j.(core.BatchRedactor)
	if !ok {
		t.Fatalf("%T does not implement core.BatchRedactor", f.j)
	}
	ctx := t.Context()
	ch := key("rb")
	var texts []string
	var drafts []core.Draft
	for i := range 5 {
		texts = append(texts, "secret number "+string(rune('a'+i))+" of the batch")
		drafts = append(drafts, f.msg("rb", texts[i]))
	}
	cmds := f.append(drafts...)
	red := func(ch string, c core.Command, id string) core.Redaction {
		d, err := f.bd.System("operator", scope(ch), core.Meta{Cause: c.ID()},
			&core.CommandRedacted{Seq: c.Seq(), ID: id, Reason: "forget", TargetKind: c.Kind().String()})
		if err != nil {
			t.Fatal(err)
		}
		return core.Redaction{Seq: c.Seq(), Record: d}
	}
	intact := func(seqs ...int) {
		t.Helper()
		for _, i := range seqs {
			stored, err := f.h.Tamper.StoredPayload(ctx, ch, cmds[i].Seq())
			if err != nil || !bytes.Equal(stored, cmds[i].RawPayload()) {
				t.Fatalf("seq %d: stored payload %q %v, want it intact", cmds[i].Seq(), stored, err)
			}
		}
	}

	got, err := br.RedactBatch(ctx, []core.Redaction{red("rb", cmds[2], cmds[2].ID()), red("rb", cmds[0], cmds[0].ID())})
	if err != nil {
		t.Fatalf("redact batch: %v", err)
	}
	if !slices.Equal(seqs(got), []uint64{6, 7}) {
		t.Fatalf("batch records at seqs %v, want [6 7]", seqs(got))
	}
	for i, want := range []uint64{3, 1} {
		p, err := core.Decode[*core.CommandRedacted](got[i])
		if err != nil || p.Seq != want {
			t.Fatalf("record %d names %+v (%v), want seq %d", i, p, err, want)
		}
	}
	for _, seq := range []uint64{1, 3} {
		stored, err := f.h.Tamper.StoredPayload(ctx, ch, seq)
		if err != nil || stored != nil {
			t.Fatalf("seq %d after the batch: stored %q %v, want NULL", seq, stored, err)
		}
	}
	intact(1, 3, 4)
	all := f.read(ch, 1, 0)
	sameCommands(t, all[5:], got)

	// Run again with one more: the redacted one is skipped, no second record.
	got, err = br.RedactBatch(ctx, []core.Redaction{red("rb", cmds[0], cmds[0].ID()), red("rb", cmds[4], cmds[4].ID())})
	if err != nil || !slices.Equal(seqs(got), []uint64{8}) {
		t.Fatalf("batch with one redacted already: seqs %v %v, want [8]", seqs(got), err)
	}
	if got, err := br.RedactBatch(ctx, []core.Redaction{red("rb", cmds[0], cmds[0].ID())}); err != nil || len(got) != 0 {
		t.Fatalf("batch of redacted targets only: %d records %v, want none", len(got), err)
	}

	// One bad redaction writes nothing of its batch.
	other := f.append(f.msg("rb-other", "elsewhere"))[0]
	missing := red("rb", cmds[1], cmds[1].ID())
	missing.Seq = 99
	d, err := f.bd.System("operator", scope("rb"), core.Meta{}, &core.CommandRedacted{Seq: 99, ID: cmds[1].ID(), Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	missing.Record = d
	bad := []struct {
		name string
		red  core.Redaction
		is   error
	}{
		{"WrongID", red("rb", cmds[3], "01OTHER"), nil},
		{"Missing", missing, core.ErrNotFound},
		{"OtherChannel", red("rb-other", other, other.ID()), nil},
		{"Twice", red("rb", cmds[1], cmds[1].ID()), nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := br.RedactBatch(ctx, []core.Redaction{red("rb", cmds[1], cmds[1].ID()), tc.red})
			if err == nil {
				t.Fatal("a batch with a bad redaction was accepted")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("got %v, want %v", err, tc.is)
			}
			if seq, _ := f.head(ch); seq != 8 {
				t.Fatalf("refused batch moved the head to %d", seq)
			}
			intact(1, 3)
		})
	}
	ro, ok := f.h.Reopen(t, nil).(core.BatchRedactor)
	if !ok {
		t.Fatal("read-only instance is not a core.BatchRedactor")
	}
	if _, err := ro.RedactBatch(ctx, []core.Redaction{red("rb", cmds[1], cmds[1].ID())}); !errors.Is(err, core.ErrReadOnly) {
		t.Fatalf("read-only batch: %v, want core.ErrReadOnly", err)
	}
	intact(1, 3)
	f.verify(ch, 8)
	state, err := fold.Fold(ch, f.read(ch, 1, 0))
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(state.Redacted)), []uint64{1, 3, 5}) {
		t.Fatalf("fold after the batches: %v %v, want redacted [1 3 5]", state.Redacted, err)
	}
}

// testMessagesBy: a person's messages found from the index
// (core.AuthorIndex) are exactly their unredacted message.received, by
// signed actor, across channels of the platform in (channel, seq) order:
// not another person's, not their other kinds, not their messages on
// another platform, not one redacted.
func testMessagesBy(t *testing.T, f *fixture) {
	ix, ok := f.j.(core.AuthorIndex)
	if !ok {
		t.Fatalf("%T does not implement core.AuthorIndex", f.j)
	}
	ctx := t.Context()
	ann, bob := core.Person{ID: "U1", Name: "Ann"}, core.Person{ID: "U2", Name: "Bob"}
	say := func(p core.Person, sc core.Scope, text string) core.Command {
		d, err := f.bd.Human(p, sc, core.Meta{}, &core.MessageReceived{MessageID: "m-" + text, Author: p, Visibility: core.Public, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return f.append(d)[0]
	}
	var want []core.Command
	want = append(want, say(ann, scope("mb-b"), "ann in b"))
	say(bob, scope("mb-b"), "bob in b")
	f.append(stepDraft(t, f.bd, "run-1", scope("mb-b"), 1))
	click, err := f.bd.Human(ann, scope("mb-b"), core.Meta{}, &core.CardClicked{Card: "c", Action: "a", By: ann})
	if err != nil {
		t.Fatal(err)
	}
	f.append(click)
	want = append(want, say(ann, scope("mb-b"), "ann again in b"))
	gone := say(ann, scope("mb-b"), "ann, erased")
	first := say(ann, scope("mb-a"), "ann in a")
	want = append([]core.Command{first}, want...) // channel mb-a sorts first
	say(ann, core.Scope{Platform: "other", Workspace: "w", Channel: "mb-a"}, "ann elsewhere")
	rec, err := f.bd.System("operator", scope("mb-b"), core.Meta{}, &core.CommandRedacted{Seq: gone.Seq(), ID: gone.ID(), Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.j.Redact(ctx, gone.Seq(), rec); err != nil {
		t.Fatal(err)
	}
	got, err := ix.MessagesBy(ctx, "test", "U1")
	if err != nil {
		t.Fatalf("messages by: %v", err)
	}
	sameCommands(t, got, want)
	if got, err := ix.MessagesBy(ctx, "test", "U3"); err != nil || len(got) != 0 {
		t.Fatalf("messages by nobody: %d %v", len(got), err)
	}
	if got, err := ix.MessagesBy(ctx, "other", "U1"); err != nil || len(got) != 1 {
		t.Fatalf("messages by ann on the other platform: %d %v, want 1", len(got), err)
	}
}
