package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// platformAdmins makes ids the platform's administrators (asked one at a
// time, so they get no DM cards).
func platformAdmins(ids ...string) func(*engine.Config) {
	return func(c *engine.Config) {
		s, ok := c.Surfaces[platform].(adminSurface)
		if !ok {
			s = adminSurface{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface), admins: map[string]bool{}}
		}
		for _, id := range ids {
			s.admins[id] = true
		}
		c.Surfaces[platform] = s
	}
}

// adminsBobCarol makes Bob and Carol workspace admins: with no approvers
// listed, the admins decide irreversible actions.
var adminsBobCarol = platformAdmins(bob.ID, carol.ID)

// wipeHarness runs a model that calls the irreversible wipe tool once and
// then answers with the observation it got.
func wipeHarness(t *testing.T, opts ...func(*engine.Config)) (*harness, *toolLog, core.Event) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "wipe", `{"id":"42"}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil },
	)
	h := newHarness(t, m, []core.Tool{wipeTool(log)}, append([]func(*engine.Config){platformAdmins(bob.ID)}, opts...)...)
	ev := h.mention(alice, "C1", "wipe record 42")
	h.deliver(ev)
	h.idle()
	if len(threadCards(h, "C1")) != 1 {
		t.Fatalf("no approval card: %+v", h.s.Posts())
	}
	return h, log, ev
}

// threadCards are the cards posted in channel ch (not in DM inboxes).
func threadCards(h *harness, ch string) []coretest.Post {
	var out []coretest.Post
	for _, p := range h.s.Cards() {
		if p.Ref.Scope.Channel == ch {
			out = append(out, p)
		}
	}
	return out
}

func cardOf(h *harness) (*core.Card, coretest.Post) {
	c := h.s.Cards()[0]
	return c.Out.Card, c
}

func token(c *core.Card, action string) string {
	for _, a := range c.Actions {
		if a.ID == action {
			return a.Token
		}
	}
	return ""
}

func TestIrreversibleNeverRunsWithoutApproval(t *testing.T) {
	h, log, ev := wipeHarness(t)
	card, _ := cardOf(h)
	thread := threadOf(ev)
	pd := payloads[*core.PermissionDecided](h, "C1", core.KindPermissionDecided)
	if len(pd) != 1 || pd[0].Decision != "ask" || !strings.Contains(pd[0].Reason, "irreversible") {
		t.Fatalf("permission = %+v", pd)
	}
	// The requester alone cannot approve an irreversible action.
	h.click(alice, token(card, "approve"), thread)
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("requester's own approval executed the irreversible tool")
	}
	if w, ok := whisperTo(h, alice.ID, "someone other than the requester"); !ok || !strings.Contains(w.Text, "still waiting") {
		t.Errorf("no private refusal for the requester: %+v", h.s.Whispers())
	}
	if p, ok := h.s.Find("someone other than the requester"); ok {
		t.Errorf("the refusal was posted for everyone: %+v", p)
	}
	if a := payloads[*core.ApprovalResolved](h, "C1", core.KindApprovalResolved); len(a) != 0 {
		t.Fatalf("refused click resolved the approval: %+v", a)
	}
	// Bob declines: nothing executes; the model hears who declined.
	h.click(bob, token(card, "decline"), thread)
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("declined tool executed")
	}
	ans, ok := h.s.Find("result:")
	if !ok || !strings.Contains(ans.Out.Text, "declined by Bob") {
		t.Errorf("answer = %+v", ans.Out.Text)
	}
	cur, _ := h.s.Current(h.s.Cards()[0].Ref.ID)
	if cur.Card == nil || !strings.Contains(cur.Card.Resolution, "Declined by Bob") {
		t.Errorf("card = %+v", cur.Card)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunDone {
			t.Errorf("run %s", r.Status)
		}
	}
	// No consent is ever recorded for irreversible actions.
	if n := h.count("C1", core.KindConsentGranted); n != 0 {
		t.Errorf("consent.granted = %d", n)
	}
}

func TestIrreversibleApprovedByAnotherPersonRunsOnce(t *testing.T) {
	h, log, ev := wipeHarness(t)
	card, _ := cardOf(h)
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != "wipe:42" {
		t.Fatalf("executions = %v", got)
	}
	// A replayed click (same token again) is refused and runs nothing.
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.click(carol, token(card, "decline"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Fatalf("replayed click re-executed: %v", got)
	}
	if p, ok := h.s.Find("already decided"); !ok || !strings.Contains(p.Out.Text, "Approved by Bob") {
		t.Errorf("no clear refusal of the replayed click: %+v", h.s.Posts())
	}
	if n := h.count("C1", core.KindCardClicked); n != 3 {
		t.Errorf("card.clicked = %d, want 3 (every verified click is journaled)", n)
	}
	if n := h.count("C1", core.KindApprovalResolved); n != 1 {
		t.Errorf("approval.resolved = %d", n)
	}
}

func TestForgedClickIsRefused(t *testing.T) {
	h, log, ev := wipeHarness(t)
	card, _ := cardOf(h)
	good := token(card, "approve")
	before := len(h.j.All(chanScope("C1").Key()))
	flip := "A"
	if strings.HasSuffix(good, "A") {
		flip = "Q"
	}
	forgeries := []string{
		"", "nonsense",
		good[:len(good)-1] + flip,                            // altered MAC
		strings.Replace(good, ".a", ".d", 1),                 // approve token relabelled as decline
		strings.Replace(good, ".a", ".x", 1),                 // unknown action, old MAC
		"01HZZZZZZZZZZZZZZZZZZZZZZZ.a" + good[len(good)-22:], // other id, same MAC
	}
	for _, f := range forgeries {
		h.click(bob, f, threadOf(ev))
	}
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("forged click executed the tool")
	}
	if after := len(h.j.All(chanScope("C1").Key())); after != before {
		// The refusals are ephemeral: nothing is journaled for a forgery.
		t.Errorf("journal grew by %d for %d forged clicks", after-before, len(forgeries))
	}
	if n := h.count("C1", core.KindApprovalResolved) + h.count("C1", core.KindCardClicked); n != 0 {
		t.Errorf("forged click journaled as a click/resolution")
	}
	if p, ok := h.s.Find("could not be verified"); ok {
		t.Errorf("the refusal of a forged button was posted for everyone: %+v", p)
	}
	w := h.s.Whispers()
	if len(w) != len(forgeries) {
		t.Fatalf("ephemeral refusals = %d, want %d", len(w), len(forgeries))
	}
	for _, x := range w {
		if x.User != bob.ID || x.Scope != threadOf(ev) || !strings.Contains(x.Text, "could not be verified") {
			t.Errorf("refusal = %+v, want one only Bob sees in the thread", x)
		}
	}
	// The real token still works afterwards.
	h.click(bob, good, threadOf(ev))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("genuine approval did not execute")
	}
}

func TestNonApproverClickIsRefused(t *testing.T) {
	h, log, ev := wipeHarness(t, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{carol.ID}}
	})
	card, _ := cardOf(h)
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.click(bob, token(card, "decline"), threadOf(ev))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("non-approver executed")
	}
	// Bob is told, privately, who decides and that the request still waits.
	if w, ok := whisperTo(h, bob.ID, "Only <@UCAROL> can approve this; it is still waiting for them"); !ok {
		t.Errorf("refusal for bob = %+v", h.s.Whispers())
	} else if w.Scope.Thread != threadOf(ev).Thread {
		t.Errorf("refusal shown in %+v, want the card's thread", w.Scope)
	}
	if _, ok := whisperTo(h, bob.ID, "can decline this"); !ok {
		t.Errorf("no refusal of bob's decline: %+v", h.s.Whispers())
	}
	if p, ok := h.s.Find("can approve this"); ok {
		t.Errorf("the refusal was posted for everyone: %+v", p)
	}
	if n := h.count("C1", core.KindApprovalResolved); n != 0 {
		t.Errorf("non-approver resolved it")
	}
	h.click(carol, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("approver's click did not execute")
	}
}

func TestApproverWhoIsTheRequesterCannotApproveIrreversible(t *testing.T) {
	// Alice is the channel's only approver and asks for an irreversible
	// action: nobody can approve it, and the thread says so at once instead
	// of showing a card nobody may click.
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "wipe", `{"id":"42"}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil },
	)
	h := newHarness(t, m, []core.Tool{wipeTool(log)}, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{alice.ID}}
	})
	h.deliver(h.mention(alice, "C1", "wipe record 42"))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("requester's irreversible action ran")
	}
	if n := len(h.s.Cards()); n != 0 {
		t.Fatalf("%d cards posted for a request nobody can approve", n)
	}
	if n := h.count("C1", core.KindApprovalRequested); n != 0 {
		t.Errorf("approval.requested = %d, want none", n)
	}
	if _, ok := h.s.Find("nobody can approve this here"); !ok {
		t.Errorf("the thread was not told: %+v", h.s.Posts())
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunDone {
			t.Errorf("run %s, want done (the model was told)", r.Status)
		}
	}
}

