package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/tools"
)

func TestMemoriesListsNewestFirstWithAuthorsAndPages(t *testing.T) {
	h := newHarness(t, nil, memTools())
	if got := h.say(alice, "memories"); !strings.Contains(got, "no memories yet") {
		t.Errorf("empty memories = %q", got)
	}
	for i := 1; i <= 12; i++ {
		who := alice
		if i%2 == 0 {
			who = bob
		}
		h.say(who, fmt.Sprintf("remember fact number %d", i))
	}
	h.say(alice, "forget m3")
	page1 := h.say(carol, "memories")
	lines := strings.Split(page1, "\n")
	// header, 10 memories, "More", hint
	if len(lines) != 13 || !strings.Contains(lines[0], "newest first (page 1)") {
		t.Fatalf("memories = %q", page1)
	}
	if !strings.HasPrefix(lines[1], "• `m12` fact number 12 — added by <@UBOB>") ||
		!strings.HasPrefix(lines[2], "• `m11` fact number 11 — added by <@UALICE>") {
		t.Errorf("first lines = %q / %q", lines[1], lines[2])
	}
	if !strings.Contains(page1, "More: `memories 2`") || strings.Contains(page1, "`m3`") || !strings.HasPrefix(lines[10], "• `m2` fact number 2 — added by <@UBOB>") {
		t.Errorf("page 1 = %q", page1)
	}
	page2 := h.say(carol, "memories 2")
	if !strings.Contains(page2, "• `m1` fact number 1 — added by <@UALICE>") || strings.Count(page2, "• ") != 1 || strings.Contains(page2, "More:") {
		t.Errorf("page 2 = %q", page2)
	}
	if got := h.say(carol, "memories 9"); !strings.Contains(got, "There is no page 9") {
		t.Errorf("page 9 = %q", got)
	}
}

