package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// randomChannel journals a channel mixing everything a digest reads (runs
// that start before a firing and finish after it, approvals asked before
// and resolved after, memories written and forgotten, chatter, redacted
// commands) with a routine and firings, some delivered.
func randomChannel(t *testing.T, rng *rand.Rand, j core.Journal, b *core.Boundary, clk *time.Time) {
	t.Helper()
	ctx := context.Background()
	sc := core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"}
	ann := core.Person{ID: "UANN", Name: "Ann"}
	app := func(d core.Draft, err error) core.Command {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		*clk = clk.Add(time.Duration(1+rng.IntN(90)) * time.Second)
		cmds, err := j.Append(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return cmds[0]
	}
	app(b.Human(ann, sc, core.Meta{}, &core.RoutineCreated{RoutineID: "r1", Cron: "@every 5m", TZ: "UTC", Instruction: "digest", Owner: ann.ID, Armed: true}))
	var open, asked []string
	var firings []core.Command
	n := 0
	for i := 0; i < 400; i++ {
		n++
		switch x := rng.IntN(20); {
		case x < 6:
			app(b.Human(ann, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprint("M", n), Author: ann, Visibility: core.Public, Text: fmt.Sprint("chatter ", n)}))
		case x < 8:
			run := fmt.Sprint("run", n)
			app(b.Human(ann, sc, core.Meta{Run: run}, &core.MessageReceived{MessageID: fmt.Sprint("M", n), Author: ann, Visibility: core.Public, Text: fmt.Sprint("question ", n)}))
			app(b.Agent(run, sc, core.Meta{}, &core.RunStarted{Trigger: fmt.Sprint("M", n)}))
			open = append(open, run)
		case x < 10 && len(open) > 0:
			k := rng.IntN(len(open))
			run := open[k]
			open = append(open[:k], open[k+1:]...)
			if rng.IntN(3) > 0 {
				app(b.Agent(run, sc, core.Meta{}, &core.ModelStep{Text: "answer to " + run + "\nmore", Final: true}))
			}
			if rng.IntN(4) == 0 {
				app(b.Agent(run, sc, core.Meta{}, &core.RunFailed{Status: core.RunBroken, Cause: "boom"}))
			} else {
				app(b.Agent(run, sc, core.Meta{}, &core.RunCompleted{Summary: "summary " + run}))
			}
		case x < 12:
			id := fmt.Sprint("a", n)
			asked = append(asked, id)
			app(b.Agent("arun", sc, core.Meta{}, &core.ApprovalRequested{ApprovalID: id, Tool: "post", Summary: "ask " + id,
				Requester: ann.ID, ExpiresAt: clk.Add(time.Duration(rng.IntN(600)) * time.Minute)}))
		case x < 13 && len(asked) > 0:
			id := asked[rng.IntN(len(asked))]
			app(b.Agent("arun", sc, core.Meta{}, &core.ApprovalResolved{ApprovalID: id, Decision: "approved"}))
		case x < 15:
			id := fmt.Sprint("m", rng.IntN(n))
			if rng.IntN(3) == 0 {
				app(b.Agent("mrun", sc, core.Meta{}, &core.MemoryForgotten{MemoryID: id}))
			} else {
				app(b.Agent("mrun", sc, core.Meta{}, &core.MemoryWritten{MemoryID: fmt.Sprint("m", n), Text: fmt.Sprint("fact ", n)}))
			}
		case x < 17:
			f := app(b.System("scheduler", sc, core.Meta{}, &core.RoutineFired{RoutineID: "r1", Slot: *clk, Outcome: OutcomeManual}))
			firings = append(firings, f)
			if rng.IntN(3) > 0 {
				app(b.System("engine", sc, core.Meta{Cause: f.ID()}, &core.MessagePosted{EffectID: "fx" + f.ID(), MessageID: "P" + f.ID(), Role: core.RoleNotice, Text: "digest"}))
			}
		default:
			c := app(b.Human(ann, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprint("M", n), Author: ann, Visibility: core.Public, Text: "secret"}))
			if rng.IntN(2) == 0 {
				rec, err := b.System("engine", sc, core.Meta{}, &core.CommandRedacted{Seq: c.Seq(), ID: c.ID()})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := j.Redact(ctx, c.Seq(), rec); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// The digest read from the tail (the window since the last successful
// firing, the approvals pending from before it, the earlier commands of the
// runs finished in it) is the digest of every command before the firing,
// for every firing of randomized journals.
func TestTailDigestMatchesTheWholeJournal(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
		b := core.NewBoundary(func() time.Time { return clk })
		j := coretest.NewMemJournal(coretest.NewSigner(t))
		randomChannel(t, rng, j, b, &clk)
		// Firings long past are compiled here, which no pass does (past
		// the grace window a firing is never performed again): a grace
		// window as long as the journal keeps every resolution they need.
		s, err := New(Config{Journal: j, Boundary: b, Clock: func() time.Time { return clk }, Grace: 1000 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ch := core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"}.Key()
		tail, err := s.catchUp(t.Context(), ch)
		if err != nil {
			t.Fatal(err)
		}
		all, err := j.Read(t.Context(), ch, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := tail.routinesOf()["r1"]
		if r == nil || len(r.Firings) == 0 {
			t.Fatalf("seed %d: no firings folded", seed)
		}
		for _, f := range r.Firings {
			got, err := s.tailDigest(t.Context(), tail, r, f)
			if err != nil {
				t.Fatal(err)
			}
			if want := digestFor(r, f, all); got != want {
				t.Fatalf("seed %d, firing at seq %d: the tail's digest differs from the whole journal's\n--- tail:\n%s\n--- whole:\n%s", seed, f.Seq, got, want)
			}
		}
	}
}

// countingJournal counts the commands a scheduler reads.
type countingJournal struct {
	core.Journal
	read *int
}

func (j countingJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	cmds, err := j.Journal.Read(ctx, ch, from, limit)
	*j.read += len(cmds)
	return cmds, err
}

func (j countingJournal) ReadRun(ctx context.Context, run string) ([]core.Command, error) {
	cmds, err := j.Journal.ReadRun(ctx, run)
	*j.read += len(cmds)
	return cmds, err
}
