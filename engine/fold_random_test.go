package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// foldGen writes random but well-formed channel histories: runs that start,
// step, ask for approvals, pause, complete and fail; approvals resolved
// (more than once, late, or never); consents granted and revoked (by id,
// by the pre-id tool/destination form, or unknown); policy changes, posts
// (some of them a failed run's end notice), memories, routines and the
// observations a run journals.
type foldGen struct {
	t   testing.TB
	r   *rand.Rand
	b   *core.Boundary
	clk *clock
	sc  core.Scope
	n   int

	runs        []*genRun
	approvals   []string
	approvalRun map[string]string // approval id → its run
	consents    []string          // ids granted (some revoked since)
	memories    []string
	routines    []string
	failed      []uint64 // seqs of run.failed: their end notice's effect id
	threads     []string
}

type genRun struct {
	id, thread string
	live       bool
}

var genPeople = []core.Person{alice, bob, carol}

// id is unique in the journal: iterations share one Postgres database.
func (g *foldGen) id(prefix string) string {
	g.n++
	return fmt.Sprintf("%s%s-%03d", prefix, g.sc.Channel, g.n)
}

func (g *foldGen) person() core.Person { return genPeople[g.r.IntN(len(genPeople))] }

func (g *foldGen) pick(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return xs[g.r.IntN(len(xs))]
}

func (g *foldGen) runOf() *genRun {
	var live []*genRun
	for _, r := range g.runs {
		if r.live {
			live = append(live, r)
		}
	}
	if len(live) > 0 && g.r.IntN(5) > 0 {
		return live[g.r.IntN(len(live))]
	}
	if len(g.runs) == 0 {
		return nil
	}
	return g.runs[g.r.IntN(len(g.runs))] // ended runs get late commands too
}

func (g *foldGen) must(d core.Draft, err error) core.Draft {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
	return d
}

func (g *foldGen) in(thread string) core.Scope {
	sc := g.sc
	sc.Thread = thread
	return sc
}

