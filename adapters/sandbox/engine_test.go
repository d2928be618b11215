package sandbox

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/llm/scripted"
)

// Texts the scripted model answers with.
const (
	statusAnswer = "Release 1.4 is on track: **12 of 14** issues are closed. Still open: `auth-refresh` (<@bob>, in review) and `export-csv` (<@carol>, not started). The cut is planned for Thursday."
	deployResult = "Deployed release 1.4 to staging"
)

// scriptedTeammate is the model of the end-to-end tests: it answers a
// question, asks to run the (irreversible) deploy tool when asked to
// deploy, and reports the tool's result.
func scriptedTeammate(v core.View) (core.Reply, error) {
	for i := len(v.Messages) - 1; i >= 0; i-- {
		m := v.Messages[i]
		switch m.Role {
		case core.RoleTool:
			if !strings.Contains(m.Text, "4f2c9e1") {
				return core.Reply{Text: "The deploy did not report a build: " + m.Text}, nil
			}
			return core.Reply{Text: deployResult + " ✅ build `4f2c9e1`, all 214 checks green."}, nil
		case core.RoleUser:
			if strings.Contains(strings.ToLower(m.Text), "deploy") {
				return core.Reply{ToolCalls: []core.ToolCall{{ID: "call-deploy", Name: "deploy", Args: `{"release":"1.4","env":"staging"}`}}}, nil
			}
			return core.Reply{Text: statusAnswer}, nil
		case core.RoleAssistant:
		}
	}
	return core.Reply{Text: "Hello."}, nil
}

// engineDeliver wires the real run engine behind the sandbox, as the
// composition root does: an in-memory journal, the intent filter as the
// router (reporting each decision to the sandbox), the filter's windows fed
// by the bot's posts, a scripted model and one irreversible tool.
func engineDeliver(t *testing.T, sb *Sandbox, opts ...func(*engine.Config)) func(context.Context, core.Inbound) error {
	t.Helper()
	return newEngine(t, sb, opts...).Deliver
}

