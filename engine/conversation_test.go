package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
)

// Conversation continuity through the real engine and the real intent
// filter (windows opened by the engine's own posts). Every assertion is on
// what the recording model received.

// withFilter routes through a real intent filter on the harness's clock.
func withFilter(c *engine.Config) {
	filter := intent.NewFilter(intent.NewMemoryStore(c.Boundary.Now), c.Boundary.Now)
	c.Router = core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
		d, err := filter.Decide(ctx, ev)
		return d.Route, d.Reason.String(), err
	})
	c.PostObserver = filter
}

// topLevel is an untagged top-level message (routed only by a window).
func (h *harness) topLevel(p core.Person, ch, text string) core.Event {
	return core.Event{Scope: chanScope(ch), Visibility: core.Public, MessageID: h.msgID(), Author: p, Text: text, At: h.clk.Now()}
}

// replyTo is a top-level reply (Telegram reply_to_message, Discord
// message_reference) to message target.
func (h *harness) replyTo(p core.Person, ch, target string, toBot bool, text string) core.Event {
	ev := h.topLevel(p, ch, text)
	ev.ReplyTo, ev.ReplyToBot = target, toBot
	return ev
}

// lastView is the newest view the model received.
func lastView(t *testing.T, m *coretest.ScriptedModel) core.View {
	t.Helper()
	vs := m.Views()
	if len(vs) == 0 {
		t.Fatal("the model was never called")
	}
	return vs[len(vs)-1]
}

// wantHistory checks the newest view: its conversation holds want, in
// order, lacks notWant, and its last message is the follow-up itself.
func wantHistory(t *testing.T, m *coretest.ScriptedModel, followUp string, want []string, notWant ...string) string {
	t.Helper()
	hist := coretest.WantConversation(t, lastView(t, m), followUp, want...)
	for _, w := range notWant {
		if strings.Contains(hist, w) {
			t.Errorf("history of %q holds %q:\n%s", followUp, w, hist)
		}
	}
	return hist
}

func wantFresh(t *testing.T, m *coretest.ScriptedModel, what string) {
	t.Helper()
	if hist := coretest.ConversationOf(lastView(t, m)); hist != "" {
		t.Fatalf("%s: got an earlier conversation it does not continue:\n%s", what, hist)
	}
}

// answerTo is the bot's post answering text.
func (h *harness) answerTo(text string) coretest.Post {
	h.t.Helper()
	p, ok := h.s.Find("answered: " + text)
	if !ok {
		h.t.Fatalf("no answer to %q among %+v", text, h.s.Posts())
	}
	return p
}

// The sequence: mention → answer → top-level follow-up by the same
// person (routed by the top-level window) → a thread follow-up by someone
// else, in the follow-up's thread. Each run sees the conversation so far,
// who said each turn, oldest first.
func TestTopLevelFollowUpContinuesTheExchange(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Answered)
	h := newHarness(t, m, nil, withFilter)
	h.deliver(h.mention(alice, "C1", "the launch moved to Friday, note it"))
	h.idle()
	wantFresh(t, m, "the first mention")

	h.clk.Advance(2 * time.Minute)
	follow := h.topLevel(alice, "C1", "and who owns that launch?")
	h.deliver(follow)
	h.idle()
	if m.Calls() != 2 {
		t.Fatalf("the top-level follow-up was not routed: %d model calls", m.Calls())
	}
	wantHistory(t, m, "and who owns that launch?", []string{
		"Alice (<@UALICE>): <@UBOT> the launch moved to Friday, note it",
		"you (the bot): answered: the launch moved to Friday, note it",
	})

	h.clk.Advance(time.Minute)
	h.deliver(h.inThread(bob, "C1", follow.MessageID, "what day was it again?"))
	h.idle()
	hist := wantHistory(t, m, "what day was it again?", []string{
		"Alice (<@UALICE>): <@UBOT> the launch moved to Friday, note it",
		"you (the bot): answered: the launch moved to Friday, note it",
		"Alice (<@UALICE>): and who owns that launch?",
		"you (the bot): answered: and who owns that launch?",
	})
	if !strings.Contains(hist, "<untrusted-content") {
		t.Errorf("the conversation is not fenced as context:\n%s", hist)
	}

	// The conversation is recorded: each follow-up's message.received names
	// the first exchange's conversation, and a replay of the last run shows
	// the same turns the model saw.
	msgs := payloads[*core.MessageReceived](h, "C1", core.KindMessageReceived)
	for _, mr := range msgs[1:] {
		if mr.Conversation != msgs[0].Conversation || mr.Conversation == "" {
			t.Errorf("message %s joined conversation %q, want %q", mr.MessageID, mr.Conversation, msgs[0].Conversation)
		}
	}
	rs := replayLastRun(t, h, "C1")
	if rs.Conversation != msgs[0].Conversation {
		t.Errorf("the replayed run names conversation %q, want %q", rs.Conversation, msgs[0].Conversation)
	}
	if coretest.ConversationOf(core.View{Messages: rs.Messages}) != hist {
		t.Errorf("the replayed run shows other turns than the model saw:\n%+v", rs.Messages)
	}
	h.verify("C1")
}