// The listing is the engine's own answer: with a model configured it is
// served without the model, and the memories come from this channel only.
func TestMemoriesBypassTheModelAndStayInTheChannel(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("model answer"))
	h := newHarness(t, m, memTools())
	ctx := context.Background()
	other := h.mem.For(chanScope("C2").Key())
	if _, err := other.Remember(ctx, "C2's secret", core.Provenance{Actor: core.Actor{Type: core.ActorHuman, ID: bob.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mem.For(chanScope("C1").Key()).Remember(ctx, "C1's note", core.Provenance{Actor: core.Actor{Type: core.ActorSystem, ID: "cli"}}); err != nil {
		t.Fatal(err)
	}
	got := h.say(alice, "memories")
	if !strings.Contains(got, "C1's note — added by the operator") || strings.Contains(got, "secret") {
		t.Errorf("memories = %q", got)
	}
	if m.Calls() != 0 {
		t.Errorf("the model was called %d times", m.Calls())
	}
	if got := h.say(alice, "memories about the launch"); got != "model answer" {
		t.Errorf("a question about memories = %q, want the model's answer", got)
	}
}

func TestDeleteMemoryIsForItsAuthorOrAnAdmin(t *testing.T) {
	h := newHarness(t, nil, memTools(), func(c *engine.Config) {
		c.Operators = []core.Operator{{Platform: platform, UserID: carol.ID}}
	})
	ch := chanScope("C1").Key()
	h.say(alice, "remember alice's phone is 555-0100") // m1, written by a run for Alice
	h.say(bob, "remember bob's desk is by the window") // m2

	if got := h.say(bob, "delete memory m1"); !strings.Contains(got, "Only <@UALICE> (who added it) or an admin") || !strings.Contains(got, "Nothing was deleted") {
		t.Errorf("bob deletes alice's = %q", got)
	}
	if len(h.mem.Notes(ch)) != 2 || len(h.mem.Deletions(ch)) != 0 {
		t.Fatalf("a refused delete changed memory: %v", h.mem.Notes(ch))
	}
	if got := h.say(alice, "delete memory m1"); !strings.Contains(got, "Deleted memory `m1`") {
		t.Errorf("alice deletes hers = %q", got)
	}
	// Carol is an operator: she may delete anyone's.
	if got := h.say(carol, "delete memory m2"); !strings.Contains(got, "Deleted memory `m2`") {
		t.Errorf("admin deletes = %q", got)
	}
	dels := h.mem.Deletions(ch)
	if dels["m1"] != (core.Actor{Type: core.ActorHuman, ID: alice.ID, Platform: platform}) ||
		dels["m2"] != (core.Actor{Type: core.ActorHuman, ID: carol.ID, Platform: platform}) {
		t.Errorf("deleted by %+v, want the people who asked", dels)
	}
	if n := len(h.mem.Notes(ch)); n != 0 {
		t.Errorf("notes left = %d", n)
	}
	if got := h.say(bob, "delete memory m1"); !strings.Contains(got, "is deleted") {
		t.Errorf("delete again = %q", got)
	}
	if got := h.say(alice, "delete memory m77"); !strings.Contains(got, "no memory `m77`") {
		t.Errorf("unknown id = %q", got)
	}
	if got := h.say(alice, "delete memory"); !strings.Contains(got, "delete memory <id>") {
		t.Errorf("usage = %q", got)
	}
	// Another channel's memory cannot be named from here.
	if _, err := h.mem.For(chanScope("C2").Key()).Remember(context.Background(), "C2 note", core.Provenance{Actor: core.Actor{Type: core.ActorHuman, ID: alice.ID}}); err != nil {
		t.Fatal(err)
	}
	if got := h.say(alice, "delete memory m3"); !strings.Contains(got, "no memory `m3`") {
		t.Errorf("cross-channel delete = %q", got)
	}
	if len(h.mem.Notes(chanScope("C2").Key())) != 1 {
		t.Errorf("C2's note was touched")
	}
}

// approvalRun starts a run in C1 that waits for approval of wipe, and
// returns its trigger.
func approvalRun(t *testing.T, h *harness, who core.Person) core.Event {
	t.Helper()
	ev := h.mention(who, "C1", "wipe record 42")
	h.deliver(ev)
	h.idle()
	if len(h.s.Cards()) == 0 {
		t.Fatalf("no approval card")
	}
	return ev
}

func TestStatusAndApprovalsListWhatWaits(t *testing.T) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("w", "wipe", `{"id":"42"}`)), coretest.Text("wiped"))
	h := newHarness(t, m, []core.Tool{wipeTool(log)}, adminsBobCarol)
	if got := h.say(bob, "status"); !strings.Contains(got, "Nothing is running") {
		t.Errorf("idle status = %q", got)
	}
	if got := h.say(bob, "approvals"); !strings.Contains(got, "Nothing is waiting") {
		t.Errorf("idle approvals = %q", got)
	}
	ev := approvalRun(t, h, alice)
	calls := m.Calls()
	st := h.say(bob, "status")
	if !strings.Contains(st, "1 run in this channel") || !strings.Contains(st, "🔐 waiting for approval of wipe — asked by <@UALICE>") ||
		!strings.Contains(st, "thread "+ev.MessageID) {
		t.Errorf("status = %q", st)
	}
	ap := h.say(bob, "approvals")
	if !strings.Contains(ap, "1 request waiting") || !strings.Contains(ap, "wipe (irreversible) — asked by <@UALICE>, expires in 24h") ||
		!strings.Contains(ap, "thread "+ev.MessageID) {
		t.Errorf("approvals = %q", ap)
	}
	if m.Calls() != calls {
		t.Errorf("status and approvals called the model")
	}
	// Decided: nothing waits any more.
	card := h.s.Cards()[0]
	h.click(carol, card.Out.Card.Actions[0].Token, card.Ref.Scope)
	h.idle()
	if got := h.say(bob, "approvals"); !strings.Contains(got, "Nothing is waiting") {
		t.Errorf("approvals after the decision = %q", got)
	}
}

// statusLinks is a surface that links messages (Slack's permalinks).
type statusLinks struct{ *coretest.FakeSurface }

