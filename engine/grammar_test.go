package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// memTools are minimal remember / recall / forget tools over ToolContext
// memory (the real ones live in package tools).
func memTools() []core.Tool {
	obj := func(props string, req ...string) json.RawMessage {
		r, _ := json.Marshal(req)
		return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%s},"required":%s}`, props, r))
	}
	return []core.Tool{
		{Name: "remember", Consequence: core.Write, Schema: obj(`"text":{"type":"string"}`, "text"),
			Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
				var a struct{ Text string }
				_ = json.Unmarshal(args, &a)
				id, err := tc.Memory.Remember(ctx, a.Text)
				return core.Observation{Text: "Remembered (id " + id + ").", Trust: core.Trusted}, err
			}},
		{Name: "recall", Consequence: core.Read, Schema: obj(`"query":{"type":"string"}`, "query"),
			Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
				var a struct{ Query string }
				_ = json.Unmarshal(args, &a)
				hits, err := tc.Memory.Recall(ctx, a.Query, 5)
				var lines []string
				for _, h := range hits {
					lines = append(lines, "["+h.ID+"] "+h.Text)
				}
				if len(lines) == 0 {
					lines = []string{"No memories match."}
				}
				return core.Observation{Text: strings.Join(lines, "\n"), Trust: core.Untrusted}, err
			}},
		{Name: "forget", Consequence: core.Write, Schema: obj(`"id":{"type":"string"}`, "id"),
			Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
				var a struct{ ID string }
				_ = json.Unmarshal(args, &a)
				return core.Observation{Text: "Forgotten " + a.ID + ".", Trust: core.Trusted}, tc.Memory.Forget(ctx, a.ID, "")
			}},
	}
}

// say delivers a mention and returns the bot's answer to it.
func (h *harness) say(p core.Person, text string) string {
	h.t.Helper()
	ev := h.mention(p, "C1", text)
	h.deliver(ev)
	h.idle()
	var last string
	for _, post := range h.s.Posts() {
		if post.Ref.Scope.Thread == ev.MessageID && !strings.HasPrefix(post.Out.Text, "⏳") {
			last = post.Out.Text
		}
	}
	return last
}

func TestOfflineGrammar(t *testing.T) {
	h := newHarness(t, nil, memTools())
	if got := h.say(alice, "help"); !strings.Contains(got, "remember <something>") {
		t.Errorf("help = %q", got)
	}
	if got := h.say(alice, "remember the wifi password is in the blue binder"); got != "Remembered (id m1)." {
		t.Errorf("remember = %q", got)
	}
	if got := h.say(bob, "recall wifi"); !strings.Contains(got, "[m1] the wifi password is in the blue binder") {
		t.Errorf("recall = %q", got)
	}
	if got := h.say(bob, "forget m1"); got != "Forgotten m1." {
		t.Errorf("forget = %q", got)
	}
	if got := h.say(bob, "forget m9"); !strings.HasPrefix(got, "I couldn't do that:") {
		t.Errorf("forget unknown = %q", got)
	}
	if got := h.say(bob, "recall wifi"); got != "No memories match." {
		t.Errorf("recall after forget = %q", got)
	}
	got := h.say(alice, "what's the weather?")
	if !strings.Contains(got, "MARLOWE_MODEL_PROVIDER=openai") || !strings.Contains(got, "MARLOWE_MODEL_BASE_URL") || !strings.Contains(got, "Ollama") {
		t.Errorf("unknown = %q", got)
	}
	// Offline runs answer directly: no checklist message.
	for _, p := range h.s.Posts() {
		if strings.HasPrefix(p.Out.Text, "⏳") {
			t.Errorf("offline run posted a checklist")
		}
	}
	// The grammar's calls went through the gate and the journal like a model's.
	if n := h.count("C1", core.KindPermissionDecided); n != 5 {
		t.Errorf("permission.decided = %d", n)
	}
}

// operatorAlice makes Alice an operator-configured admin (MARLOWE_ADMINS).
func operatorAlice(c *engine.Config) {
	c.Operators = []core.Operator{{Platform: platform, UserID: alice.ID}}
}

func TestPolicyCommands(t *testing.T) {
	h := newHarness(t, nil, memTools(), operatorAlice)
	if got := h.say(alice, "policy"); !strings.Contains(got, "channel admins: none set") || !strings.Contains(got, "tools: remember, recall, forget") {
		t.Errorf("policy = %q", got)
	}
	if got := h.say(alice, "policy set admins <@UALICE>"); !strings.Contains(got, "Policy updated") {
		t.Errorf("set admins = %q", got)
	}
	if got := h.say(bob, "policy set approvers UBOB"); !strings.Contains(got, "Only this channel's admins") {
		t.Errorf("non-admin change = %q", got)
	}
	if got := h.say(alice, "policy set approvers UBOB, UCAROL"); !strings.Contains(got, "• approvers: anyone in the channel → <@UBOB>, <@UCAROL>") {
		t.Errorf("set approvers = %q", got)
	}
	if got := h.say(alice, "policy set tools recall"); !strings.Contains(got, "• tools: remember, recall, forget → recall") {
		t.Errorf("set tools = %q", got)
	}
	if got := h.say(alice, "policy set tools bogus"); !strings.Contains(got, `no tool named "bogus"`) {
		t.Errorf("set unknown tool = %q", got)
	}
	if got := h.say(alice, "policy set window thread 30m"); !strings.Contains(got, "thread 30 minutes") {
		t.Errorf("set window = %q", got)
	}
	if got := h.say(alice, "policy set budget 5000"); !strings.Contains(got, "5000 tokens/day") {
		t.Errorf("set budget = %q", got)
	}
	if got := h.say(alice, "policy frobnicate"); !strings.Contains(got, "Usage:") {
		t.Errorf("usage = %q", got)
	}
	// remember is no longer exposed: the gate denies it.
	if got := h.say(alice, "remember x"); !strings.Contains(got, "not enabled in this channel") {
		t.Errorf("remember with tools=recall: %q", got)
	}
	changes := payloads[*core.PolicyChanged](h, "C1", core.KindPolicyChanged)
	if len(changes) != 5 {
		t.Fatalf("policy.changed = %d", len(changes))
	}
	p := changes[len(changes)-1].Policy
	if p.ThreadWindowS != 1800 || p.DailyTokenBudget != 5000 || len(p.Approvers) != 2 || p.Admins[0] != "UALICE" {
		t.Errorf("policy = %+v", p)
	}
	// policy.changed is stamped with the admin who changed it.
	for _, c := range h.j.All(chanScope("C1").Key()) {
		if c.Kind() == core.KindPolicyChanged && (c.Actor().Type != core.ActorHuman || c.Actor().ID != alice.ID) {
			t.Errorf("policy.changed actor = %+v", c.Actor())
		}
	}
}

// adminSurface is a surface whose platform names its administrators (a
// Slack workspace admin, a Discord guild administrator).
type adminSurface struct {
	*coretest.FakeSurface
	admins map[string]bool
	err    error
}

func (s adminSurface) IsAdmin(_ context.Context, _ core.Scope, userID string) (bool, error) {
	return s.admins[userID], s.err
}

// TestPolicyTakeoverIsRefused attacks governance: nobody may make
// themselves an admin, or change anything else, without being one already.
func TestPolicyTakeoverIsRefused(t *testing.T) {
	attacks := []string{
		"policy set admins <@UBOB>", "policy set approvers UBOB", "policy set tools recall",
		"policy set window thread 600m", "policy set budget 99999999", "policy set approval none",
	}
	cases := []struct {
		name      string
		opts      func(*engine.Config)
		want      string
		allowedBy core.Person // someone who may change it ("" = nobody)
	}{
		{name: "no admin known", want: "MARLOWE_ADMINS"},
		{name: "an operator on another platform", want: "MARLOWE_ADMINS",
			opts: func(c *engine.Config) { c.Operators = []core.Operator{{Platform: "other", UserID: bob.ID}} }},
		{name: "operator configured", opts: operatorAlice, want: "Only an admin", allowedBy: alice},
		{name: "platform admin", want: "Only an admin", allowedBy: carol, opts: func(c *engine.Config) {
			c.Surfaces[platform] = adminSurface{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface), admins: map[string]bool{carol.ID: true}}
		}},
		{name: "platform lookup fails", want: "couldn't check", opts: func(c *engine.Config) {
			c.Surfaces[platform] = adminSurface{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface),
				admins: map[string]bool{bob.ID: true}, err: errors.New("users.info: ratelimited")}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*engine.Config)
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			h := newHarness(t, nil, memTools(), opts...)
			for _, a := range attacks {
				if got := h.say(bob, a); !strings.Contains(got, "Nothing was changed") || !strings.Contains(got, tc.want) {
					t.Errorf("bob: %s = %q, want a refusal naming %q", a, got, tc.want)
				}
			}
			if n := h.count("C1", core.KindPolicyChanged); n != 0 {
				t.Fatalf("policy.changed = %d after a non-admin's attempts", n)
			}
			if tc.allowedBy.ID == "" {
				return
			}
			if got := h.say(tc.allowedBy, "policy set admins <@UCAROL>"); !strings.Contains(got, "Policy updated") {
				t.Fatalf("%s (an admin) set admins = %q", tc.allowedBy.Name, got)
			}
			// A channel admin set by an admin may change the policy; the
			// channel having admins now does not let Bob in.
			if got := h.say(carol, "policy set approvers UCAROL"); !strings.Contains(got, "Policy updated") {
				t.Errorf("channel admin carol = %q", got)
			}
			if got := h.say(bob, "policy set admins <@UBOB>"); !strings.Contains(got, "Only this channel's admins (<@UCAROL>)") {
				t.Errorf("bob after admins were set = %q", got)
			}
			if n := h.count("C1", core.KindPolicyChanged); n != 2 {
				t.Errorf("policy.changed = %d, want 2", n)
			}
		})
	}
}

func TestPolicyCommandsBypassTheModel(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("model answer"))
	h := newHarness(t, m, memTools(), operatorAlice)
	if got := h.say(alice, "policy set approvers UBOB"); !strings.Contains(got, "Policy updated") {
		t.Errorf("policy with a model = %q", got)
	}
	if m.Calls() != 0 {
		t.Errorf("policy command went to the model")
	}
	if got := h.say(alice, "policy question: can I expense lunch?"); got != "model answer" {
		t.Errorf("non-command = %q", got)
	}
	// With a model, remember goes to the model (which may use the tool).
	if got := h.say(alice, "remember to water the plants"); got != "model answer" {
		t.Errorf("remember with model = %q", got)
	}
}

func TestBudgetExhaustedAdminCanStillRaiseIt(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("ok"))
	m.Usage = core.Usage{InputTokens: 2000}
	h := newHarness(t, m, nil, operatorAlice, func(c *engine.Config) { c.Budgets.DailyTokens = 1000 })
	h.say(alice, "spend")
	if got := h.say(alice, "again"); !strings.Contains(got, "daily token budget") {
		t.Fatalf("over budget = %q", got)
	}
	if got := h.say(alice, "policy set budget 100000"); !strings.Contains(got, "Policy updated") {
		t.Fatalf("raise = %q", got)
	}
	if got := h.say(alice, "again"); got != "ok" {
		t.Errorf("after raise = %q", got)
	}
}

// Without a model, the first question of a conversation is told how to
// configure one and what works without; a follow-up in the same thread
// gets one short line, not the same paragraph again. `help` names each
// command once.
func TestNoModelReplyOncePerConversation(t *testing.T) {
	h := newHarness(t, nil, memTools())
	ev := h.mention(alice, "C1", "what's the weather")
	h.deliver(ev)
	h.idle()
	var replies []string
	for _, p := range h.s.Posts() {
		if p.Ref.Scope.Thread == ev.MessageID && !strings.HasPrefix(p.Out.Text, "⏳") {
			replies = append(replies, p.Out.Text)
		}
	}
	if len(replies) == 0 || !strings.Contains(replies[0], "`remember …`") || !strings.Contains(replies[0], "MARLOWE_MODEL_BASE_URL") {
		t.Fatalf("first reply = %q", replies)
	}
	again := h.sayIn(alice, ev.MessageID, "and what about tomorrow?")
	if again != chatcommand.NeedModelAgainText() {
		t.Errorf("the follow-up got %q, want the short line", again)
	}
	if n := strings.Count(h.say(bob, "help"), "consent revoke"); n != 1 {
		t.Errorf("help names consent revoke %d times", n)
	}
}