func replayLastRun(t *testing.T, h *harness, ch string) *engine.RunReplay {
	t.Helper()
	starts := h.j.All(chanScope(ch).Key())
	var run string
	for _, c := range starts {
		if c.Kind() == core.KindRunStarted {
			run = c.Run()
		}
	}
	rs, err := engine.ReadRunReplay(context.Background(), h.j, run)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// Once the top-level window has closed, a new mention starts a new
// conversation; inside the window the follow-up, untagged or a mention (all
// Telegram's privacy mode lets through), still carried it.
func TestMentionAfterTheWindowClosedStartsFresh(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Answered)
	h := newHarness(t, m, nil, withFilter)
	h.deliver(h.mention(alice, "C1", "the launch moved to Friday"))
	h.idle()
	h.clk.Advance(time.Minute)
	h.deliver(h.topLevel(alice, "C1", "and who owns it?"))
	h.idle()
	wantHistory(t, m, "and who owns it?", []string{"the launch moved to Friday"})
	h.clk.Advance(time.Minute)
	h.deliver(h.mention(alice, "C1", "and the budget?"))
	h.idle()
	wantHistory(t, m, "and the budget?", []string{"the launch moved to Friday", "and who owns it?", "answered: and who owns it?"})

	h.clk.Advance(7 * time.Minute) // the 6-minute window is closed
	late := h.topLevel(alice, "C1", "and the venue?")
	h.deliver(late)
	h.idle()
	if m.Calls() != 3 {
		t.Fatalf("an untagged message after the window closed was routed")
	}
	h.deliver(h.mention(alice, "C1", "what is on today?"))
	h.idle()
	wantFresh(t, m, "a mention after the window closed")
	// Someone else's untagged top-level message never joins Alice's window.
	h.clk.Advance(time.Minute)
	h.deliver(h.mention(bob, "C1", "status?"))
	h.idle()
	wantFresh(t, m, "another person's new mention")
}

// The conversation comes from the journal: after a restart, and after the
// channel's fold was evicted, a follow-up still carries it.
func TestFollowUpAfterRestartAndEvictionCarriesTheConversation(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Answered)
	h := newHarness(t, m, nil, withFilter, func(c *engine.Config) { c.ChannelIdle = time.Minute })
	h.deliver(h.mention(alice, "C1", "the launch moved to Friday"))
	h.idle()

	h.restart()
	h.clk.Advance(2 * time.Minute)
	h.deliver(h.topLevel(alice, "C1", "and who owns it?"))
	h.idle()
	wantHistory(t, m, "and who owns it?", []string{"Alice (<@UALICE>): <@UBOT> the launch moved to Friday", "you (the bot): answered: the launch moved to Friday"})

	h.clk.Advance(2 * time.Minute)
	if n := h.e.EvictIdle(); n != 1 || h.e.Loaded(chanScope("C1").Key()) {
		t.Fatalf("setup: evicted %d channels", n)
	}
	h.deliver(h.topLevel(alice, "C1", "and the venue?"))
	h.idle()
	wantHistory(t, m, "and the venue?", []string{"the launch moved to Friday", "answered: the launch moved to Friday", "and who owns it?", "answered: and who owns it?"})
}

// Another replica takes the channel over (the first one is gone): the
// follow-up it receives carries the conversation the first one answered.
func TestFollowUpOnAnotherReplicaCarriesTheConversation(t *testing.T) {
	c := newCluster(t)
	filter := intent.NewFilter(intent.NewMemoryStore(nil), nil) // shared windows, as in Redis
	c.router = core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
		d, err := filter.Decide(ctx, ev)
		return d.Route, d.Reason.String(), err
	})
	c.observers = map[string]core.PostObserver{"a": filter, "b": filter}
	ma := coretest.NewScriptedModel(coretest.Answered)
	a := c.add("a", ma, nil)
	mb := coretest.NewScriptedModel(coretest.Answered)
	b := c.add("b", mb, nil)

	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> the launch moved to Friday", MentionsBot: true, At: time.Now()})
	waitFor(t, "the first answer", func() bool {
		return answers(a.s, "answered: the launch moved to Friday")+answers(b.s, "answered: the launch moved to Friday") == 1
	})
	if err := a.e.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = a.e.Close() // a is gone; its lease is released
	deliverTo(t, b, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M2", Author: alice,
		Text: "and who owns it?", At: time.Now()})
	waitFor(t, "b's answer", func() bool { return answers(b.s, "answered: and who owns it?") == 1 })
	m := mb
	if ma.Calls() == 2 {
		m = ma
	}
	wantHistory(t, m, "and who owns it?", []string{"Alice (<@UALICE>): <@UBOT> the launch moved to Friday", "you (the bot): answered: the launch moved to Friday"})
}

