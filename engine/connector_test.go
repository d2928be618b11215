package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
)

// fakeSource offers connector tools through the registry's dynamic port,
// as the connectors package does.
type fakeSource struct{ tools []core.Tool }

func (s fakeSource) ToolsIn(core.ChannelKey) []core.Tool { return s.tools }
func (s fakeSource) Tool(name string) (core.Tool, bool) {
	for _, t := range s.tools {
		if t.Name == name {
			return t, true
		}
	}
	return core.Tool{}, false
}

// A connector call whose outcome is unknown after a crash (the process
// died while the server had it) is not sent again unless the tool is
// read-only or idempotent: the person gets a card to send it again or
// skip it, and an irreversible one is sent again only on someone else's
// word. On the old code every non-irreversible call ran again at once.
// The in-doubt card's options (engine/connector.go).
const (
	inDoubtRetry = "Send it again"
	inDoubtSkip  = "Skip it"
)

func TestConnectorCallInterruptedByACrashIsNotResent(t *testing.T) {
	cases := []struct {
		name        string
		consequence core.Consequence
		idempotent  bool
		answer      string      // the in-doubt card's answer ("" = no card)
		by          core.Person // who answers
		wantCalls   int32
	}{
		{"write skipped", core.Write, false, inDoubtSkip, alice, 1},
		{"send retried", core.Send, false, inDoubtRetry, alice, 2},
		{"irreversible: the requester cannot retry", core.Irreversible, false, inDoubtRetry, alice, 1},
		{"irreversible retried by another", core.Irreversible, false, inDoubtRetry, bob, 2},
		{"idempotent write", core.Write, true, "", alice, 2},
		{"read", core.Read, false, "", alice, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			started := make(chan struct{}, 4)
			tool := core.Tool{
				Name: "github__create-issue", Description: "Create an issue.", Consequence: c.consequence,
				Schema:    json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`),
				Connector: &core.ToolOrigin{Server: "github", Tool: "create-issue", Definition: "d1", Idempotent: c.idempotent},
				Run: func(ctx context.Context, _ core.ToolContext, _ json.RawMessage) (core.Observation, error) {
					if calls.Add(1) == 1 {
						started <- struct{}{}
						<-ctx.Done() // the process dies with the call at the server
						return core.Observation{}, ctx.Err()
					}
					return core.Observation{Text: "created #7"}, nil
				},
			}
			m := coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("c1", "github__create-issue", `{"title":"flaky test"}`)),
				coretest.Text("done"))
			h := newHarness(t, m, nil, platformAdmins(bob.ID), func(cfg *engine.Config) {
				cfg.Tools = cfg.Tools.WithSource(fakeSource{tools: []core.Tool{tool}}, 20)
				cfg.DefaultPolicy = core.Policy{ApprovalLevels: []core.Consequence{core.Irreversible}}
			})
			ev := h.mention(alice, "C1", "file an issue about the flaky test")
			h.deliver(ev)
			if c.consequence == core.Irreversible {
				h.idle()
				h.click(bob, token(threadCards(h, "C1")[0].Out.Card, "approve"), threadOf(ev))
			}
			<-started
			h.restart()
			h.idle()
			if c.answer != "" {
				// Nothing was sent again: the person is asked.
				if got := calls.Load(); got != 1 {
					t.Fatalf("the call was re-sent before anyone answered: %d calls", got)
				}
				var card *core.Card
				for _, p := range threadCards(h, "C1") {
					if strings.Contains(p.Out.Card.Title, "outcome is unknown") {
						card = p.Out.Card
					}
				}
				if card == nil {
					t.Fatalf("no in-doubt card: %+v", h.s.Cards())
				}
				i := 0
				if c.answer == inDoubtSkip {
					i = 1
				}
				h.click(c.by, card.Actions[i].Token, threadOf(ev))
				h.idle()
			}
			if got := calls.Load(); got != c.wantCalls {
				t.Errorf("the server got the call %d times, want %d", got, c.wantCalls)
			}
			done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
			switch {
			case c.wantCalls == 2 && (len(done) != 1 || !done[0].OK):
				t.Errorf("sent again, completed as %+v", done)
			case c.wantCalls == 1 && c.answer == inDoubtSkip && (len(done) != 1 || done[0].Code != "interrupted" || !strings.Contains(done[0].Error, "chose to skip it")):
				t.Errorf("skipped, completed as %+v", done)
			case c.wantCalls == 1 && c.answer == inDoubtRetry && len(done) != 0:
				t.Errorf("the requester's refused click completed the call: %+v", done)
			}
			h.verify("C1")
		})
	}
}

// Connector tools reach the model through the registry's source, only in
// the channels they are offered in, and find_tool replaces their schemas
// past the configured count; the gate denies a call in a channel where the
// tool is not offered.
func TestConnectorToolsAreOfferedPerChannelAndCutOverToFindTool(t *testing.T) {
	mk := func(name string) core.Tool {
		return core.Tool{Name: name, Description: "tool " + name, Consequence: core.Read,
			Schema:    json.RawMessage(`{"type":"object","properties":{"q":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`),
			Connector: &core.ToolOrigin{Server: "s", Tool: name},
			Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
				return core.Observation{Text: "ran " + name}, nil
			}}
	}
	src := perChannel{"test/W1/C1": {mk("s__a"), mk("s__b"), mk("s__c")}}
	reg, err := gate.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	few, many := reg.WithSource(src, 5), reg.WithSource(src, 2)
	if got := few.ExposedIn("test/W1/C1", core.Policy{}); strings.Join(got, ",") != "s__a,s__b,s__c" {
		t.Errorf("exposed under the cut-over: %v", got)
	}
	if got := few.ExposedIn("test/W1/C2", core.Policy{}); len(got) != 0 {
		t.Errorf("exposed in a channel without the server: %v", got)
	}
	exposed := many.ExposedIn("test/W1/C1", core.Policy{})
	specs := many.Specs(exposed)
	if len(specs) != 1 || specs[0].Name != gate.FindToolName {
		t.Errorf("past the cut-over the model is shown %v, want find_tool alone", specs)
	}
	ft, _ := many.Get(gate.FindToolName)
	obs, err := ft.Run(context.Background(), core.ToolContext{Scope: chanScope("C1"), Offered: exposed}, json.RawMessage(`{"query":"b"}`))
	if err != nil || !strings.Contains(obs.Text, `"name":"s__b"`) || !strings.Contains(obs.Text, "inputSchema") {
		t.Errorf("find_tool: %q %v", obs.Text, err)
	}
	// A call to a tool only find_tool showed validates (its anyOf schema is
	// outside the built-in subset, so only "an object" is checked).
	if _, _, cerr := many.ValidateCall(core.ToolCall{ID: "1", Name: "s__b", Args: `{"q":null}`}, exposed); cerr != nil {
		t.Errorf("validate: %v", cerr)
	}
	if _, _, cerr := many.ValidateCall(core.ToolCall{ID: "1", Name: "s__b", Args: `[1]`}, exposed); cerr == nil {
		t.Error("non-object arguments validated")
	}
}

type perChannel map[core.ChannelKey][]core.Tool

func (p perChannel) ToolsIn(ch core.ChannelKey) []core.Tool { return p[ch] }
func (p perChannel) Tool(name string) (core.Tool, bool) {
	for _, ts := range p {
		for _, t := range ts {
			if t.Name == name {
				return t, true
			}
		}
	}
	return core.Tool{}, false
}

// connectorHarness offers one connector tool (irreversible unless
// annotated otherwise) that records the arguments it ran with.
func connectorHarness(t *testing.T, c core.Consequence, calls ...core.ToolCall) (*harness, *toolLog, core.Event) {
	log := &toolLog{}
	mk := func(name string) core.Tool {
		return core.Tool{Name: "github__" + name, Description: "from the server", Consequence: c,
			Schema:    json.RawMessage(`{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"}}}`),
			Connector: &core.ToolOrigin{Server: "github", Tool: name, Definition: "d-" + name},
			Run: func(_ context.Context, _ core.ToolContext, args json.RawMessage) (core.Observation, error) {
				log.add(name + " " + string(args))
				return core.Observation{Text: "ok"}, nil
			}}
	}
	var steps []coretest.Step
	for _, call := range calls {
		steps = append(steps, coretest.Calls(call))
	}
	steps = append(steps, func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil })
	m := coretest.NewScriptedModel(steps...)
	h := newHarness(t, m, nil, platformAdmins(bob.ID), func(cfg *engine.Config) {
		cfg.Tools = cfg.Tools.WithSource(fakeSource{tools: []core.Tool{mk("delete_repo"), mk("create_issue")}}, 20)
	})
	ev := h.mention(alice, "C1", "please do it")
	h.deliver(ev)
	h.idle()
	return h, log, ev
}

// A connector's irreversible call asks for approval with a card naming the
// server, the tool and the exact arguments; the requester cannot approve
// it; another person's approval runs it once with exactly those arguments.
func TestConnectorApprovalCardShowsServerToolAndExactArguments(t *testing.T) {
	args := `{"repo":"acme/api","title":"a \"quoted\" title ✓"}`
	h, log, ev := connectorHarness(t, core.Irreversible, coretest.Call("c1", "github__delete_repo", args))
	cards := threadCards(h, "C1")
	if len(cards) != 1 {
		t.Fatalf("cards: %+v", h.s.Posts())
	}
	card := cards[0].Out.Card
	for _, w := range []string{"github__delete_repo", `tool "delete_repo"`, `connector "github"`, `{"repo":"acme/api","title":"a \"quoted\" title ✓"}`} {
		if !strings.Contains(card.Body, w) {
			t.Errorf("card body %q lacks %q", card.Body, w)
		}
	}
	h.click(alice, token(card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 0 {
		t.Fatalf("the requester's own approval ran an irreversible connector call: %v", got)
	}
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != "delete_repo "+`{"repo":"acme/api","title":"a \"quoted\" title ✓"}` {
		t.Fatalf("executions = %v", got)
	}
	if n := h.count("C1", core.KindConsentGranted); n != 0 {
		t.Errorf("a consent was recorded for an irreversible call")
	}
}

// Declining a connector call runs nothing and tells the model who declined.
func TestConnectorCallDeclined(t *testing.T) {
	h, log, ev := connectorHarness(t, core.Send, coretest.Call("c1", "github__create_issue", `{"repo":"acme/api","title":"x"}`))
	card := threadCards(h, "C1")[0].Out.Card
	h.click(bob, token(card, "decline"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 0 {
		t.Fatalf("declined call ran: %v", got)
	}
	if ans, ok := h.s.Find("result:"); !ok || !strings.Contains(ans.Out.Text, "declined by Bob") {
		t.Errorf("answer: %+v", ans.Out.Text)
	}
}

// "Always allow" on a connector tool covers that tool in that channel,
// never another tool of the same server.
func TestConnectorAlwaysAllowCoversThatToolOnly(t *testing.T) {
	h, log, ev := connectorHarness(t, core.Send,
		coretest.Call("c1", "github__create_issue", `{"repo":"acme/api","title":"one"}`),
		coretest.Call("c2", "github__delete_repo", `{"repo":"acme/api"}`),
		coretest.Call("c3", "github__create_issue", `{"repo":"acme/api","title":"two"}`))
	card := threadCards(h, "C1")[0].Out.Card
	h.click(bob, token(card, "always"), threadOf(ev))
	h.idle()
	cards := threadCards(h, "C1")
	if len(cards) != 2 || !strings.Contains(cards[1].Out.Card.Body, "github__delete_repo") {
		t.Fatalf("the other tool was not asked for: %d cards", len(cards))
	}
	h.click(bob, token(cards[1].Out.Card, "approve"), threadOf(ev))
	h.idle()
	if n := len(threadCards(h, "C1")); n != 2 {
		t.Errorf("the consented tool asked again: %d cards", n)
	}
	if got := log.get(); len(got) != 3 {
		t.Errorf("executions = %v", got)
	}
}

// mutableSource is a connector whose tool definitions change under the
// channel (a rug pull).
type mutableSource struct {
	mu    sync.Mutex
	tools []core.Tool
}

func (s *mutableSource) set(ts ...core.Tool) { s.mu.Lock(); s.tools = ts; s.mu.Unlock() }
func (s *mutableSource) ToolsIn(core.ChannelKey) []core.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}
func (s *mutableSource) Tool(name string) (core.Tool, bool) {
	for _, t := range s.ToolsIn("") {
		if t.Name == name {
			return t, true
		}
	}
	return core.Tool{}, false
}

// The channel pins a connector tool's definition on first use. When the
// server changes it, the call is withheld and the channel's admins are
// asked in their inboxes; the requester cannot accept it; nothing runs on
// the new definition until an admin does, and then it runs.
func TestConnectorDefinitionChangeIsWithheldUntilAnAdminAccepts(t *testing.T) {
	log := &toolLog{}
	mk := func(def string) core.Tool {
		return core.Tool{Name: "crm__lookup", Description: "Look a customer up.", Consequence: core.Read,
			Schema:    json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			Connector: &core.ToolOrigin{Server: "crm", Tool: "lookup", Definition: def},
			Run: func(_ context.Context, _ core.ToolContext, args json.RawMessage) (core.Observation, error) {
				log.add(def + " " + string(args))
				return core.Observation{Text: "found"}, nil
			}}
	}
	src := &mutableSource{}
	src.set(mk("def-1"))
	// Every run looks acme up once, then answers with what it got.
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "crm__lookup", `{"q":"acme"}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil },
	)
	h := newHarness(t, m, nil, func(cfg *engine.Config) {
		cfg.Tools = cfg.Tools.WithSource(src, 20)
		cfg.Operators = []core.Operator{{Platform: platform, UserID: bob.ID}}
	})
	h.deliver(h.mention(alice, "C1", "look up acme"))
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Fatalf("first use: %v", got)
	}
	// The server changes the tool (a rug pull).
	src.set(mk("def-2"))
	ev := h.mention(alice, "C1", "look up acme again")
	h.deliver(ev)
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Fatalf("a changed definition ran before anyone accepted it: %v", got)
	}
	cards := threadCards(h, "C1")
	if len(cards) != 1 || !strings.Contains(cards[0].Out.Card.Title, "changed the definition") {
		t.Fatalf("no question to the admins: %+v", h.s.Cards())
	}
	ar := payloads[*core.ApprovalRequested](h, "C1", core.KindApprovalRequested)
	if len(ar) != 1 || ar[0].Pin != "def-2" || !slices.Contains(ar[0].Notify, bob.ID) {
		t.Fatalf("the admins' inboxes were not asked: %+v", *ar[0])
	}
	card := cards[0].Out.Card
	h.click(alice, card.Actions[0].Token, threadOf(ev)) // the requester, not an admin
	h.idle()
	if n := h.count("C1", core.KindApprovalResolved); n != 0 {
		t.Fatalf("the requester accepted a changed definition")
	}
	h.click(bob, card.Actions[0].Token, threadOf(ev))
	h.idle()
	if !answered(h, "accepted the tool's new definition") {
		t.Errorf("the model was not told of the acceptance: %+v", h.s.Posts())
	}
	if got := log.get(); len(got) != 1 {
		t.Fatalf("accepting ran the withheld call itself: %v", got)
	}
	h.deliver(h.mention(alice, "C1", "and once more"))
	h.idle()
	if got := log.get(); len(got) != 2 || got[1] != `def-2 {"q":"acme"}` {
		t.Errorf("after acceptance: %v", got)
	}
	h.verify("C1")
}

func answered(h *harness, text string) bool {
	for _, p := range h.s.Posts() {
		if strings.HasPrefix(p.Out.Text, "result:") && strings.Contains(p.Out.Text, text) {
			return true
		}
	}
	return false
}

// A run resumed before its connector is back (the tool unknown for now)
// does not treat an allowed call as never made: it is in doubt, and the
// card waits; "send it again" while the server is still away sends
// nothing, and once it is back sends the call. The old code completed it
// as an unknown tool, as if nothing had happened.
func TestConnectorCallWhoseServerIsNotBackAfterACrashIsInDoubt(t *testing.T) {
	var calls atomic.Int32
	started := make(chan struct{}, 1)
	tool := core.Tool{
		Name: "github__create-issue", Description: "Create an issue.", Consequence: core.Write,
		Schema:    json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`),
		Connector: &core.ToolOrigin{Server: "github", Tool: "create-issue", Definition: "d1"},
		Run: func(ctx context.Context, _ core.ToolContext, _ json.RawMessage) (core.Observation, error) {
			if calls.Add(1) == 1 {
				started <- struct{}{}
				<-ctx.Done()
				return core.Observation{}, ctx.Err()
			}
			return core.Observation{Text: "created"}, nil
		},
	}
	src := &mutableSource{}
	src.set(tool)
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "github__create-issue", `{"title":"x"}`)),
		coretest.Text("done"))
	h := newHarness(t, m, nil, platformAdmins(bob.ID), func(cfg *engine.Config) {
		cfg.Tools = cfg.Tools.WithSource(src, 20)
		cfg.DefaultPolicy = core.Policy{ApprovalLevels: []core.Consequence{core.Irreversible}}
	})
	ev := h.mention(alice, "C1", "file it")
	h.deliver(ev)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatalf("the call never started: %v", h.kinds("C1"))
	}
	src.set() // the server is not back when the run resumes
	h.restart()
	h.idle()
	if done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted); len(done) != 0 {
		t.Fatalf("completed without asking: %+v", done)
	}
	cards := threadCards(h, "C1")
	if len(cards) != 1 || !strings.Contains(cards[0].Out.Card.Title, "outcome is unknown") {
		t.Fatalf("no in-doubt card: %+v", h.s.Cards())
	}
	src.set(tool) // the server is back
	h.click(bob, cards[0].Out.Card.Actions[0].Token, threadOf(ev))
	h.idle()
	if got := calls.Load(); got != 2 {
		t.Errorf("calls = %d, want 2 (sent again on Bob's word)", got)
	}
	if done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted); len(done) != 1 || !done[0].OK {
		t.Errorf("tool.completed = %+v", done)
	}
}

