package memory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
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
		signer := coretest.NewSigner(t)
		st, ix := openPG(t, testpg.New(t), signer)
		testRetention(t, st, ix, signer)
	})
}

// openPG opens the journal and the memory index of the database at url.
func openPG(t *testing.T, url string, signer *core.Signer) (*postgres.Store, *postgres.MemoryIndex) {
	t.Helper()
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
	return st, ix
}

// tell delivers who's mention in channel ch at the time at, and waits for
// the engine to be idle.
func tell(t *testing.T, e *engine.Engine, ch, msgID, who, text string, at time.Time) {
	t.Helper()
	ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: ch}, Visibility: core.Public,
		MessageID: msgID, Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: at}
	if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func testRetention(t *testing.T, j core.Journal, ix memory.Index, signer *core.Signer) {
	clock := &fakeClock{t: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clock.now)
	svc, e, _ := startChatEngineAt(t, j, b, ix, nil, clock.now)
	n := 0
	say := func(ch, who, text string) {
		t.Helper()
		n++
		tell(t, e, ch, fmt.Sprintf("M%03d", n), who, text, clock.now())
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

// gatedJournal holds its next Read, once armed, until released: a replica
// that read a page before another redacted it.
type gatedJournal struct {
	core.Journal
	armed    atomic.Bool
	read     chan struct{} // closed when the held Read has its page
	release  chan struct{}
	holdOnce sync.Once
}

func (g *gatedJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	cmds, err := g.Journal.Read(ctx, ch, from, limit)
	if g.armed.Load() {
		g.holdOnce.Do(func() {
			close(g.read)
			<-g.release
		})
	}
	return cmds, err
}

// Two replicas' retention passes over one PostgreSQL journal, the second
// working from a page it read before the first redacted it (as without
// the lease): each old command is redacted once, with one marker, neither
// pass fails, and the chains verify.
func TestEngineRetentionTwoReplicas(t *testing.T) {
	url := testpg.New(t)
	signer := coretest.NewSigner(t)
	clock := &fakeClock{t: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clock.now)
	stA, ixA := openPG(t, url, signer)
	stB, ixB := openPG(t, url, signer)
	gated := &gatedJournal{Journal: stB, read: make(chan struct{}), release: make(chan struct{})}
	_, a, _ := startChatEngineAt(t, stA, b, ixA, nil, clock.now)
	_, bEng, _ := startChatEngineAt(t, gated, b, ixB, nil, clock.now)
	for i, text := range []string{"how is the albatross survey going", "remember the harbour gate code is 4417", "what about the narwhal plan"} {
		tell(t, a, "C1", fmt.Sprintf("M%d", i), "UALICE", text, clock.now())
	}
	clock.add(91 * 24 * time.Hour)
	const limit = 90 * 24 * time.Hour

	gated.armed.Store(true)
	errB := make(chan error, 1)
	var passB engine.RetentionPass
	go func() {
		var err error
		passB, err = bEng.Retain(t.Context(), limit, 0)
		errB <- err
	}()
	<-gated.read // B holds its page of C1, read before A's pass
	passA, err := a.Retain(t.Context(), limit, 0)
	if err != nil || total(passA.Redacted) < 4 {
		t.Fatalf("replica A's pass: %+v %v", passA, err)
	}
	close(gated.release)
	if err := <-errB; err != nil {
		t.Fatalf("replica B's pass, on a page read before A's: %v", err)
	}
	if total(passB.Redacted) != 0 {
		t.Errorf("replica B redacted %v again", passB.Redacted)
	}
	cmds, err := stA.Read(t.Context(), "test/W/C1", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	redacted, markers := 0, 0
	for _, c := range cmds {
		if c.Redacted() {
			redacted++
		}
		if c.Kind() == core.KindCommandRedacted {
			markers++
		}
	}
	if redacted != total(passA.Redacted) || markers != redacted {
		t.Errorf("%d redacted commands, %d markers, A counted %d", redacted, markers, total(passA.Redacted))
	}
	if _, err := core.VerifyChannel(t.Context(), stA, signer.Verifier(), "test/W/C1"); err != nil {
		t.Errorf("verify: %v", err)
	}
}
