package memory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/store/postgres"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// fakeClock is the engine's and the boundary's clock: tests move it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Retention on a fake clock, on each journal store: messages, model steps,
// tool calls and posts older than the limit are redacted (a signed
// command.redacted by "retention" each), newer ones and memories are kept,
// passes are bounded and idempotent, and the chains verify.
func TestEngineRetention(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		signer := coretest.NewSigner(t)
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "marlowe.db"), signer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		testRetention(t, st, sqlite.NewMemoryIndex(st), signer)
	})
	t.Run("Postgres", func(t *testing.T) {
		url := testpg.New(t)
		signer := coretest.NewSigner(t)
		st, err := postgres.Open(t.Context(), url, signer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		ix, err := postgres.OpenMemoryIndex(t.Context(), url, postgres.MemoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ix.Close)
		testRetention(t, st, ix, signer)
	})
}

func testRetention(t *testing.T, j core.Journal, ix memory.Index, signer *core.Signer) {
	clock := &fakeClock{t: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clock.now)
	svc, e, _ := startChatEngineAt(t, j, b, ix, nil, clock.now)
	n := 0
	say := func(ch, who, text string) {
		t.Helper()
		n++
		ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: ch}, Visibility: core.Public,
			MessageID: fmt.Sprintf("M%03d", n), Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: clock.now()}
		if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	holding := func(words ...string) []string {
		t.Helper()
		chs, err := j.Channels(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ch := range chs {
			cmds, err := j.Read(t.Context(), ch, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cmds {
				for _, w := range words {
					if strings.Contains(strings.ToLower(string(c.RawPayload())), w) {
						out = append(out, fmt.Sprintf("%s seq %d %s holds %q", ch, c.Seq(), c.Kind(), w))
					}
				}
			}
		}
		return out
	}
	count := func(kind core.Kind, actor string) int {
		chs, _ := j.Channels(t.Context())
		k := 0
		for _, ch := range chs {
			cmds, _ := j.Read(t.Context(), ch, 1, 0)
			for _, c := range cmds {
				if c.Kind() == kind && (actor == "" || c.Actor().ID == actor) {
					k++
				}
			}
		}
		return k
	}
	const limit = 90 * 24 * time.Hour

	say("C1", "UALICE", "remember the harbour gate code is 4417")
	say("C1", "UALICE", "recall harbour")
	say("C2", "UBOB", "how is the albatross survey going")
	old := []string{"recall harbour", "albatross"}
	if got := holding(old...); len(got) < 2 {
		t.Fatalf("the scenario keeps too little to test: %v", got)
	}
	if got := holding("harbour gate"); len(got) < 3 {
		t.Fatalf("the note's text is in too few commands to test: %v", got)
	}
	clock.add(60 * 24 * time.Hour)
	say("C2", "UBOB", "how is the pelican census going")

	// Nothing is older than the limit yet.
	if p, err := e.Retain(t.Context(), limit, 0); err != nil || total(p.Redacted) != 0 {
		t.Fatalf("a pass before the limit: %+v %v", p, err)
	}
	clock.add(31 * 24 * time.Hour) // the first messages are 91 days old, the pelican one 31

	// Bounded passes: at most 2 redactions each, until no more is left.
	passes, redacted := 0, 0
	for {
		p, err := e.Retain(t.Context(), limit, 2)
		if err != nil {
			t.Fatal(err)
		}
		if total(p.Redacted) > 2 {
			t.Fatalf("a pass bounded at 2 redacted %d", total(p.Redacted))
		}
		passes++
		redacted += total(p.Redacted)
		if !p.More {
			break
		}
		if passes > 50 {
			t.Fatal("retention passes never finish")
		}
	}
	if passes < 2 || redacted < 4 {
		t.Fatalf("%d passes redacted %d commands", passes, redacted)
	}
	if got := holding(old...); len(got) > 0 {
		t.Errorf("after retention, payloads older than the limit still hold:\n%s", strings.Join(got, "\n"))
	}
	if got := holding("harbour gate"); len(got) != 1 || !strings.Contains(got[0], "memory.written") {
		t.Errorf("after retention, the note's text should be only in its memory.written:\n%s", strings.Join(got, "\n"))
	}
	if got := holding("pelican census"); len(got) == 0 {
		t.Error("retention redacted a message newer than the limit")
	}
	// Memories are kept: the note stays listed, its memory.written intact.
	got, err := svc.For(core.ChannelKey("test/W/C1")).ListMemories(t.Context(), 0, 10)
	if err != nil || len(got) != 1 || !strings.Contains(got[0].Text, "harbour gate code is 4417") {
		t.Errorf("memories after retention: %+v %v", got, err)
	}
	if n := count(core.KindCommandRedacted, "retention"); n != redacted || n != count(core.KindCommandRedacted, "") {
		t.Errorf("command.redacted by retention: %d, redacted %d, all markers %d", n, redacted, count(core.KindCommandRedacted, ""))
	}
	// Idempotent: another pass redacts nothing.
	if p, err := e.Retain(t.Context(), limit, 0); err != nil || total(p.Redacted) != 0 {
		t.Errorf("a second pass: %+v %v", p, err)
	}
	chs, err := j.Channels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		if _, err := core.VerifyChannel(t.Context(), j, signer.Verifier(), ch); err != nil {
			t.Errorf("verify %s: %v", ch, err)
		}
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
