package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// dmScope is the fake surface's DM channel with p.
func dmScope(p core.Person) core.Scope {
	return core.Scope{Platform: platform, Workspace: "W1", Channel: "D-" + p.ID}
}

// dmCards are the cards posted in p's DM.
func dmCards(h *harness, p core.Person) []coretest.Post { return threadCards(h, "D-"+p.ID) }

// inDM is a message p sends the bot in their DM.
func (h *harness) inDM(p core.Person, text string) core.Event {
	return core.Event{Scope: dmScope(p), Visibility: core.DM, MessageID: h.msgID(), Author: p, Text: text, At: h.clk.Now()}
}

func current(t *testing.T, h *harness, p coretest.Post) *core.Card {
	t.Helper()
	cur, ok := h.s.Current(p.Ref.ID)
	if !ok || cur.Card == nil {
		t.Fatalf("message %s has no card", p.Ref.ID)
	}
	return cur.Card
}

// approversHarness: Alice asks for the irreversible wipe in C1, whose
// approvers are Bob and Carol.
func approversHarness(t *testing.T, opts ...func(*engine.Config)) (*harness, *toolLog, core.Event) {
	opts = append([]func(*engine.Config){func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{alice.ID, bob.ID, carol.ID}}
	}}, opts...)
	return wipeHarness(t, opts...)
}

func TestApprovalReachesApproversDMsAndIsDecidedThere(t *testing.T) {
	h, log, ev := approversHarness(t)
	if n := len(dmCards(h, alice)); n != 0 {
		t.Errorf("the requester got %d DM cards", n)
	}
	bobs, carols := dmCards(h, bob), dmCards(h, carol)
	if len(bobs) != 1 || len(carols) != 1 {
		t.Fatalf("DM cards: bob %d, carol %d; want 1 each", len(bobs), len(carols))
	}
	dm := bobs[0].Out.Card
	thread, _ := cardOf(h)
	if token(dm, "approve") != token(thread, "approve") {
		t.Errorf("the DM card is a different decision than the thread card")
	}
	for _, want := range []string{"Where", "Consequence", "Why", "Requested by", "Expires", "Options"} {
		found := false
		for _, f := range dm.Fields {
			found = found || f.Label == want
		}
		if !found {
			t.Errorf("DM card lacks %q: %+v", want, dm.Fields)
		}
	}

	// Bob approves from his DM: the tool runs once and every rendering says so.
	h.click(bob, token(dm, "approve"), dmScope(bob))
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Fatalf("wipe ran %d times, want 1", len(got))
	}
	for name, p := range map[string]coretest.Post{"thread": threadCards(h, "C1")[0], "bob's DM": bobs[0], "carol's DM": carols[0]} {
		c := current(t, h, p)
		if !strings.Contains(c.Resolution, "Approved by Bob") || len(c.Actions) != 0 {
			t.Errorf("%s card after Bob's approval: %+v", name, c)
		}
	}

	// Carol's stale DM rendering: a second decision is refused, in her DM.
	h.click(carol, token(carols[0].Out.Card, "decline"), dmScope(carol))
	h.idle()
	if len(log.get()) != 1 || h.count("C1", core.KindApprovalResolved) != 1 {
		t.Fatalf("a second decision counted")
	}
	refusal, ok := h.s.Find("already decided")
	if !ok || refusal.Ref.Scope.Channel != "D-"+carol.ID {
		t.Errorf("refusal of the stale click = %+v, %v; want it in Carol's DM", refusal.Ref, ok)
	}
	_ = ev
}

func TestDecidedInTheThreadUpdatesTheDMCards(t *testing.T) {
	h, log, ev := approversHarness(t)
	thread, _ := cardOf(h)
	h.click(carol, token(thread, "decline"), threadOf(ev))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("declined wipe ran")
	}
	for _, p := range append(dmCards(h, bob), dmCards(h, carol)...) {
		if c := current(t, h, p); !strings.Contains(c.Resolution, "Declined by Carol") || len(c.Actions) != 0 {
			t.Errorf("DM card in %s after the thread decision: %+v", p.Ref.Scope.Channel, c)
		}
	}
	// The renderings stay decided across a restart; nothing is re-posted.
	posts := len(h.s.Posts())
	h.restart()
	h.idle()
	if n := len(h.s.Posts()); n != posts {
		t.Errorf("restart posted %d more messages", n-posts)
	}
}