// next returns the drafts of one step (appended together, as the engine
// appends a message and the run it starts).
func (g *foldGen) next() []core.Draft {
	g.clk.Advance(time.Duration(1+g.r.IntN(7200)) * time.Second)
	tools := []string{"post_to_channel", "remember", "web_fetch"}
	dests := []string{"", "#general", "#ops"}
	switch k := g.r.IntN(100); {
	case k < 12: // a message, maybe starting a run
		who, mid := g.person(), g.id("M")
		thread := ""
		if len(g.threads) > 0 && g.r.IntN(3) == 0 {
			thread = g.pick(g.threads)
		}
		vis := core.Public
		if g.r.IntN(8) == 0 {
			vis = core.DM
		}
		if g.r.IntN(3) == 0 {
			return []core.Draft{g.must(g.b.Human(who, g.in(thread), core.Meta{}, &core.MessageReceived{MessageID: mid, Author: who, Visibility: vis, Text: "chatter " + mid}))}
		}
		run := &genRun{id: g.id("R"), thread: thread, live: true}
		if run.thread == "" && vis != core.DM {
			run.thread = mid
		}
		g.runs = append(g.runs, run)
		g.threads = append(g.threads, run.thread)
		mr := g.must(g.b.Human(who, g.in(thread), core.Meta{Run: run.id}, &core.MessageReceived{MessageID: mid, Author: who, Visibility: vis, Text: "please " + mid}))
		rs := g.must(g.b.Agent(run.id, g.in(run.thread), core.Meta{Cause: mr.ID()}, &core.RunStarted{Trigger: mid, Instruction: "please " + mid}))
		return []core.Draft{mr, rs}
	case k < 18: // steering: a message in a run's thread
		r := g.runOf()
		if r == nil {
			return nil
		}
		who, mid := g.person(), g.id("M")
		return []core.Draft{g.must(g.b.Human(who, g.in(r.thread), core.Meta{Run: r.id}, &core.MessageReceived{MessageID: mid, Author: who, Visibility: core.Public, Text: "also " + mid}))}
	case k < 28:
		r := g.runOf()
		if r == nil {
			return nil
		}
		return []core.Draft{g.must(g.b.Agent(r.id, g.in(r.thread), core.Meta{}, &core.ModelStep{Index: g.n, Text: "step",
			Usage: core.Usage{InputTokens: g.r.IntN(500), OutputTokens: g.r.IntN(100)}, Final: g.r.IntN(3) == 0}))}
	case k < 36:
		r := g.runOf()
		if r == nil {
			return nil
		}
		id := g.id("A")
		g.approvals = append(g.approvals, id)
		if g.approvalRun == nil {
			g.approvalRun = map[string]string{}
		}
		g.approvalRun[id] = r.id
		cons := []string{"write", "external", "irreversible"}[g.r.IntN(3)]
		return []core.Draft{g.must(g.b.Agent(r.id, g.in(r.thread), core.Meta{}, &core.ApprovalRequested{ApprovalID: id, CallID: g.id("c"),
			Tool: g.pick(tools), Consequence: cons, Requester: g.person().ID, Destination: g.pick(dests), ExpiresAt: g.clk.Now().Add(24 * time.Hour)}))}
	case k < 46: // resolutions: pending ones mostly, decided ones again sometimes
		if len(g.approvals) == 0 {
			return nil
		}
		id := g.pick(g.approvals)
		dec := []string{"approved", "declined", "expired", "superseded", "answered"}[g.r.IntN(5)]
		run := g.approvalRun[id] // the engine journals a resolution in the card's run
		if dec == "expired" {
			return []core.Draft{g.must(g.b.System("expiry", g.sc, core.Meta{Run: run}, &core.ApprovalResolved{ApprovalID: id, Decision: dec}))}
		}
		by := g.person()
		return []core.Draft{g.must(g.b.Human(by, g.sc, core.Meta{Run: run}, &core.ApprovalResolved{ApprovalID: id, Decision: dec, By: by}))}
	case k < 49:
		r := g.runOf()
		if r == nil {
			return nil
		}
		st := []core.RunStatus{core.RunBlocked, core.RunNeedsPermission}[g.r.IntN(2)]
		return []core.Draft{g.must(g.b.Agent(r.id, g.in(r.thread), core.Meta{}, &core.RunPaused{Status: st, Reason: "paused"}))}
	case k < 53:
		r := g.runOf()
		if r == nil {
			return nil
		}
		r.live = false
		return []core.Draft{g.must(g.b.Agent(r.id, g.in(r.thread), core.Meta{}, &core.RunCompleted{Summary: "done"}))}
	case k < 56:
		r := g.runOf()
		if r == nil {
			return nil
		}
		r.live = false
		st := []core.RunStatus{core.RunBroken, core.RunCancelled}[g.r.IntN(2)]
		cause := []string{"model down", "superseded by a new message in the thread", "cancelled by alice"}[g.r.IntN(3)]
		return []core.Draft{g.must(g.b.Agent(r.id, g.in(r.thread), core.Meta{}, &core.RunFailed{Status: st, Cause: cause}))}
	case k < 63: // posts: answers, cards, a failed run's notice
		r := g.runOf()
		if r == nil {
			return nil
		}
		fx := g.id("fx")
		role := []string{core.RoleAnswer, core.RoleNotice, core.RoleCard, core.RoleChecklist}[g.r.IntN(4)]
		if len(g.failed) > 0 && g.r.IntN(3) == 0 {
			fx, role = core.EffectID(g.sc.Key(), g.failed[g.r.IntN(len(g.failed))], 0), core.RoleNotice
		}
		return []core.Draft{g.must(g.b.Agent(r.id, g.in(r.thread), core.Meta{}, &core.MessagePosted{EffectID: fx, MessageID: g.id("P"), Role: role, Text: "answer " + fx}))}
	case k < 68:
		id := g.id("K")
		if g.r.IntN(5) == 0 {
			id = "" // a grant from before consent ids
		} else {
			g.consents = append(g.consents, id)
		}
		owner := g.person()
		return []core.Draft{g.must(g.b.Human(owner, g.sc, core.Meta{}, &core.ConsentGranted{ConsentID: id, Tool: g.pick(tools), Destination: g.pick(dests), Owner: owner.ID}))}
	case k < 72:
		by := g.person()
		p := &core.ConsentRevoked{Tool: g.pick(tools), Destination: g.pick(dests), Owner: by.ID}
		switch g.r.IntN(3) {
		case 0:
			p.ConsentID = g.pick(g.consents)
		case 1:
			p.ConsentID = "Knope"
		}
		return []core.Draft{g.must(g.b.Human(by, g.sc, core.Meta{}, p))}
	case k < 74:
		var pol core.Policy
		for _, p := range genPeople {
			if g.r.IntN(2) == 0 {
				pol.Approvers = append(pol.Approvers, p.ID)
			}
		}
		pol.DailyTokenBudget = g.r.IntN(3) * 10000
		return []core.Draft{g.must(g.b.Human(alice, g.sc, core.Meta{}, &core.PolicyChanged{Policy: pol}))}
	case k < 80:
		switch g.r.IntN(3) {
		case 0:
			id := g.id("mem")
			g.memories = append(g.memories, id)
			return []core.Draft{g.must(g.b.Human(g.person(), g.sc, core.Meta{}, &core.MemoryWritten{MemoryID: id, Text: "note " + id}))}
		case 1:
			return []core.Draft{g.must(g.b.Human(g.person(), g.sc, core.Meta{}, &core.MemoryForgotten{MemoryID: g.pick(g.memories)}))}
		default:
			return []core.Draft{g.must(g.b.System("operator", g.sc, core.Meta{}, &core.MemoryRedacted{MemoryID: g.pick(g.memories), Seq: 1}))}
		}
	case k < 85:
		switch g.r.IntN(3) {
		case 0:
			id := g.id("rt")
			g.routines = append(g.routines, id)
			return []core.Draft{g.must(g.b.Human(bob, g.sc, core.Meta{}, &core.RoutineCreated{RoutineID: id, Cron: "0 9 * * *", TZ: "UTC", Instruction: "digest", Owner: bob.ID, Armed: true}))}
		case 1:
			return []core.Draft{g.must(g.b.Human(bob, g.sc, core.Meta{}, &core.RoutineChanged{RoutineID: g.pick(g.routines), Cron: "0 10 * * *", Armed: g.r.IntN(2) == 0, Deleted: g.r.IntN(4) == 0}))}
		default:
			out := []string{"", "fired", "skipped", "manual"}[g.r.IntN(4)]
			return []core.Draft{g.must(g.b.System("scheduler", g.sc, core.Meta{}, &core.RoutineFired{RoutineID: g.pick(g.routines), Slot: g.clk.Now().Truncate(time.Hour), Outcome: out}))}
		}
	default: // what a run observes: clicks, tool calls, card edits
		r := g.runOf()
		if r == nil {
			return nil
		}
		sc := g.in(r.thread)
		switch g.r.IntN(5) {
		case 0:
			by := g.person()
			return []core.Draft{g.must(g.b.Human(by, sc, core.Meta{Run: r.id}, &core.CardClicked{Card: g.pick(g.approvals), Action: "approve", Token: "t", By: by}))}
		case 1:
			return []core.Draft{g.must(g.b.Agent(r.id, sc, core.Meta{}, &core.ToolRequested{Call: core.ToolCall{ID: g.id("c"), Name: g.pick(tools), Args: "{}"}}))}
		case 2:
			return []core.Draft{g.must(g.b.Agent(r.id, sc, core.Meta{}, &core.PermissionDecided{CallID: g.id("c"), Tool: g.pick(tools), Decision: "ask"}))}
		case 3:
			return []core.Draft{g.must(g.b.Agent(r.id, sc, core.Meta{}, &core.ToolCompleted{CallID: g.id("c"), Tool: g.pick(tools), OK: true, Result: "secret result", Trust: "untrusted"}))}
		default:
			return []core.Draft{g.must(g.b.Agent(r.id, sc, core.Meta{}, &core.MessageUpdated{EffectID: g.id("fx"), MessageID: g.id("P"), Text: "edited"}))}
		}
	}
}

