package scheduler_test

import (
	"context"

	"github.com/marlowe-bot/marlowe/scheduler"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/tools"
)

// newModelWorldWith is newModelWorld with extra tools registered.
func newModelWorldWith(t *testing.T, m core.Model, extra ...core.Tool) *world {
	t.Helper()
	return newWorldWith(t, m, nil, extra...)
}

// Attack (laundered targets): a channel Bob merely mentioned in the
// channel ("what is #exfil for?") reaches the routine's digest. A firing
// whose model then posts there must not pass it as "named by the
// requester": only the routine's own instruction is the owner's words.
func TestAttackFiringDigestDoesNotLaunderTargets(t *testing.T) {
	var firing []core.View
	m := coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		if strings.HasPrefix(v.Messages[0].Text, "Scheduled task") {
			firing = append(firing, v)
			return core.Reply{ToolCalls: []core.ToolCall{coretest.Call("c1", "post_to_channel", `{"channel":"exfil","text":"the summary"}`)}}, nil
		}
		return core.Reply{Text: "It is where exports go."}, nil
	}, coretest.Text("done"))
	w := newModelWorldWith(t, m, tools.PostToChannel())
	routineID(t, w.say(alice, "routine add @every 10m: summarise the channel and post it where it belongs"))
	w.say(bob, "what is #exfil for?")
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	if len(firing) == 0 {
		t.Fatal("the firing's run never called the model")
	}
	for _, p := range w.s.PostsIn("exfil") {
		t.Fatalf("posted into #exfil without asking: %q", p.Out.Text)
	}
	v := firing[0]
	if !strings.Contains(v.Messages[0].Text, "summarise the channel") || strings.Contains(v.Messages[0].Text, "exfil") {
		t.Fatalf("the firing's instruction message carries more than the routine's instruction: %q", v.Messages[0].Text)
	}
	var fenced bool
	for _, msg := range v.Messages[1:] {
		if strings.Contains(msg.Text, "exfil") && strings.Contains(msg.Text, `<untrusted-content source="routine">`) {
			fenced = true
		}
	}
	if !fenced {
		t.Fatalf("the digest data is not shown as untrusted context: %+v", v.Messages)
	}
	var decided []*core.PermissionDecided
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindPermissionDecided {
			if p, _ := core.Decode[*core.PermissionDecided](c); p.Tool == "post_to_channel" {
				decided = append(decided, p)
			}
		}
	}
	if len(decided) != 1 || decided[0].Decision != "ask" || !strings.Contains(decided[0].Reason, "does not come from the requester") {
		t.Fatalf("permission decisions: %+v", decided)
	}
	if n := w.count(core.KindApprovalRequested); n != 1 {
		t.Fatalf("%d approval.requested, want the owner's consent card", n)
	}
}

var admin = core.Person{ID: "UADMIN", Name: "Admin"}

// Attack (anyone fires anything): a member who neither owns a routine nor
// administers the channel cannot run it; nor can anyone run a paused one.
func TestAttackRoutineRunBelongsToOwnerOrAdminAndNeedsArmed(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add @every 10m: digest"))
	if r := w.say(bob, "routine run "+id); !strings.Contains(r, "only its owner or an admin") {
		t.Fatalf("bob's run of alice's routine: %q", r)
	}
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("a member's run fired: %+v", f)
	}
	if r := w.say(alice, "routine pause "+id); !strings.Contains(r, "paused") {
		t.Fatalf("pause: %q", r)
	}
	for _, by := range []core.Person{alice, admin} {
		if r := w.say(by, "routine run "+id); !strings.Contains(r, "only an armed routine can be run") {
			t.Fatalf("%s's run of a paused routine: %q", by.ID, r)
		}
	}
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("a paused routine was run: %+v", f)
	}
	w.say(alice, "routine resume "+id)
	if r := w.say(admin, "routine run "+id); !strings.Contains(r, "ran") {
		t.Fatalf("an admin's run of an armed routine: %q", r)
	}
	if f := w.fired(); len(f) != 1 || f[0].Outcome != scheduler.OutcomeManual {
		t.Fatalf("fired: %+v", f)
	}
}

// Attack (no rate limit): a manual run waits out the minimum interval
// since the routine's last firing.
func TestAttackRoutineRunHasACooldownOfTheMinimumInterval(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add @every 1h: digest"))
	if r := w.say(alice, "routine run "+id); !strings.Contains(r, "ran") {
		t.Fatalf("first run: %q", r)
	}
	w.clk.Advance(4 * time.Minute)
	if r := w.say(alice, "routine run "+id); !strings.Contains(r, "can run again in 1m0s") {
		t.Fatalf("second run within the minimum interval: %q", r)
	}
	if n := len(w.fired()); n != 1 {
		t.Fatalf("%d firings, want 1", n)
	}
	w.clk.Advance(time.Minute)
	if r := w.say(alice, "routine run "+id); !strings.Contains(r, "ran") {
		t.Fatalf("run after the minimum interval: %q", r)
	}
	if n := len(w.fired()); n != 2 {
		t.Fatalf("%d firings, want 2", n)
	}
}

