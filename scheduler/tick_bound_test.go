package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// postingEngine posts digests by journaling their message.posted, as the
// engine does, and answers nothing else.
type postingEngine struct {
	j     core.Journal
	b     *core.Boundary
	mu    sync.Mutex
	posts []string
}

func (e *postingEngine) PostRoutine(ctx context.Context, p core.DigestPost) (core.MessageRef, error) {
	d, err := e.b.System("engine", p.Scope, core.Meta{Cause: p.Cause}, &core.MessagePosted{EffectID: p.Key, MessageID: "P-" + p.Key, Role: core.RoleMessage, Text: p.Text})
	if err != nil {
		return core.MessageRef{}, err
	}
	if _, err := e.j.Append(ctx, d); err != nil {
		return core.MessageRef{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.posts = append(e.posts, p.Text)
	return core.MessageRef{}, nil
}
func (e *postingEngine) HasModel() bool { return false }
func (e *postingEngine) StartUnattended(context.Context, core.UnattendedRun) (string, error) {
	return "", nil
}
func (e *postingEngine) DailyBudget(context.Context, core.Scope) (int, int, error) { return 0, 0, nil }
func (e *postingEngine) NotifyOwner(context.Context, core.OwnerNotice) error       { return nil }
func (e *postingEngine) IsAdmin(context.Context, core.Scope, core.Person) bool     { return false }

// chatter appends n people's messages to sc.
func chatter(t testing.TB, j core.Journal, b *core.Boundary, sc core.Scope, from, n int) {
	t.Helper()
	ann := core.Person{ID: "UANN", Name: "Ann"}
	for i := from; i < from+n; i++ {
		d, err := b.Human(ann, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprint("M", i), Author: ann, Visibility: core.Public, Text: fmt.Sprint("chatter ", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// A pass reads a routine channel's tail, not its journal: once read, a
// tick with nothing new reads no command, one after a few new commands
// reads those, and a firing reads what its digest covers (the commands
// since the last successful firing), however long the channel is. (Before,
// every tick and every firing read the whole channel again.)
func TestTickReadsOnlyTheTail(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := t0
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); defer mu.Unlock(); now = t }
	b := core.NewBoundary(clk)
	mem := coretest.NewMemJournal(coretest.NewSigner(t))
	sc := core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"}
	ann := core.Person{ID: "UANN", Name: "Ann"}
	d, err := b.Human(ann, sc, core.Meta{}, &core.RoutineCreated{RoutineID: "r1", Cron: "@every 10m", TZ: "UTC", Instruction: "digest", Owner: ann.ID, Armed: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Append(ctx, d); err != nil {
		t.Fatal(err)
	}
	const long = 3000
	chatter(t, mem, b, sc, 0, long)
	read := 0
	s, err := New(Config{Journal: countingJournal{mem, &read}, Boundary: b, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	eng := &postingEngine{j: mem, b: b}
	s.Bind(eng)
	tick := func(what string, max int) {
		t.Helper()
		read = 0
		if err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if read > max {
			t.Fatalf("%s: the pass read %d commands of a %d-command channel, want at most %d", what, read, long, max)
		}
	}
	set(t0.Add(time.Minute))
	tick("first pass", long+10) // a new scheduler reads the channel once
	tick("a pass with nothing new", 0)
	chatter(t, mem, b, sc, long, 3)
	tick("a pass after 3 new commands", 3)
	set(t0.Add(10 * time.Minute))
	tick("the first firing", 2*long+20) // its digest covers the channel since the routine's creation
	if len(eng.posts) != 1 {
		t.Fatalf("digests posted: %d, want 1", len(eng.posts))
	}
	chatter(t, mem, b, sc, long+3, 4)
	set(t0.Add(20 * time.Minute))
	// The tail (the firing, its post, 4 messages) and the digest's window
	// (the post and the 4 messages).
	tick("the second firing", 11)
	if len(eng.posts) != 2 {
		t.Fatalf("digests posted: %d, want 2", len(eng.posts))
	}
	tick("a pass after a firing", 2) // the second firing and its post
}