// countOnly are the kinds whose payload no channel state reads: redacting
// one leaves the fold as it was, so a live cache stays equal to a re-fold.
var countOnly = []core.Kind{core.KindCardClicked, core.KindToolRequested, core.KindPermissionDecided, core.KindToolCompleted, core.KindMessageUpdated}

// redact destroys the payload of a random earlier command (of one of
// kinds, when given), as `bot redact` does, and returns whether it did.
func (g *foldGen) redact(ctx context.Context, j core.Journal, kinds []core.Kind) bool {
	g.t.Helper()
	cmds, err := j.Read(ctx, g.sc.Key(), 1, 0)
	if err != nil {
		g.t.Fatal(err)
	}
	var targets []core.Command
	for _, c := range cmds {
		if !c.Redacted() && c.Kind() != core.KindCommandRedacted && (kinds == nil || slices.Contains(kinds, c.Kind())) {
			targets = append(targets, c)
		}
	}
	if len(targets) == 0 {
		return false
	}
	c := targets[g.r.IntN(len(targets))]
	d := g.must(g.b.System("operator", g.sc, core.Meta{}, &core.CommandRedacted{Seq: c.Seq(), ID: c.ID(), Reason: "privacy request"}))
	if _, err := j.Redact(ctx, c.Seq(), d); err != nil {
		g.t.Fatalf("redact seq %d: %v", c.Seq(), err)
	}
	return true
}