// A channel's policy raises a connector tool's consequence (its admins'
// `policy set consequence`): a write the annotations allowed now asks; a
// connector turned off in the channel is denied.
func TestConnectorChannelPolicyRaisesConsequenceAndTurnsServersOff(t *testing.T) {
	ran := &toolLog{}
	tool := core.Tool{Name: "github__create_issue", Description: "d", Consequence: core.Write,
		Schema:    json.RawMessage(`{"type":"object"}`),
		Connector: &core.ToolOrigin{Server: "github", Tool: "create_issue", Definition: "d1"},
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			ran.add("ran")
			return core.Observation{Text: "ok"}, nil
		}}
	for _, c := range []struct {
		name string
		pol  core.Policy
		want string // permission.decided verdict
	}{
		{"raised", core.Policy{Consequences: map[string]core.Consequence{"github__create_issue": core.Irreversible}}, "ask"},
		// Not offered, so the gate denies it. (This case used to pass only
		// because ExposedIn reordered the fake source's own slice, hiding
		// the tool from the registry altogether.)
		{"off", core.Policy{ConnectorsOff: []string{"github"}}, "deny"},
		{"default", core.Policy{}, "allow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "github__create_issue", `{}`)), coretest.Text("done"))
			h := newHarness(t, m, nil, platformAdmins(bob.ID), func(cfg *engine.Config) {
				cfg.Tools = cfg.Tools.WithSource(fakeSource{tools: []core.Tool{tool}}, 20)
				cfg.DefaultPolicy = c.pol
			})
			h.deliver(h.mention(alice, "C1", "file it"))
			h.idle()
			pd := payloads[*core.PermissionDecided](h, "C1", core.KindPermissionDecided)
			if c.want == "" {
				done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
				if len(pd) != 0 || len(done) != 1 || done[0].OK || len(ran.get()) != 0 {
					t.Errorf("a tool of a connector turned off ran or was judged: %+v %+v", pd, done)
				}
				return
			}
			if len(pd) != 1 || pd[0].Decision != c.want {
				t.Errorf("permission = %+v, want %s; journal %v", pd, c.want, h.kinds("C1"))
			}
			if c.want == "deny" && len(ran.get()) != 0 {
				t.Errorf("a tool of a connector turned off ran")
			}
		})
	}
}

