package memory_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
	"github.com/marlowe-bot/marlowe/tools"
)

// chatEngine is a running engine over the real memory service (in-process
// journal and index) and a fake surface.
func chatEngine(t *testing.T) (*core.Signer, *coretest.MemJournal, *memory.Service, *engine.Engine, *coretest.FakeSurface) {
	t.Helper()
	signer := coretest.NewSigner(t)
	j := coretest.NewMemJournal(signer)
	b := core.NewBoundary(nil)
	svc, e, surface := startChatEngine(t, j, b, memorytest.NewMemIndex(), nil)
	return signer, j, svc, e, surface
}

// startChatEngine starts the engine over journal j, the memory service on
// index ix, the remember/recall/forget tools and a fake surface "test".
func startChatEngine(t *testing.T, j core.Journal, b *core.Boundary, ix memory.Index, ops []core.Operator) (*memory.Service, *engine.Engine, *coretest.FakeSurface) {
	t.Helper()
	return startChatEngineAt(t, j, b, ix, ops, nil)
}

// startChatEngineAt is startChatEngine with the engine on clock (nil: the wall clock).
func startChatEngineAt(t *testing.T, j core.Journal, b *core.Boundary, ix memory.Index, ops []core.Operator, clock func() time.Time) (*memory.Service, *engine.Engine, *coretest.FakeSurface) {
	t.Helper()
	svc, err := memory.New(memory.Config{Journal: j, Boundary: b, Index: ix})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := gate.NewRegistry(tools.Remember(), tools.Recall(), tools.Forget())
	if err != nil {
		t.Fatal(err)
	}
	surface := coretest.NewFakeSurface("test", "UBOT")
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: b, Tools: reg, Surfaces: map[string]core.Surface{"test": surface},
		Router:    core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) { return ev.MentionsBot, "mention", nil }),
		Memory:    svc.Memory,
		CardKey:   []byte("0123456789abcdef0123456789abcdef"),
		Operators: ops,
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return svc, e, surface
}

// The chat commands over the real service: `memories` names who added
// each memory, and `delete memory` by its author redacts the journal in
// that person's name (the chain still verifies), while anyone else is
// refused and nothing changes.
func TestEngineMemoriesAndDelete(t *testing.T) {
	signer, j, svc, e, surface := chatEngine(t)
	n := 0
	say := func(who, text string) string {
		t.Helper()
		n++
		msg := "M" + string(rune('A'+n))
		ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: "C1"}, Visibility: core.Public,
			MessageID: msg, Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
		if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		var last string
		for _, p := range surface.Posts() {
			if p.Ref.Scope.Thread == msg {
				last = p.Out.Text
			}
		}
		return last
	}
	got := say("UALICE", "remember Alice's badge number is 4411")
	m := regexp.MustCompile(`id (\w+)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("remember answered %q", got)
	}
	id := m[1]
	// The same note again is the same memory, and the reply says so.
	if again := say("UBOB", "remember alice's badge number is  4411"); !strings.Contains(again, "Already remembered (id "+id+")") {
		t.Errorf("a second remember of the same text answered %q, want it already remembered as %s", again, id)
	}
	if got := say("UBOB", "memories"); !strings.Contains(got, "`"+id+"` Alice's badge number is 4411 — added by <@UALICE>") {
		t.Errorf("memories = %q", got)
	}
	if got := say("UBOB", "delete memory "+id); !strings.Contains(got, "Nothing was deleted") {
		t.Errorf("bob's delete = %q", got)
	}
	ch := core.ChannelKey("test/W/C1")
	if e, err := svc.For(ch).Get(t.Context(), id); err != nil || e.Deleted {
		t.Fatalf("after a refused delete: %+v %v", e, err)
	}
	if got := say("UALICE", "delete memory "+id); !strings.Contains(got, "Deleted memory") {
		t.Errorf("alice's delete = %q", got)
	}
	// Every command that carried the text is redacted (the two remembers,
	// the `memories` listing, the answers), each named by a command.redacted
	// in Alice's name; no payload holds the text.
	var redacted, marked int
	for _, c := range j.All(ch) {
		if strings.Contains(string(c.RawPayload()), "4411") {
			t.Errorf("seq %d %s still holds the text: %s", c.Seq(), c.Kind(), c.RawPayload())
		}
		switch c.Kind() {
		case core.KindMemoryWritten:
			if !c.Redacted() {
				t.Errorf("memory.written is not redacted")
			}
		case core.KindCommandRedacted:
			redacted++
			p, err := core.Decode[*core.CommandRedacted](c)
			if err != nil || p.TargetKind == "" {
				t.Errorf("command.redacted %+v %v: no target kind", p, err)
			}
			if a := c.Actor(); a.Type != core.ActorHuman || a.ID != "UALICE" {
				t.Errorf("command.redacted by %+v, want Alice", a)
			}
		case core.KindMemoryRedacted:
			marked++
			if a := c.Actor(); a.Type != core.ActorHuman || a.ID != "UALICE" {
				t.Errorf("memory.redacted by %+v, want Alice", a)
			}
		}
	}
	if redacted < 4 || marked != 1 {
		t.Errorf("command.redacted %d, memory.redacted %d", redacted, marked)
	}
	if _, err := core.VerifyChannel(t.Context(), j, signer.Verifier(), ch); err != nil {
		t.Fatalf("journal: %v", err)
	}
	if got := say("UBOB", "memories"); !strings.Contains(got, "no memories yet") {
		t.Errorf("memories after delete = %q", got)
	}
}

// `what do you know about me` in a DM, over the real service: Alice sees
// the memory she added and the one Bob wrote that mentions her, with their
// channels, and her kept messages per channel with counts; Bob's own note
// about something else is not hers and is not listed.
func TestEngineAboutMe(t *testing.T) {
	_, _, _, e, surface := chatEngine(t)
	n := 0
	say := func(ch, who, text string, vis core.Visibility) string {
		t.Helper()
		n++
		msg := "M" + string(rune('A'+n))
		ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: ch}, Visibility: vis,
			MessageID: msg, Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
		if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		var last string
		for _, p := range surface.Posts() {
			if p.Ref.Scope.Channel == ch && (p.Ref.Scope.Thread == msg || vis == core.DM) {
				last = p.Out.Text
			}
		}
		return last
	}
	say("C1", "UALICE", "remember the release train leaves at noon", core.Public)
	say("C1", "UBOB", "remember <@UALICE> owns the billing dashboard", core.Public)
	say("C2", "UBOB", "remember the coffee machine is broken", core.Public)
	say("C2", "UALICE", "status", core.Public)
	got := say("D1", "UALICE", "what do you know about me", core.DM)
	for _, want := range []string{
		"the release train leaves at noon", "<@UALICE> owns the billing dashboard",
		"<#C1>: 1, from ", "<#C2>: 1, from ", "*Consents you granted*\nnone",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("about me lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "coffee") {
		t.Errorf("about me lists Bob's note:\n%s", got)
	}
}
