package memory_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
	"github.com/marlowe-bot/marlowe/tools"
)

// TestEngineTools drives the real remember / recall / forget tools through
// the run engine's offline grammar with this package's service as
// EngineConfig.Memory: memory commands interleave with the engine's own in
// the channel's journal, and the chain, the engine and a rebuild all agree.
func TestEngineTools(t *testing.T) {
	signer := coretest.NewSigner(t)
	j := coretest.NewMemJournal(signer)
	b := core.NewBoundary(nil)
	svc, err := memory.New(memory.Config{Journal: j, Boundary: b, Index: memorytest.NewMemIndex(), Embedder: memorytest.NewEmbedder(memorytest.Dims)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := core.NewToolRegistry(tools.Remember(), tools.Recall(), tools.Forget())
	if err != nil {
		t.Fatal(err)
	}
	surface := coretest.NewFakeSurface("test", "UBOT")
	e, err := core.NewEngine(core.EngineConfig{
		Journal: j, Boundary: b, Tools: reg, Surfaces: map[string]core.Surface{"test": surface},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			return ev.MentionsBot, "mention", nil
		}),
		Memory:  svc.Memory,
		CardKey: []byte("0123456789abcdef0123456789abcdef"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	n := 0
	say := func(text string) string {
		t.Helper()
		n++
		msg := "M" + string(rune('A'+n))
		ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: "C1"}, Visibility: core.Public,
			MessageID: msg, Author: core.Person{ID: "UALICE"}, Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
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
			if p.Ref.Scope.Thread == msg && !strings.HasPrefix(p.Out.Text, "⏳") {
				last = p.Out.Text
			}
		}
		return last
	}
	got := say("remember the wifi password is in the blue binder")
	m := regexp.MustCompile(`id (\w+)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("remember answered %q", got)
	}
	id := m[1]
	if got := say("recall wifi binder"); !strings.Contains(got, "["+id+"] the wifi password is in the blue binder") {
		t.Errorf("recall answered %q", got)
	}
	if got := say("forget " + id); !strings.Contains(got, "Forgotten") {
		t.Errorf("forget answered %q", got)
	}
	if got := say("recall wifi"); !strings.Contains(got, "No memories match") {
		t.Errorf("recall after forget answered %q", got)
	}
	ch := core.ChannelKey("test/W/C1")
	if _, err := core.VerifyChannel(t.Context(), j, signer.Verifier(), ch); err != nil {
		t.Fatalf("journal: %v", err)
	}
	var written, forgotten []core.Command
	var toolReq = map[string]bool{}
	for _, c := range j.All(ch) {
		switch c.Kind() {
		case core.KindMemoryWritten:
			written = append(written, c)
		case core.KindMemoryForgotten:
			forgotten = append(forgotten, c)
		case core.KindToolRequested:
			toolReq[c.ID()] = true
		}
	}
	if len(written) != 1 || len(forgotten) != 1 {
		t.Fatalf("memory.written %d, memory.forgotten %d", len(written), len(forgotten))
	}
	w := written[0]
	p, _ := core.Decode[*core.MemoryWritten](w)
	if w.Actor().Type != core.ActorAgent || w.Run() == "" || !toolReq[p.Provenance.Origin] || w.Cause() != p.Provenance.Origin {
		t.Errorf("memory.written by %+v run %q cause %q, provenance %+v", w.Actor(), w.Run(), w.Cause(), p.Provenance)
	}
	if rep, err := svc.Rebuild(t.Context(), ch, memory.RebuildOptions{}); err != nil || rep.Changed || rep.Forgotten != 1 {
		t.Errorf("rebuild after the engine's run: %+v %v", rep, err)
	}
	// The engine's own view of the channel survived the interleaved appends.
	if got := say("recall anything about binders"); !strings.Contains(got, "No memories match") {
		t.Errorf("later run answered %q", got)
	}
}
