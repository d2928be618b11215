package memory_test

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// `forget me` leaves none of the person's text inside a fold checkpoint.
// Two mechanisms each suffice here (it fails only without both): a
// checkpoint is an erasable kind, found by the text search (here through the
// bot's answer quoting her), and the erasure redacts every checkpoint of a
// channel it erased something in (for a turn the fold cut short, which the
// search for the whole text would miss).
func TestEngineForgetMeRedactsCheckpoints(t *testing.T) {
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
	if got := r.holding("narwhal"); len(got) < 2 {
		t.Fatalf("the message and the checkpoint should both hold the text: %v", got)
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
	// The channel still answers from its journal (folded whole now).
	if got := r.say("C1", "UBOB", "status"); got == "" {
		t.Error("no answer in C1 after the erasure")
	}
}