func TestExpiredClickIsRefusedAndCardShowsExpired(t *testing.T) {
	h, log, ev := wipeHarness(t)
	card, post := cardOf(h)
	h.clk.Advance(25 * time.Hour)
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("expired approval executed")
	}
	if _, ok := h.s.Find("expired before it was decided"); !ok {
		t.Errorf("no expiry reply")
	}
	cur, _ := h.s.Current(post.Ref.ID)
	if cur.Card == nil || !strings.Contains(cur.Card.Resolution, "Expired") || len(cur.Card.Actions) != 0 {
		t.Errorf("card = %+v", cur.Card)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunCancelled {
			t.Errorf("run %s, want cancelled", r.Status)
		}
	}
	cl, _ := h.s.Current(h.s.Posts()[0].Ref.ID)
	if !strings.HasPrefix(cl.Text, "🚫 Stopped") {
		t.Errorf("checklist = %q", cl.Text)
	}
}

func TestStartExpiresOverdueApprovals(t *testing.T) {
	h, log, _ := wipeHarness(t)
	_, post := cardOf(h)
	_ = h.e.Close()
	h.clk.Advance(48 * time.Hour)
	h.start()
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("executed")
	}
	cur, _ := h.s.Current(post.Ref.ID)
	if cur.Card == nil || !strings.Contains(cur.Card.Resolution, "Expired") {
		t.Errorf("card after restart = %+v", cur.Card)
	}
	res := payloads[*core.ApprovalResolved](h, "C1", core.KindApprovalResolved)
	if len(res) != 1 || res[0].Decision != "expired" {
		t.Errorf("resolution = %+v", res)
	}
}