func (statusLinks) Permalink(_ context.Context, ref core.MessageRef) (string, error) {
	return "https://chat.example/" + ref.Scope.Channel + "/" + ref.ID, nil
}

func TestStatusLinksThreadsWhereTheSurfaceCan(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("w", "wipe", `{"id":"42"}`)), coretest.Text("wiped"))
	h := newHarness(t, m, []core.Tool{wipeTool(&toolLog{})}, func(c *engine.Config) {
		c.Surfaces[platform] = statusLinks{c.Surfaces[platform].(*coretest.FakeSurface)}
		c.Operators = []core.Operator{{Platform: platform, UserID: carol.ID}} // someone who may decide it
	})
	ev := approvalRun(t, h, alice)
	if got := h.say(bob, "status"); !strings.Contains(got, "https://chat.example/C1/"+ev.MessageID) {
		t.Errorf("status = %q", got)
	}
}

func TestCancelStopsAWaitingRun(t *testing.T) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("w", "wipe", `{"id":"42"}`)), coretest.Text("wiped"))
	h := newHarness(t, m, []core.Tool{wipeTool(log)}, platformAdmins(carol.ID))
	ev := approvalRun(t, h, alice)
	root := ev.MessageID
	calls := m.Calls()

	// Bob neither asked nor administers: refused (privately), and the
	// run waits on.
	h.sayIn(bob, root, "cancel")
	if w := h.s.Whispers(); len(w) != 1 || w[0].User != bob.ID || !strings.Contains(w[0].Text, "Only <@UALICE> or an admin can cancel this") {
		t.Errorf("bob's cancel answered %+v, want a private refusal", w)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunWaitingApproval {
			t.Fatalf("after a refused cancel the run is %s", r.Status)
		}
	}
	if m.Calls() != calls {
		t.Errorf("a refused cancel reached the model")
	}

	got := h.sayIn(alice, root, "<@"+botID+"> cancel")
	if got != "🚫 Stopped: cancelled by <@UALICE>." {
		t.Errorf("notice = %q", got)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunCancelled || r.Reason != "cancelled by <@UALICE>" {
			t.Errorf("run = %+v", r)
		}
	}
	cl := checklistPosts(h)
	if len(cl) != 1 {
		t.Fatalf("checklists = %d", len(cl))
	}
	if cur, _ := h.s.Current(cl[0].Ref.ID); !strings.HasPrefix(cur.Text, "🚫 Stopped — cancelled by <@UALICE>") {
		t.Errorf("checklist = %q", cur.Text)
	}
	card := h.s.Cards()[0]
	if cur, _ := h.s.Current(card.Ref.ID); cur.Card == nil || cur.Card.Resolution == "" || len(cur.Card.Actions) != 0 {
		t.Errorf("card after cancel = %+v", cur.Card)
	}
	// The cancel is the person's: the run's end carries their verified id.
	for _, c := range h.j.All(chanScope("C1").Key()) {
		if c.Kind() == core.KindRunFailed && (c.Actor().Type != core.ActorHuman || c.Actor().ID != alice.ID) {
			t.Errorf("run.failed actor = %+v", c.Actor())
		}
	}
	// A late approval does nothing.
	h.click(carol, card.Out.Card.Actions[0].Token, card.Ref.Scope)
	h.idle()
	if got := log.get(); len(got) != 0 {
		t.Errorf("wipe ran after the cancel: %v", got)
	}
	if m.Calls() != calls {
		t.Errorf("the model was called after the cancel")
	}
	if got := h.sayIn(alice, root, "cancel"); got != "Nothing is running in this thread, so there is nothing to cancel." {
		t.Errorf("cancel of a finished thread = %q", got)
	}
	if got := h.say(alice, "cancel"); !strings.Contains(got, "say it in the thread") {
		t.Errorf("top-level cancel = %q", got)
	}
	h.verify("C1")
}