// find_tool never finds a tool of a server the channel turned off
// (`policy set connector <server> off`): on the old code it searched every
// tool the config offers in the channel, so the model was shown the
// turned-off server's tools and schemas (their calls were then refused).
func TestFindToolRespectsConnectorsTurnedOffInTheChannel(t *testing.T) {
	mk := func(server, name string) core.Tool {
		return core.Tool{Name: server + "__" + name, Description: "create an issue in " + server, Consequence: core.Read,
			Schema: json.RawMessage(`{"type":"object"}`), Connector: &core.ToolOrigin{Server: server, Tool: name},
			Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
				return core.Observation{Text: "ran"}, nil
			}}
	}
	src := fakeSource{tools: []core.Tool{mk("github", "create_issue"), mk("linear", "create_issue")}}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("f1", gate.FindToolName, `{"query":"create issue"}`)), coretest.Text("done"))
	h := newHarness(t, m, nil, platformAdmins(bob.ID), func(cfg *engine.Config) {
		cfg.Tools = cfg.Tools.WithSource(src, 0) // find_tool always
		cfg.DefaultPolicy = core.Policy{ConnectorsOff: []string{"github"}}
	})
	h.deliver(h.mention(alice, "C1", "file it"))
	h.idle()
	done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
	if len(done) != 1 || !done[0].OK {
		t.Fatalf("find_tool: %+v; journal %v", done, h.kinds("C1"))
	}
	if strings.Contains(done[0].Result, "github__") || !strings.Contains(done[0].Result, `"name":"linear__create_issue"`) {
		t.Errorf("find_tool in a channel with github off found: %s", done[0].Result)
	}
}