// Attack (no budget check): a manual run of a model routine is refused
// when the channel's daily token budget is used up.
func TestAttackRoutineRunObeysTheDailyBudget(t *testing.T) {
	m := newFiringModel(func(int) int { return 100 })
	w := newModelWorld(t, m.script)
	id := routineID(t, w.say(alice, "routine add @every 1h: summarise"))
	w.say(admin, "policy set budget 100")
	if r := w.say(alice, "routine run "+id); !strings.Contains(r, "is running") {
		t.Fatalf("first run: %q", r)
	}
	w.idle() // 120 tokens: the day's 100 are gone
	w.clk.Advance(10 * time.Minute)
	if r := w.say(alice, "routine run "+id); !strings.Contains(r, "daily token budget is used up") {
		t.Fatalf("run over budget: %q", r)
	}
	if n := len(m.seeds); n != 1 {
		t.Fatalf("%d model runs, want 1", n)
	}
}

// Attack (arming without the click): an admin's `routine resume` (or
// `pause` then `resume`) on someone else's proposal does not arm it, and a
// routine.changed by anyone but the requester arms no proposal in the
// fold; the requester typing `resume` does.
func TestAttackOnlyTheRequesterArmsAProposal(t *testing.T) {
	w := newModelWorld(t, proposingModel(`{"spec":"@every 10m","instruction":"summarise"}`))
	w.say(alice, "every ten minutes, summarise")
	p, _, _ := w.proposal()
	for _, op := range []string{"resume", "pause", "run"} {
		if r := w.say(admin, "routine "+op+" "+p.RoutineID); !strings.Contains(r, "waiting for <@"+alice.ID+"> to arm") {
			t.Fatalf("admin's %s of alice's proposal: %q", op, r)
		}
	}
	// Journaled straight past the command's check, an admin's arming still
	// arms nothing: the fold arms a proposal first from its requester.
	d, err := w.b.Human(admin, room, core.Meta{}, &core.RoutineChanged{RoutineID: p.RoutineID, Armed: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.j.Append(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("a proposal nobody's requester armed fired: %+v", f)
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "paused") {
		t.Fatalf("list: %q", l)
	}
}

func TestRequesterTypingResumeArmsTheirProposal(t *testing.T) {
	w := newModelWorld(t, proposingModel(`{"spec":"@every 10m","instruction":"summarise"}`))
	w.say(alice, "every ten minutes, summarise")
	p, _, _ := w.proposal()
	if r := w.say(alice, "routine resume "+p.RoutineID); !strings.Contains(r, "resumed") {
		t.Fatalf("alice's resume: %q", r)
	}
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	if f := w.fired(); len(f) != 1 {
		t.Fatalf("fired after the requester's resume: %+v", f)
	}
}

// replayTool carries out the routine tool call of the run that answered
// text again, with the same journaled request: what a run re-executed after
// a crash or a lease handover does.
func (w *world) replayTool(text string) string {
	w.t.Helper()
	var req core.Command
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindToolRequested {
			if p, _ := core.Decode[*core.ToolRequested](c); p.Call.Name == "routine" && strings.Contains(p.Call.Args, text) {
				req = c
			}
		}
	}
	if req.ID() == "" {
		w.t.Fatalf("no routine call for %q", text)
	}
	p, _ := core.Decode[*core.ToolRequested](req)
	sc := room
	sc.Thread = req.Scope().Thread
	obs, err := w.sch.Tool().Run(context.Background(), core.ToolContext{Run: req.Run(), Scope: sc, CallID: p.Call.ID, Origin: req.ID()}, []byte(p.Call.Args))
	if err != nil {
		w.t.Fatalf("replay of %q: %v", text, err)
	}
	return obs.Text
}

// Attack (replays duplicate): `routine add` and `routine run` carried out
// again for the same journaled request create no second routine and no
// second firing: their ids are keyed by the request.
func TestAttackReplayedRoutineAddAndRunAreIdempotent(t *testing.T) {
	w := newWorld(t)
	first := w.say(alice, "routine add @every 1h: digest")
	id := routineID(t, first)
	if again := w.replayTool("routine add @every 1h: digest"); routineID(t, again) != id {
		t.Fatalf("replayed add answered %q, first %q", again, first)
	}
	if n := w.count(core.KindRoutineCreated); n != 1 {
		t.Fatalf("%d routine.created after a replayed add", n)
	}
	w.say(alice, "routine run "+id)
	w.clk.Advance(time.Hour) // past any cooldown: only the key stops a second firing
	w.replayTool("routine run " + id)
	if f := w.fired(); len(f) != 1 {
		t.Fatalf("%d firings after a replayed run", len(f))
	}
}

// Attack (the minimum interval dodged): a schedule that fires more often
// than the minimum interval (here a spec journaled past the command's
// check, as one accepted under a shorter minimum or crossing a DST change
// would) still fires at most once per minimum interval.
func TestAttackMinimumIntervalHoldsAtFiringTime(t *testing.T) {
	w := newWorld(t)
	d, err := w.b.Human(alice, room, core.Meta{}, &core.RoutineCreated{RoutineID: "rfast", Cron: "* * * * *", TZ: "UTC", Instruction: "digest", Owner: alice.ID, Armed: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.j.Append(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.clk.Advance(time.Minute)
		w.tick()
	}
	var f []*core.RoutineFired
	for _, p := range w.fired() {
		if p.Outcome == scheduler.OutcomeFired {
			f = append(f, p) // the slots held back are journaled skipped (coalesced)
		}
	}
	if len(f) != 2 || f[1].Slot.Sub(f[0].Slot) < 5*time.Minute {
		t.Fatalf("fired %d times in 10 minutes of a 1-minute spec: %+v", len(f), f)
	}
}