// newEngine is engineDeliver's engine, for tests that wait for it.
func newEngine(t *testing.T, sb *Sandbox, opts ...func(*engine.Config)) *engine.Engine {
	t.Helper()
	filter := intent.NewFilter(intent.NewMemoryStore(nil), nil)
	router := core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
		d, err := filter.Decide(ctx, ev)
		if err != nil {
			return false, "", err
		}
		sb.Decided(ev, d.Route, d.Reason.String())
		return d.Route, d.Reason.String(), nil
	})
	deploy := core.Tool{
		Name:        "deploy",
		Description: "Deploy a release to an environment.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"release":{"type":"string"},"env":{"type":"string"}},"required":["release","env"]}`),
		Consequence: core.Irreversible,
		Targets:     []string{"env"},
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			return core.Observation{Text: "build 4f2c9e1, 214 checks green.", Trust: core.Untrusted}, nil
		},
	}
	tools, err := gate.NewRegistry(deploy)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err = tools.WithDefault("deploy"); err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{
		Journal:      coretest.NewMemJournal(coretest.NewSigner(t)),
		Boundary:     core.NewBoundary(nil),
		Model:        scripted.New().Otherwise(scriptedTeammate),
		Tools:        tools,
		Surfaces:     map[string]core.Surface{Platform: sb},
		Router:       router,
		PostObserver: filter,
		CardKey:      []byte("sandbox-test-card-key-0123456789"),
		Logger:       testLogger(t),
	}
	for _, o := range opts {
		o(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := eng.Start(ctx); err != nil {
		cancel()
		t.Fatalf("start engine: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = eng.Close()
	})
	return eng
}

// TestEngineBehindSandbox runs the conversation of the browser test against
// the real engine through the sandbox's HTTP API (no browser), streamed (the
// default) and with the checklist (NoStream).
func TestEngineBehindSandbox(t *testing.T) {
	t.Run("stream", func(t *testing.T) { engineConversation(t, false) })
	t.Run("checklist", func(t *testing.T) { engineConversation(t, true) })
}

func engineConversation(t *testing.T, noStream bool) {
	sb := newSandbox(t, Config{Clock: time.Now, NoStream: noStream})
	eng := newEngine(t, sb)
	base := run(t, sb, eng.Deliver)

	find := func(cond func(m message) bool) (message, bool) { return findMessage(sb, cond) }
	waitMsg := func(what string, cond func(m message) bool) message {
		t.Helper()
		return waitMessage(t, sb, what, cond)
	}
	decided := func(id, reason string) {
		t.Helper()
		waitMsg(id+" decided "+reason, func(m message) bool { return m.ID == id && m.Decision != nil && m.Decision.Reason == reason })
	}

	q := say(t, base, "alice", "general", "", "<@marlowe> what's the status of release 1.4?")
	decided(q, "mention")
	waitMsg("the acknowledgement", func(m message) bool { return m.ID == q && slices.Contains(m.Reactions, core.AckReaction) })
	answer := waitMsg("the answer", func(m message) bool { return m.Bot && m.Thread == q && strings.Contains(m.Text, "on track") })
	// Bob writes once Alice's run is over: a message while it is live would
	// steer it, and Alice, its requester, could not approve its deploy.
	if err := eng.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := find(func(m message) bool { return m.Bot && m.Thread == q && strings.HasPrefix(m.Text, "⏳") }); ok {
		t.Error("a one-step answer posted a checklist")
	}
	if answer = waitMsg("the answer final", func(m message) bool { return m.ID == answer.ID && m.Text == statusAnswer }); !noStream {
		// Streamed on its own, with no plan to show.
		if a := answer.Stream; a == nil || !a.Stopped || a.Title != "" || len(a.Tasks) != 0 {
			t.Errorf("one-step answer: stream %+v, want a stopped stream with no plan", a)
		}
	} else if answer.Stream != nil {
		t.Errorf("NoStream: the answer is a stream %+v", answer.Stream)
	}

	f := say(t, base, "bob", "general", q, "Great, thanks! Can you deploy it to staging?")
	decided(f, "thread-window")
	card := waitMsg("an approval card", func(m message) bool {
		return m.Bot && m.Thread == q && m.Card != nil && len(m.Card.Actions) > 0
	})
	var plan message
	if !noStream {
		// The run's plan waits with it: the deploy is its task, in progress.
		plan = waitMsg("the deploy's plan waiting", func(m message) bool {
			return m.Bot && m.Thread == q && m.Stream != nil && strings.HasPrefix(m.Stream.Title, "🔐 Waiting for approval") &&
				len(m.Stream.Tasks) == 1 && m.Stream.Tasks[0].Title == "deploy" && m.Stream.Tasks[0].Status == core.TaskInProgress
		})
		if plan.Stream.Stopped || plan.Text != "" || plan.Card != nil || card.Stream != nil {
			t.Errorf("waiting plan %q %+v; card %+v: want an open plan with no text, and the card a card", plan.Text, plan.Stream, card.Stream)
		}
	}

	c := say(t, base, "bob", "general", "", "Anyone up for lunch at noon?")
	decided(c, "no-window")

	if code, body := postJSON(t, base+"/api/click", map[string]string{"person": "alice", "message": card.ID, "action": "approve"}); code != 202 {
		t.Fatalf("click: %d %s", code, body)
	}
	waitMsg("the card resolved", func(m message) bool { return m.ID == card.ID && m.Card != nil && m.Card.Resolution != "" })
	result := waitMsg("the result", func(m message) bool { return m.Bot && m.Thread == q && strings.Contains(m.Text, deployResult) })
	if noStream {
		// The deploy did tool work: its checklist, edited in place, ends done.
		waitMsg("the deploy's checklist done", func(m message) bool { return m.Bot && m.Thread == q && strings.HasPrefix(m.Text, "✅ Done") })
	} else {
		// The answer streamed into the plan's own message, which ends done.
		if result.ID != plan.ID {
			t.Errorf("the result is message %s, not the plan's %s", result.ID, plan.ID)
		}
		done := waitMsg("the plan done", func(m message) bool { return m.ID == plan.ID && m.Stream != nil && m.Stream.Stopped })
		if done.Stream.Title != "✅ Done" || len(done.Stream.Tasks) != 1 || done.Stream.Tasks[0].Status != core.TaskComplete || !strings.HasPrefix(done.Text, deployResult) {
			t.Errorf("finished plan: %q %+v", done.Text, done.Stream)
		}
		if _, ok := find(func(m message) bool {
			return m.Bot && m.Thread == q && (strings.HasPrefix(m.Text, "⏳") || strings.HasPrefix(m.Text, "✅ Done"))
		}); ok {
			t.Error("a streamed run also posted a checklist")
		}
	}
	if _, ok := find(func(m message) bool { return m.Thread == c || (m.ID == c && len(m.Reactions) > 0) }); ok {
		t.Error("the bot reacted to or answered bob's chatter")
	}
}