func TestNonApproverClickOnAForwardedDMCardIsRefused(t *testing.T) {
	log := &toolLog{}
	h, _, _ := wipeHarness(t, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	_ = log
	bobs := dmCards(h, bob)
	if len(bobs) != 1 || len(dmCards(h, carol)) != 0 {
		t.Fatalf("DM cards: bob %d, carol %d", len(bobs), len(dmCards(h, carol)))
	}
	// Carol got Bob's card forwarded (its token) and clicks it in her DM.
	h.click(carol, token(bobs[0].Out.Card, "approve"), dmScope(carol))
	h.idle()
	if n := h.count("C1", core.KindApprovalResolved); n != 0 {
		t.Fatalf("a non-approver's click decided the approval")
	}
	if w, ok := whisperTo(h, carol.ID, "can approve this; it is still waiting for them"); !ok || w.Scope.Channel != "D-"+carol.ID {
		t.Errorf("refusal = %+v %v, want it for Carol where she clicked", w, ok)
	}
	if c := current(t, h, bobs[0]); c.Resolution != "" {
		t.Errorf("Bob's card changed: %+v", c)
	}
}

func TestNoDMMeansTheThreadSaysSoOnce(t *testing.T) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "wipe", `{"id":"1"}`)),
		coretest.Calls(coretest.Call("c2", "wipe", `{"id":"2"}`)),
		coretest.Text("done"),
	)
	h := newHarness(t, m, []core.Tool{wipeTool(log)}, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	h.s.FailOpenDM = func(string) error { return errors.New("Forbidden: bot can't initiate conversation with a user") }
	ev := h.mention(alice, "C1", "wipe records 1 and 2")
	h.deliver(ev)
	h.idle()
	card, _ := cardOf(h)
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	cards := threadCards(h, "C1")
	if len(cards) != 2 {
		t.Fatalf("thread cards = %d, want 2", len(cards))
	}
	h.click(bob, token(cards[1].Out.Card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 2 {
		t.Fatalf("wipes = %v", got)
	}
	n := 0
	for _, p := range h.s.PostsIn("C1") {
		if strings.Contains(p.Out.Text, "couldn't reach <@UBOB> by direct message") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the thread said %d times that Bob has no DM, want once", n)
	}
}

func TestInboxListsWhatWaitsAndAnswersOnlyInDM(t *testing.T) {
	h, _, ev := approversHarness(t)
	// Bob asks in the channel: the list goes to his DM, the thread only
	// says where it went.
	q := h.mention(bob, "C1", "inbox")
	h.deliver(q)
	h.idle()
	var inDM, inThread bool
	for _, p := range h.s.PostsIn("D-" + bob.ID) {
		if strings.Contains(p.Out.Text, "Your inbox — 1 waiting") && strings.Contains(p.Out.Text, "wipe") && strings.Contains(p.Out.Text, "<@UALICE>") {
			inDM = true
		}
	}
	for _, p := range h.s.PostsIn("C1") {
		if p.Ref.Scope.Thread == q.MessageID {
			inThread = inThread || strings.Contains(p.Out.Text, "direct message")
			if strings.Contains(p.Out.Text, "wipe") {
				t.Errorf("the inbox leaked into the channel: %q", p.Out.Text)
			}
		}
	}
	if !inDM || !inThread {
		t.Fatalf("inbox in DM %v, pointer in thread %v: %+v", inDM, inThread, h.s.Posts())
	}

	// A restart (or another replica) folds the same inbox; in the DM it answers there.
	h.restart()
	h.deliver(h.inDM(carol, "inbox"))
	h.idle()
	if _, ok := h.s.Find("Your inbox — 1 waiting"); !ok {
		t.Fatalf("no inbox for Carol")
	}
	items, err := h.e.Inbox(context.Background(), platform, carol.ID)
	if err != nil || len(items) != 1 || items[0].Kind != "approval" || items[0].Requester != alice.ID {
		t.Fatalf("Inbox(carol) = %+v, %v", items, err)
	}
	if items, _ := h.e.Inbox(context.Background(), platform, alice.ID); len(items) != 0 {
		t.Errorf("the requester's inbox holds her own request: %+v", items)
	}

	thread, _ := cardOf(h)
	h.click(bob, token(thread, "approve"), threadOf(ev))
	h.idle()
	if items, _ := h.e.Inbox(context.Background(), platform, carol.ID); len(items) != 0 {
		t.Errorf("a decided approval stays in the inbox: %+v", items)
	}
}

// sendHarness: a model that posts to #announce (a destination the person
// never named) on every message, so the gate asks each time it lacks a grant.
func sendHarness(t *testing.T, opts ...func(*engine.Config)) (*harness, *toolLog) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("s", "send_to", `{"channel":"announce","text":"hello"}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil },
	)
	return newHarness(t, m, []core.Tool{sendTool(log)}, opts...), log
}

func TestConsentIsAskedOncePerScopeAndAskedAgainAfterRevoke(t *testing.T) {
	h, log := sendHarness(t, platformAdmins(bob.ID)) // admins grant "Always allow"
	ev := h.mention(alice, "C1", "share the news")
	h.deliver(ev)
	h.idle()
	cards := threadCards(h, "C1")
	if len(cards) != 1 {
		t.Fatalf("cards = %d", len(cards))
	}
	c := cards[0].Out.Card
	var labels []string
	for _, a := range c.Actions {
		labels = append(labels, a.Label)
	}
	if strings.Join(labels, "|") != "Allow once|Always allow|Deny" {
		t.Fatalf("consent options = %v", labels)
	}
	h.click(bob, token(c, "always"), threadOf(ev))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("sends = %v", log.get())
	}
	grants := payloads[*core.ConsentGranted](h, "C1", core.KindConsentGranted)
	if len(grants) != 1 || grants[0].ConsentID == "" || grants[0].Destination != "announce" || grants[0].Owner != bob.ID {
		t.Fatalf("grants = %+v", grants)
	}

	// Never asked again while the grant stands, across a restart too.
	h.restart()
	h.deliver(h.mention(carol, "C1", "share it again"))
	h.idle()
	if len(log.get()) != 2 || len(threadCards(h, "C1")) != 1 {
		t.Fatalf("asked again: sends %v, cards %d", log.get(), len(threadCards(h, "C1")))
	}

	// Bob lists his grants (in his DM) and revokes it; the next send asks.
	h.deliver(h.inDM(bob, "consents"))
	h.idle()
	if _, ok := h.s.Find("`" + grants[0].ConsentID + "` — send_to to announce in <#C1>"); !ok {
		t.Fatalf("consents list: %+v", h.s.PostsIn("D-"+bob.ID))
	}
	// Carol may not revoke Bob's grant (she is no admin).
	h.deliver(h.inDM(carol, "consent revoke "+grants[0].ConsentID))
	h.idle()
	if h.count("C1", core.KindConsentRevoked) != 0 {
		t.Fatalf("Carol revoked Bob's grant")
	}
	h.deliver(h.inDM(bob, "consent revoke "+grants[0].ConsentID))
	h.idle()
	if n := h.count("C1", core.KindConsentRevoked); n != 1 {
		t.Fatalf("consent.revoked = %d", n)
	}
	if _, ok := h.s.Find("Revoked consent `" + grants[0].ConsentID + "`"); !ok {
		t.Errorf("no revoke confirmation")
	}
	h.deliver(h.mention(alice, "C1", "and once more"))
	h.idle()
	if len(log.get()) != 2 || len(threadCards(h, "C1")) != 2 {
		t.Fatalf("after revoke: sends %v, cards %d (want asked again)", log.get(), len(threadCards(h, "C1")))
	}
	// Allow once grants nothing: the card after it asks again.
	h.click(bob, token(threadCards(h, "C1")[1].Out.Card, "approve"), c1Thread(threadCards(h, "C1")[1].Ref.Scope.Thread))
	h.idle()
	if len(log.get()) != 3 || h.count("C1", core.KindConsentGranted) != 1 {
		t.Fatalf("allow once: sends %v, grants %d", log.get(), h.count("C1", core.KindConsentGranted))
	}
}

// c1Thread returns the scope of thread root in C1.
func c1Thread(root string) core.Scope {
	sc := chanScope("C1")
	sc.Thread = root
	return sc
}

func TestUnattendedRunNeedsPermissionFromItsOwner(t *testing.T) {
	h, log := sendHarness(t, platformAdmins(alice.ID)) // an admin owner may grant "Always allow"
	start := func(trigger string) string {
		t.Helper()
		id, err := h.e.StartUnattended(context.Background(), core.UnattendedRun{
			Scope: chanScope("C1"), Owner: alice, Instruction: "post the weekly digest", Trigger: trigger,
		})
		if err != nil {
			t.Fatal(err)
		}
		h.idle()
		return id
	}
	run := start("routine-1")
	if len(log.get()) != 0 {
		t.Fatalf("sent without permission")
	}
	if st := h.runs("C1")[run].Status; st != core.RunNeedsPermission {
		t.Fatalf("status %s, want needs-permission", st)
	}
	if n := len(threadCards(h, "C1")); n != 0 {
		t.Errorf("%d cards in the channel; the owner's inbox only", n)
	}
	cards := dmCards(h, alice)
	if len(cards) != 1 {
		t.Fatalf("owner's DM cards = %d", len(cards))
	}
	if _, ok := h.s.Find("Needs permission"); !ok {
		t.Errorf("the channel is not told the run waits for permission")
	}
	if items, _ := h.e.Inbox(context.Background(), platform, alice.ID); len(items) != 1 || items[0].Kind != "consent" {
		t.Errorf("owner's inbox = %+v", items)
	}
	// Bob is not the owner: his click does not grant.
	h.click(bob, token(cards[0].Out.Card, "approve"), dmScope(bob))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("a bystander granted the owner's consent")
	}
	// The owner grants it, after a restart: the run goes on with the grant.
	h.restart()
	h.click(alice, token(cards[0].Out.Card, "always"), dmScope(alice))
	h.idle()
	if len(log.get()) != 1 || h.runs("C1")[run].Status != core.RunDone {
		t.Fatalf("after granting: sends %v, status %s", log.get(), h.runs("C1")[run].Status)
	}
	if c := current(t, h, cards[0]); !strings.Contains(c.Resolution, "Approved by Alice") {
		t.Errorf("owner's card = %+v", c)
	}
	// The grant stands: the next firing runs without asking.
	start("routine-2")
	if len(log.get()) != 2 || len(dmCards(h, alice)) != 1 {
		t.Fatalf("second firing: sends %v, cards %d", log.get(), len(dmCards(h, alice)))
	}
}

func TestUnattendedRunDeclinedClosesAndNothingRuns(t *testing.T) {
	h, log := sendHarness(t)
	run, err := h.e.StartUnattended(context.Background(), core.UnattendedRun{
		Scope: chanScope("C1"), Owner: alice, Instruction: "post the weekly digest", Trigger: "routine-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	h.idle()
	cards := dmCards(h, alice)
	if len(cards) != 1 {
		t.Fatalf("owner's DM cards = %d", len(cards))
	}
	h.click(alice, token(cards[0].Out.Card, "decline"), dmScope(alice))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("declined send ran")
	}
	if st := h.runs("C1")[run].Status; st != core.RunCancelled {
		t.Errorf("status %s, want cancelled", st)
	}
	if c := current(t, h, cards[0]); !strings.Contains(c.Resolution, "Declined by Alice") || len(c.Actions) != 0 {
		t.Errorf("card = %+v", c)
	}
	if n := h.count("C1", core.KindModelStep); n != 1 {
		t.Errorf("model steps = %d: the model went on after the decline", n)
	}
}

func TestEscalationToANamedPersonWithADeadline(t *testing.T) {
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("q", "ask", `{"question":"Ship the release today?","options":["Ship","Wait"]}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "after: " + lastText(v)}, nil },
	)
	ask := askTool()
	inner := ask.Run
	ask.Run = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
		obs, err := inner(ctx, tc, args)
		if obs.Escalate != nil {
			obs.Escalate.To = []string{"<@" + carol.ID + ">"}
			obs.Escalate.Deadline = 30 * time.Minute
		}
		return obs, err
	}
	h := newHarness(t, m, []core.Tool{ask}, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	ev := h.mention(alice, "C1", "ask carol whether to ship")
	h.deliver(ev)
	h.idle()
	cards := dmCards(h, carol)
	if len(cards) != 1 || len(dmCards(h, bob)) != 0 {
		t.Fatalf("DM cards: carol %d, bob %d", len(cards), len(dmCards(h, bob)))
	}
	ar := payloads[*core.ApprovalRequested](h, "C1", core.KindApprovalRequested)[0]
	if got := ar.ExpiresAt.Sub(h.clk.Now()); got > 31*time.Minute || got < 29*time.Minute {
		t.Errorf("deadline in %s, want 30m", got)
	}
	if items, _ := h.e.Inbox(context.Background(), platform, carol.ID); len(items) != 1 || items[0].Kind != "question" {
		t.Errorf("carol's inbox = %+v", items)
	}
	// The deadline passes with no answer: the run ends visibly.
	h.clk.Advance(31 * time.Minute)
	h.restart() // the expiry is found overdue at start
	h.idle()
	if r := h.runs("C1"); len(r) != 1 {
		t.Fatalf("runs = %d", len(r))
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunCancelled {
			t.Errorf("run %s after the deadline, want cancelled", r.Status)
		}
	}
	if c := current(t, h, cards[0]); !strings.Contains(c.Resolution, "Expired") {
		t.Errorf("carol's card after the deadline = %+v", c)
	}
}

