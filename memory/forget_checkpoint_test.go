package memory_test

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// A fold checkpoint holds conversation turns by reference (the seq of
// their command), never their text: `forget me` erases the person's
// messages and every copy, and the checkpoint stays, unredacted and usable
// (a load restores it and folds the redactions after it, which drop the
// turns). It used to hold the turns' text, so an erasure had to redact
// every checkpoint of the channel.
func TestEngineForgetMeKeepsCheckpointsUsable(t *testing.T) {
	r := newForgetRig(t)
	long := "how is the narwhal rollout going " + strings.Repeat("with all its details and caveats ", 60)
	r.say("C1", "UALICE", long)
	r.say("C1", "UBOB", "the coffee machine is broken")

	// A checkpoint of C1 as its owner takes one (after its head).
	ctx := t.Context()
	ch := core.Scope{Platform: "test", Workspace: "W", Channel: "C1"}
	cmds, err := r.store.Read(ctx, ch.Key(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := fold.NewChannel(ch.Key())
	for _, c := range cmds {
		if err := f.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.b.System("checkpoint", ch, core.Meta{}, &core.FoldCheckpoint{Format: fold.SnapshotFormat, Seq: f.Seq(), Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Append(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := r.holding("narwhal"); len(got) != 1 || !strings.Contains(got[0], "message.received") {
		t.Fatalf("only the message should hold the text (the checkpoint refers to it): %v", got)
	}

	r.say("DALICE", "UALICE", "forget me")
	reply := r.click("DALICE", "UALICE", r.card("DALICE"), "erase")
	if !strings.Contains(reply, "Erased your messages") {
		t.Fatalf("forget me confirmed: %q", reply)
	}
	if got := r.sqlHolding("narwhal"); len(got) > 0 {
		t.Errorf("after forget me, rows still hold Alice's text:\n%s", strings.Join(got, "\n"))
	}
	r.verify()
	if n := r.countUnredacted(core.KindFoldCheckpoint); n != 1 {
		t.Errorf("after forget me, %d usable checkpoints, want the one taken", n)
	}
	// The channel still answers from its journal.
	if got := r.say("C1", "UBOB", "status"); got == "" {
		t.Error("no answer in C1 after the erasure")
	}
}

// countUnredacted counts kind's unredacted commands in every channel.
func (r *forgetRig) countUnredacted(kind core.Kind) int {
	chs, _ := r.store.Channels(r.t.Context())
	n := 0
	for _, ch := range chs {
		cmds, _ := r.store.Read(r.t.Context(), ch, 1, 100000)
		for _, c := range cmds {
			if c.Kind() == kind && !c.Redacted() {
				n++
			}
		}
	}
	return n
}