// foldWorld is a real engine over a journal, and a second handle on the
// journal for what other processes append (the CLI, another replica).
type foldWorld struct {
	j   core.Journal
	b   *core.Boundary
	clk *clock
}

func newFoldEngine(t testing.TB, w foldWorld) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		Journal: w.j, Boundary: w.b, CardKey: cardKey, Clock: w.clk.Now,
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func sameFold(t testing.TB, what string, got, want engine.FoldDump) {
	t.Helper()
	if got.State != want.State {
		t.Fatalf("%s: channel state differs\n got: %s\nwant: %s", what, got.State, want.State)
	}
	if got.Engine != want.Engine {
		t.Fatalf("%s: engine fields differ\n got: %s\nwant: %s", what, got.Engine, want.Engine)
	}
}

// checkRandomHistories drives a live engine with random histories and
// requires its cache to equal the fold of its journal: while it runs (its
// own appends, others' appends it catches up on, redactions of payloads no
// state reads), and after a restart (redactions of anything).
func checkRandomHistories(t *testing.T, iterations, steps int, world func(t *testing.T, i int) foldWorld) {
	ctx := t.Context()
	for i := range iterations {
		w := world(t, i)
		g := &foldGen{t: t, r: rand.New(rand.NewPCG(uint64(i), 0x5eed)), b: w.b, clk: w.clk, sc: chanScope(fmt.Sprintf("F%d", i))}
		e := newFoldEngine(t, w)
		for range steps {
			if g.r.IntN(25) == 0 {
				g.redact(ctx, w.j, countOnly)
				continue
			}
			drafts := g.next()
			if len(drafts) == 0 {
				continue
			}
			var cmds []core.Command
			var err error
			if g.r.IntN(4) == 0 {
				cmds, err = w.j.Append(ctx, drafts...) // another process: the engine catches up
			} else {
				cmds, err = engine.AppendVia(ctx, e, drafts...)
			}
			if err != nil {
				t.Fatalf("iteration %d: append: %v", i, err)
			}
			for _, c := range cmds {
				if c.Kind() == core.KindRunFailed {
					g.failed = append(g.failed, c.Seq())
				}
			}
		}
		// The engine's last append catches it up on whatever others wrote.
		who := g.person()
		last := g.must(g.b.Human(who, g.sc, core.Meta{}, &core.MessageReceived{MessageID: g.id("M"), Author: who, Visibility: core.Public, Text: "last"}))
		if _, err := engine.AppendVia(ctx, e, last); err != nil {
			t.Fatal(err)
		}
		journal, err := w.j.Read(ctx, g.sc.Key(), 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := engine.FoldDumpOf(g.sc.Key(), journal)
		if err != nil {
			t.Fatalf("iteration %d: fold: %v", i, err)
		}
		live, err := engine.EngineFoldDump(ctx, e, g.sc.Key())
		if err != nil {
			t.Fatal(err)
		}
		sameFold(t, fmt.Sprintf("iteration %d (%d commands): live engine vs fold of its journal", i, len(journal)), live, want)
		checkSnapshots(t, fmt.Sprintf("iteration %d", i), g.r, g.sc.Key(), journal, want)
		st, err := fold.Fold(g.sc.Key(), journal)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Counts) < 10 || st.Seq != uint64(len(journal)) {
			t.Fatalf("iteration %d: a thin history (%d kinds, seq %d): the generator is broken", i, len(st.Counts), st.Seq)
		}

		// Each run's own fold (what the driver resumes from, `bot replay
		// --run`) puts the run where the channel's fold does.
		for id, r := range st.Runs {
			rcmds, err := w.j.ReadRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := engine.ReplayRun(rcmds)
			if err != nil {
				continue // a run with no run.started: only the channel knows it
			}
			if rs.Status != r.Status {
				t.Fatalf("iteration %d: run %s: run replay says %s, channel fold says %s", i, id, rs.Status, r.Status)
			}
		}

		// Redact anything (a message, a grant, a resolution), then a new
		// engine loads the journal: it must see what bot replay sees.
		for range 1 + g.r.IntN(4) {
			g.redact(ctx, w.j, nil)
		}
		journal, err = w.j.Read(ctx, g.sc.Key(), 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want, err = engine.FoldDumpOf(g.sc.Key(), journal); err != nil {
			t.Fatal(err)
		}
		restarted, err := engine.EngineFoldDump(ctx, newFoldEngine(t, w), g.sc.Key())
		if err != nil {
			t.Fatal(err)
		}
		sameFold(t, fmt.Sprintf("iteration %d: restarted engine vs fold of the redacted journal", i), restarted, want)
		checkSnapshots(t, fmt.Sprintf("iteration %d, redacted", i), g.r, g.sc.Key(), journal, want)
	}
}

func TestFoldRandomHistoriesEngineEqualsReplay(t *testing.T) {
	signer := coretest.NewSigner(t)
	checkRandomHistories(t, 150, 150, func(t *testing.T, i int) foldWorld {
		clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
		return foldWorld{j: coretest.NewMemJournal(signer), b: core.NewBoundary(clk.Now), clk: clk}
	})
}

// The same on the Postgres journal: commands that went through a real
// database (encoded, stored, read back) fold as the live cache folded them.
func TestFoldRandomHistoriesEngineEqualsReplayPostgres(t *testing.T) {
	url := testpg.New(t)
	j, err := postgres.Open(t.Context(), url, coretest.NewSigner(t))
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	t.Cleanup(j.Close)
	checkRandomHistories(t, 8, 150, func(t *testing.T, i int) foldWorld {
		clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
		return foldWorld{j: j, b: core.NewBoundary(clk.Now), clk: clk}
	})
}
