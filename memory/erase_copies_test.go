package memory_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
)

// Erasure finds every copy the bot makes of a text: cut to a conversation
// turn's 1,500 characters, held in another replica's fold, quoted in
// part. Each test searches every row of every table of the SQLite file for
// every 40-character piece of the erased text.

// longText and pieces are coretest's: random words, and every
// 40-character piece of a text.
var (
	longText = coretest.LongText
	pieces   = coretest.Pieces
)

// piecesHeld lists the rows of any table that hold a 40-character piece of
// text (first hit per cell).
func (r *forgetRig) piecesHeld(text string) []string {
	r.t.Helper()
	got := r.sqlHolding(pieces(text)...)
	seen := map[string]bool{}
	var out []string
	for _, g := range got {
		cell, _, _ := strings.Cut(g, " holds ")
		if !seen[cell] {
			seen[cell] = true
			out = append(out, g)
		}
	}
	return out
}

// replicaB is a second engine on the rig's journal, with a model that
// records every view it is given: another replica of the same bot.
type replicaB struct {
	e       *engine.Engine
	surface *coretest.FakeSurface
	model   *coretest.ScriptedModel
}

func (r *forgetRig) replicaB() *replicaB {
	r.t.Helper()
	m := coretest.NewScriptedModel(coretest.Answered, coretest.Answered, coretest.Answered)
	surface := coretest.NewFakeSurface("test", "UBOT")
	e, err := engine.New(engine.Config{
		Journal: r.store, Boundary: r.b, Model: m, Surfaces: map[string]core.Surface{"test": surface},
		Router:  core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) { return ev.MentionsBot, "mention", nil }),
		Memory:  r.svc.Memory,
		CardKey: []byte("0123456789abcdef0123456789abcdef"),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = e.Close() })
	return &replicaB{e: e, surface: surface, model: m}
}

// say delivers who's mention in thread of channel ch through engine B.
func (b *replicaB) say(t *testing.T, ch, thread, msg, who, text string) {
	t.Helper()
	ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: ch, Thread: thread}, Visibility: core.Public,
		MessageID: msg, Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
	if err := b.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.e.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// The reproduction: two engines on one journal. Alice talks to
// replica B (its fold holds her turns, and her follow-up's run records the
// conversation so far); she says `forget me` through replica A; then Bob
// writes in the same conversation through B. B's fold must no longer give
// her turns to the model, and no row may hold any piece of her text (her
// message is longer than the 1,500 characters a turn keeps).
func TestForgetMeOnOneReplicaErasesFromTheOther(t *testing.T) {
	r := newForgetRig(t)
	b := r.replicaB()
	secret := longText(1, 2000)
	b.say(t, "C1", "", "MA1", "UALICE", secret)
	b.say(t, "C1", "MA1", "MA2", "UALICE", "and one more thing about it")
	if got := r.piecesHeld(secret); len(got) == 0 {
		t.Fatal("the test needs Alice's text in the journal before the erasure")
	}
	if hist := coretest.ConversationOf(b.model.Views()[len(b.model.Views())-1]); !strings.Contains(hist, secret[:40]) {
		t.Fatalf("B's follow-up run was not given Alice's turn: the test needs it there:\n%s", hist)
	}

	r.say("DALICE", "UALICE", "forget me")
	if reply := r.click("DALICE", "UALICE", r.card("DALICE"), "erase"); !strings.Contains(reply, "Erased your messages") {
		t.Fatalf("forget me confirmed: %q", reply)
	}

	calls := b.model.Calls()
	b.say(t, "C1", "MA1", "MB1", "UBOB", "what did she say earlier?")
	views := b.model.Views()
	if len(views) == calls {
		t.Fatal("B's model was not called for Bob's message")
	}
	for _, v := range views[calls:] {
		for _, m := range v.Messages {
			for _, p := range pieces(secret) {
				if strings.Contains(m.Text, p) {
					t.Fatalf("after forget me through A, B gave the model a piece of Alice's text: %q in\n%s", p, m.Text)
				}
			}
		}
	}
	if got := r.piecesHeld(secret); len(got) > 0 {
		t.Errorf("after forget me, rows hold pieces of Alice's text:\n%s", strings.Join(got, "\n"))
	}
	r.verify()
}

// `delete memory` of a note longer than a conversation turn: the message
// that asked for it was recorded, cut to 1,500 characters, in the history
// of the next run and in a checkpoint of the channel's fold. Nothing of it
// may remain in any row afterwards.
func TestDeleteMemoryErasesTheCutCopies(t *testing.T) {
	r := newForgetRig(t)
	note := longText(2, 1800)
	got := r.say("C1", "UALICE", "remember "+note)
	id := memoryID(t, got)
	r.sayIn("C1", "M001", "UALICE", "is that saved?") // a run in the same conversation, given the history
	r.checkpoint("C1")
	if held := r.piecesHeld(note); len(held) < 2 {
		t.Fatalf("the test needs copies of the note: %v", held)
	}
	reply := r.say("C1", "UALICE", "delete memory "+id)
	if !strings.Contains(reply, "Deleted memory") {
		t.Fatalf("delete memory: %q", reply)
	}
	if held := r.piecesHeld(note); len(held) > 0 {
		t.Errorf("after delete memory, rows hold pieces of the note:\n%s", strings.Join(held, "\n"))
	}
	r.verify()
}

// sayIn delivers who's mention in thread of ch through the rig's engine.
func (r *forgetRig) sayIn(ch, thread, who, text string) {
	r.t.Helper()
	r.n++
	ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: ch, Thread: thread}, Visibility: core.Public,
		MessageID: "T" + thread + text[:3], Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
	if err := r.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		r.t.Fatal(err)
	}
	r.idle()
}

// checkpoint appends a checkpoint of ch's fold, as its owner takes one.
func (r *forgetRig) checkpoint(ch string) {
	r.t.Helper()
	ctx := r.t.Context()
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: ch}
	cmds, err := r.store.Read(ctx, sc.Key(), 1, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	f := fold.NewChannel(sc.Key())
	for _, c := range cmds {
		if err := f.Apply(c); err != nil {
			r.t.Fatal(err)
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	d, err := r.b.System("checkpoint", sc, core.Meta{}, &core.FoldCheckpoint{Format: fold.SnapshotFormat, Seq: f.Seq(), Snapshot: snap})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.store.Append(ctx, d); err != nil {
		r.t.Fatal(err)
	}
}

// memoryID is the id a `remember` reply names.
func memoryID(t *testing.T, reply string) string {
	t.Helper()
	m := regexp.MustCompile(`id (\w+)`).FindStringSubmatch(reply)
	if m == nil {
		t.Fatalf("no memory id in %q", reply)
	}
	return m[1]
}