// A 200-turn DM is one conversation whose history stays within the turn and
// token bounds: the newest turns, oldest first, and never more.
func TestLongDMHistoryStaysBounded(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Answered)
	h := newHarness(t, m, nil, withFilter)
	filler := strings.Repeat("lorem ipsum ", 80) // ~960 characters a turn
	var inputs []int
	for i := 1; i <= 100; i++ {
		h.deliver(h.inDM(alice, fmt.Sprintf("turn %03d %s", i, filler)))
		h.idle()
		h.clk.Advance(time.Minute)
		inputs = append(inputs, len(coretest.ConversationOf(lastView(t, m))))
	}
	// 100 messages and 100 answers: 200 turns.
	hist := coretest.ConversationOf(lastView(t, m))
	if hist == "" {
		t.Fatal("a DM follow-up got no conversation")
	}
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	turns := lines[2 : len(lines)-1] // between the header, the fence's open and its close
	if len(turns) > fold.ConversationTurns {
		t.Fatalf("history has %d turns, bound is %d", len(turns), fold.ConversationTurns)
	}
	tokens := 0
	for _, l := range turns {
		tokens += (len(l) + 16) / 4
	}
	if tokens > fold.ConversationTokens+fold.ConversationTurns*8 {
		t.Fatalf("history is about %d tokens, budget is %d:\n%d turns", tokens, fold.ConversationTokens, len(turns))
	}
	if !strings.HasPrefix(turns[len(turns)-1], "you (the bot): answered: turn 099") || !strings.Contains(turns[len(turns)-2], "turn 099") {
		t.Errorf("history does not end with the latest exchange: %q", turns[len(turns)-2:])
	}
	if strings.Contains(hist, "turn 001 ") {
		t.Errorf("the first turn is still in the history")
	}
	// Flat: the history the 100th message gets is no bigger than the 50th's.
	if inputs[99] > inputs[49]+64 {
		t.Errorf("history grew from %d to %d characters", inputs[49], inputs[99])
	}
}

// A reply to an old message continues that message's conversation, not the
// latest one: Bob replies to the answer Alice got before Carol's exchange.
// A reply to a person's message (not the bot's) that mentions the bot
// continues its conversation too.
func TestReplyToAnOldMessageContinuesItsConversation(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Answered)
	h := newHarness(t, m, nil, withFilter)
	first := h.mention(alice, "C1", "the launch moved to Friday")
	h.deliver(first)
	h.idle()
	h.deliver(h.mention(carol, "C1", "book the venue for the offsite"))
	h.idle()
	h.clk.Advance(10 * time.Minute) // every window closed

	old := h.answerTo("the launch moved to Friday")
	h.deliver(h.replyTo(bob, "C1", old.Ref.ID, true, "is that still true?"))
	h.idle()
	wantHistory(t, m, "is that still true?",
		[]string{"Alice (<@UALICE>): <@UBOT> the launch moved to Friday", "you (the bot): answered: the launch moved to Friday"},
		"offsite")

	ev := h.replyTo(carol, "C1", first.MessageID, false, "<@"+botID+"> and what about the venue?")
	ev.MentionsBot = true
	h.deliver(ev)
	h.idle()
	wantHistory(t, m, "and what about the venue?",
		[]string{"the launch moved to Friday", "answered: the launch moved to Friday", "Bob (<@UBOB>): is that still true?", "answered: is that still true?"},
		"offsite")
}

// Earlier turns are conversation, never the requester's words: Alice named
// #launch-room, Bob replies "send it" to Marlowe's answer. The model sees
// Alice's words as context, but a post to #launch-room in Bob's run is not
// a target Bob named, so it waits for approval and nothing is sent.
func TestAnotherPersonsEarlierTextIsNotTheRequesters(t *testing.T) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(coretest.Answered)
	h := newHarness(t, m, []core.Tool{sendTool(log)}, withFilter, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{ApprovalLevels: []core.Consequence{core.Irreversible}, Approvers: []string{carol.ID}}
	})
	h.deliver(h.mention(alice, "C1", "the summary goes to #launch-room"))
	h.idle()

	m2 := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "send_to", `{"channel":"#launch-room","text":"summary"}`)),
		coretest.Text("Waiting for approval."))
	h.cfg.Model = m2
	h.restart()
	ans := h.answerTo("the summary goes to #launch-room")
	h.deliver(h.replyTo(bob, "C1", ans.Ref.ID, true, "send it"))
	h.idle()
	first := m2.Views()[0]
	if !strings.Contains(coretest.ConversationOf(first), "Alice (<@UALICE>): <@UBOT> the summary goes to #launch-room") {
		t.Fatalf("setup: Bob's run did not see Alice's words as conversation:\n%+v", first.Messages)
	}
	if got := log.get(); len(got) != 0 {
		t.Fatalf("sent on a target only another person named: %v", got)
	}
	asks := payloads[*core.PermissionDecided](h, "C1", core.KindPermissionDecided)
	if len(asks) != 1 || asks[0].Decision != "ask" {
		t.Fatalf("gate decisions %+v, want one ask", asks)
	}
	if n := h.count("C1", core.KindApprovalRequested); n != 1 {
		t.Fatalf("%d approval cards, want 1", n)
	}
}