func TestEscalationAnsweredByTheNamedPersonFromTheirDM(t *testing.T) {
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("q", "ask", `{"question":"Ship the release today?","options":["Ship","Wait"]}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "after: " + lastText(v)}, nil },
	)
	ask := askTool()
	inner := ask.Run
	ask.Run = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
		obs, err := inner(ctx, tc, args)
		if obs.Escalate != nil {
			obs.Escalate.To = []string{carol.ID}
		}
		return obs, err
	}
	h := newHarness(t, m, []core.Tool{ask}, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	h.deliver(h.mention(alice, "C1", "ask carol whether to ship"))
	h.idle()
	cards := dmCards(h, carol)
	if len(cards) != 1 {
		t.Fatalf("carol's DM cards = %d", len(cards))
	}
	h.click(carol, token(cards[0].Out.Card, "option-0"), dmScope(carol))
	h.idle()
	if _, ok := h.s.Find("after: Carol answered: Ship"); !ok {
		t.Fatalf("the run did not continue with Carol's answer: %+v", h.s.Posts())
	}
	if c := current(t, h, threadCards(h, "C1")[0]); !strings.Contains(c.Resolution, "Carol answered") {
		t.Errorf("thread card = %+v", c)
	}
}

// A second replica (its own engine over the same journal, started before
// the request existed) folds the same inbox and decides a DM click.
func TestAnotherReplicaShowsTheInboxAndTakesTheDMClick(t *testing.T) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "wipe", `{"id":"42"}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil },
	)
	h := newHarness(t, m, []core.Tool{wipeTool(log)}, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	replica := func() *engine.Engine {
		e, err := engine.New(h.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	reader, other := replica(), replica()

	h.deliver(h.mention(alice, "C1", "wipe record 42"))
	h.idle()
	cards := dmCards(h, bob)
	if len(cards) != 1 {
		t.Fatalf("bob's DM cards = %d", len(cards))
	}
	items, err := reader.Inbox(context.Background(), platform, bob.ID)
	if err != nil || len(items) != 1 {
		t.Fatalf("the other replica's inbox for Bob = %+v, %v", items, err)
	}
	click := core.CardClick{Scope: dmScope(bob), Token: token(cards[0].Out.Card, "approve"), By: bob, At: h.clk.Now()}
	if err := other.Deliver(context.Background(), core.Inbound{Click: &click}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := other.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.get(); len(got) != 1 {
		t.Fatalf("wipes = %v", got)
	}
	if c := current(t, h, threadCards(h, "C1")[0]); !strings.Contains(c.Resolution, "Approved by Bob") {
		t.Errorf("thread card = %+v", c)
	}
}