func TestParkedRunHoldsNoGoroutineAndResumesAfterRestart(t *testing.T) {
	h, log, ev := wipeHarness(t)
	card, _ := cardOf(h)
	// Idle means no mailbox consumer is running for the parked run.
	h.idle()
	h.restart()
	h.idle()
	if len(h.s.Cards()) != 1 {
		t.Fatalf("restart re-posted the card: %d", len(h.s.Cards()))
	}
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("approval after restart did not execute")
	}
}

func TestMessageWhileWaitingSupersedesTheCard(t *testing.T) {
	h, log, ev := wipeHarness(t)
	card, post := cardOf(h)
	h.deliver(h.inThread(alice, "C1", ev.MessageID, "actually, don't"))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("executed")
	}
	cur, _ := h.s.Current(post.Ref.ID)
	if cur.Card == nil || !strings.Contains(cur.Card.Resolution, "Superseded") {
		t.Errorf("card = %+v", cur.Card)
	}
	if n := h.count("C1", core.KindRunStarted); n != 1 {
		t.Errorf("run.started = %d: the message must steer the same run", n)
	}
	// The model saw both the superseded observation and the new message.
	views := h.m.Views()
	last := views[len(views)-1]
	var sawObs, sawMsg bool
	for _, m := range last.Messages {
		sawObs = sawObs || strings.Contains(m.Text, "superseded")
		sawMsg = sawMsg || strings.Contains(m.Text, "actually, don't")
	}
	if !sawObs || !sawMsg {
		t.Errorf("view = %+v", last.Messages)
	}
	// A late click on the superseded card is refused.
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("late click executed")
	}
}

func TestAskHumanParksUntilAnswered(t *testing.T) {
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "ask", `{"question":"Which venue?","options":["Roof","Cellar"]}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "Booked: " + lastText(v)}, nil },
	)
	h := newHarness(t, m, []core.Tool{askTool()})
	ev := h.mention(alice, "C1", "book the offsite")
	h.deliver(ev)
	h.idle()
	cards := h.s.Cards()
	if len(cards) != 1 || len(cards[0].Out.Card.Actions) != 2 || cards[0].Out.Card.Actions[1].Label != "Cellar" {
		t.Fatalf("cards = %+v", cards)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunWaitingApproval {
			t.Fatalf("run %s", r.Status)
		}
	}
	h.click(bob, cards[0].Out.Card.Actions[1].Token, threadOf(ev))
	h.idle()
	ans, ok := h.s.Find("Booked:")
	if !ok || !strings.Contains(ans.Out.Text, "Bob answered: Cellar") {
		t.Errorf("answer = %q", ans.Out.Text)
	}
}

func TestCardTokensFitTelegram(t *testing.T) {
	h, _, _ := wipeHarness(t)
	card, _ := cardOf(h)
	for _, a := range card.Actions {
		if len(a.Token) > 64 || a.Token == "" {
			t.Errorf("token %q is %d bytes", a.Token, len(a.Token))
		}
		for _, r := range a.Token {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
				t.Errorf("token %q has %q", a.Token, r)
			}
		}
	}
}

// whisperTo finds the first ephemeral message for user containing text.
func whisperTo(h *harness, user, text string) (coretest.Whisper, bool) {
	for _, w := range h.s.Whispers() {
		if w.User == user && strings.Contains(w.Text, text) {
			return w, true
		}
	}
	return coretest.Whisper{}, false
}