// An admin may cancel anyone's run, and a cancel interrupts a model call in
// flight: its answer is never journaled, and nothing runs after it.
func TestAdminCancelInterruptsTheModelCall(t *testing.T) {
	inCall := make(chan struct{}, 1)
	log := &toolLog{}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("n", "note", `{"text":"x"}`)), coretest.Text("done"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		inCall <- struct{}{}
		<-ctx.Done()
	}
	h := newHarness(t, m, []core.Tool{noteTool(log)}, operatorAlice)
	ev := h.mention(bob, "C1", "take a note")
	h.deliver(ev)
	<-inCall
	h.deliver(h.inThread(alice, "C1", ev.MessageID, "cancel"))
	h.idle()
	for _, r := range h.runs("C1") {
		if r.Status != core.RunCancelled || r.Steps != 0 {
			t.Errorf("run = %+v", r)
		}
	}
	if len(log.get()) != 0 || m.Calls() != 1 {
		t.Errorf("after the cancel: tool calls %v, model calls %d", log.get(), m.Calls())
	}
	if _, ok := h.s.Find("🚫 Stopped: cancelled by <@UALICE>."); !ok {
		t.Errorf("no visible stop: %+v", h.s.Posts())
	}
	if !strings.Contains(h.logs.String(), "run cancelled") {
		t.Errorf("no log line")
	}
}

// A cancel during a tool call lets that call finish (its result is
// recorded) but nothing after it runs: no further call, no model step.
func TestCancelDuringAToolStopsWhatFollows(t *testing.T) {
	log := &toolLog{}
	inTool, release := make(chan struct{}), make(chan struct{})
	slow := noteTool(log)
	inner := slow.Run
	var once sync.Once
	slow.Run = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
		once.Do(func() { close(inTool) })
		<-release
		return inner(ctx, tc, args)
	}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("a", "note", `{"text":"one"}`), coretest.Call("b", "note", `{"text":"two"}`)),
		coretest.Text("done"))
	h := newHarness(t, m, []core.Tool{slow})
	ev := h.mention(alice, "C1", "take two notes")
	h.deliver(ev)
	<-inTool
	h.deliver(h.inThread(alice, "C1", ev.MessageID, "cancel"))
	close(release)
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Errorf("tool runs = %v, want only the one under way", got)
	}
	if m.Calls() != 1 {
		t.Errorf("model calls = %d", m.Calls())
	}
	if n := h.count("C1", core.KindToolCompleted); n != 1 {
		t.Errorf("tool.completed = %d", n)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunCancelled {
			t.Errorf("run = %+v", r)
		}
	}
}

func TestPolicyApprovalLevelsAddRemoveReplace(t *testing.T) {
	h := newHarness(t, nil, memTools(), operatorAlice)
	steps := []struct{ say, want string }{
		{"policy set approval +write", "• needs approval: send, irreversible → write, send, irreversible"},
		{"policy set approval -send", "• needs approval: write, send, irreversible → write, irreversible"},
		{"policy set approval +write", "Nothing changed"},
		{"policy set approval send", "• needs approval: write, irreversible → send"},
		{"policy set approval -send", "• needs approval: send → irreversible"},
		{"policy set approval +write send", "not both"},
		{"policy set approval +frob", `level "+frob"`},
		{"policy set approval default", "• needs approval: irreversible → send, irreversible"},
	}
	for _, s := range steps {
		if got := h.say(alice, s.say); !strings.Contains(got, s.want) {
			t.Errorf("%s = %q, want %q", s.say, got, s.want)
		}
	}
	if n := h.count("C1", core.KindPolicyChanged); n != 5 {
		t.Errorf("policy.changed = %d, want 5 (no-ops and errors journal nothing)", n)
	}
	if got := h.say(bob, "policy set approval -irreversible"); !strings.Contains(got, "Only an admin") {
		t.Errorf("non-admin = %q", got)
	}
}

func TestHelpNamesTheNewCommands(t *testing.T) {
	h := newHarness(t, nil, memTools())
	got := h.say(alice, "help")
	for _, w := range []string{"`memories`", "`delete memory <note id>`", "`status`", "`approvals`", "`cancel`", "`+write`"} {
		if !strings.Contains(got, w) {
			t.Errorf("help lacks %s: %q", w, got)
		}
	}
}