// A routine (an unattended run) is offered the same connector tools under
// the same gate: its send-level connector call parks for its owner, and
// runs on the owner's approval.
func TestRoutineUsesConnectorsUnderTheSameGate(t *testing.T) {
	log := &toolLog{}
	tool := core.Tool{Name: "slackish__post_update", Description: "Post an update.", Consequence: core.Send,
		Schema:    json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Connector: &core.ToolOrigin{Server: "slackish", Tool: "post_update", Definition: "d1"},
		Run: func(_ context.Context, _ core.ToolContext, args json.RawMessage) (core.Observation, error) {
			log.add(string(args))
			return core.Observation{Text: "posted"}, nil
		}}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "slackish__post_update", `{"text":"weekly digest"}`)),
		coretest.Text("done"))
	h := newHarness(t, m, nil, func(cfg *engine.Config) { cfg.Tools = cfg.Tools.WithSource(fakeSource{tools: []core.Tool{tool}}, 20) })
	if _, err := h.e.StartUnattended(context.Background(), core.UnattendedRun{
		Scope: chanScope("C1"), Owner: alice, Instruction: "post the weekly digest", Trigger: "routine-1",
	}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("the routine's send ran without approval")
	}
	cards := dmCards(h, alice)
	if len(cards) != 1 || !strings.Contains(cards[0].Out.Card.Body, "slackish__post_update") {
		t.Fatalf("owner's cards: %+v", h.s.Cards())
	}
	h.click(alice, token(cards[0].Out.Card, "approve"), dmScope(alice))
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != `{"text":"weekly digest"}` {
		t.Errorf("executions = %v", got)
	}
}
