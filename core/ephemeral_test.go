package core_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// whisperSurface is the fake surface with ephemeral messages.
type whisperSurface struct {
	*coretest.FakeSurface
	mu   sync.Mutex
	sent []whisper
}

type whisper struct {
	scope      core.Scope
	user, text string
}

func (w *whisperSurface) PostEphemeral(_ context.Context, sc core.Scope, user, text string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, whisper{sc, user, text})
	return nil
}

func (w *whisperSurface) whispers() []whisper {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]whisper(nil), w.sent...)
}

// A forged button press is refused to the presser alone where the surface
// can: nothing is said in the channel, nothing is journaled.
func TestForgedClickRefusalIsEphemeral(t *testing.T) {
	var ws *whisperSurface
	h, log, ev := wipeHarness(t, func(c *core.EngineConfig) {
		ws = &whisperSurface{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface)}
		c.Surfaces = map[string]core.Surface{platform: ws}
	})
	before, posts := len(h.j.All(chanScope("C1").Key())), len(h.s.Posts())
	h.click(bob, "forged.a0000000000000000000000", threadOf(ev))
	h.click(carol, "01HZZZZZZZZZZZZZZZZZZZZZZZ.a", threadOf(ev))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatal("forged click executed the tool")
	}
	if _, ok := h.s.Find("could not be verified"); ok || len(h.s.Posts()) != posts {
		t.Errorf("refusal posted publicly: %+v", h.s.Posts()[posts:])
	}
	got := ws.whispers()
	if len(got) != 2 || got[0].user != bob.ID || got[1].user != carol.ID || got[0].scope != threadOf(ev) ||
		!strings.Contains(got[0].text, "could not be verified") {
		t.Errorf("ephemeral refusals = %+v; want one each to Bob and Carol in the thread", got)
	}
	if after := len(h.j.All(chanScope("C1").Key())); after != before {
		t.Errorf("journal grew by %d for ephemeral refusals", after-before)
	}
}