// The model's list_memories tool sees who added each memory: the engine
// names the person a run wrote it for, from the journal.
func TestListMemoriesToolNamesThePerson(t *testing.T) {
	step := func(v core.View) (core.Reply, error) {
		last := v.Messages[len(v.Messages)-1]
		switch {
		case last.Role == core.RoleTool:
			return core.Reply{Text: last.Text}, nil
		case strings.Contains(last.Text, "remember"):
			return core.Reply{ToolCalls: []core.ToolCall{{ID: "r", Name: "remember", Args: `{"text":"the demo is on Friday"}`}}}, nil
		}
		return core.Reply{ToolCalls: []core.ToolCall{{ID: "l", Name: "list_memories", Args: `{}`}}}, nil
	}
	m := coretest.NewScriptedModel(step, step)
	h := newHarness(t, m, []core.Tool{tools.Remember(), tools.ListMemories()})
	h.say(bob, "please remember the demo date")
	got := h.say(alice, "what do you know?")
	if !strings.Contains(got, "the demo is on Friday (added by <@UBOB>") {
		t.Errorf("list = %q", got)
	}
}

// A cancel is journaled before anything shows it: a stop notice lost to a
// failing platform (or a crash) is posted by the next start, once.
func TestCancelNoticeSurvivesARestart(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("w", "wipe", `{"id":"42"}`)), coretest.Text("wiped"))
	h := newHarness(t, m, []core.Tool{wipeTool(&toolLog{})}, platformAdmins(bob.ID))
	ev := approvalRun(t, h, alice)
	h.s.FailPost = func(out core.Outbound) error {
		if strings.HasPrefix(out.Text, "🚫 Stopped:") {
			return errors.New("platform down")
		}
		return nil
	}
	h.deliver(h.inThread(alice, "C1", ev.MessageID, "cancel"))
	h.idle()
	if _, ok := h.s.Find("🚫 Stopped:"); ok {
		t.Fatal("the notice was posted through a failing platform")
	}
	h.s.FailPost = nil
	h.restart()
	h.idle()
	h.restart()
	h.idle()
	n := 0
	for _, p := range h.s.Posts() {
		if strings.HasPrefix(p.Out.Text, "🚫 Stopped: cancelled by <@UALICE>.") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("stop notices = %d, want 1", n)
	}
}

// TestRefusedCancelIsPrivateAndComesFirst: Carol's `cancel` of Alice's run
// while its model call is still out is refused at once and only to Carol
// (ephemeral), not queued behind the run (where it would arrive after
// Alice's own cancel had stopped it, contradicting the thread) nor posted
// to everyone.
func TestRefusedCancelIsPrivateAndComesFirst(t *testing.T) {
	release := make(chan struct{})
	m := coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		<-release
		return core.Reply{Text: "the answer"}, nil
	})
	h := newHarness(t, m, nil)
	ev := h.mention(alice, "C1", "a long question")
	h.deliver(ev)
	for deadline := time.Now().Add(10 * time.Second); m.Calls() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the model was never asked")
		}
	}
	// deliver returns once the ingress is done: the refusal must be there
	// already, while the model call still holds the thread.
	h.deliver(h.inThread(carol, "C1", ev.MessageID, "cancel"))
	w := h.s.Whispers()
	close(release)
	h.idle()
	if len(w) != 1 || w[0].User != carol.ID || !strings.Contains(w[0].Text, "Only <@UALICE> or an admin can cancel this") {
		t.Errorf("while the run worked, whispers = %+v; want Carol's refusal, privately", w)
	}
	for _, p := range h.s.Posts() {
		if strings.Contains(p.Out.Text, "can cancel this") {
			t.Errorf("the refusal was posted to the thread: %q", p.Out.Text)
		}
	}
	if got := h.s.Whispers(); len(got) != 1 {
		t.Errorf("whispers after the run = %+v, want the one refusal", got)
	}
}
