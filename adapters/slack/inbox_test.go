package slack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
)

const (
	carol = "U0CAROL001"
	dmBob = "D0BOB00001" // the fake's conversations.open for bob
)

// deployModel asks for the irreversible deploy tool when told to deploy and
// reports the tool's result.
type deployModel struct{}

func (deployModel) Step(_ context.Context, v core.View) (core.Reply, error) {
	last := v.Messages[len(v.Messages)-1]
	if last.Role == core.RoleTool {
		return core.Reply{Text: "Deploy finished: " + last.Text, Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
	if strings.Contains(last.Text, "deploy") {
		return core.Reply{ToolCalls: []core.ToolCall{{ID: "d1", Name: "deploy", Args: `{"env":"staging"}`}}, Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
	return core.Reply{Text: "Hello.", Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

// inboxEngine runs the engine over a with an irreversible deploy tool and
// Bob and Carol as the channels' approvers; opening the App Home tab
// publishes the inbox. It returns the number of deploys run so far.
func inboxEngine(t *testing.T, f *slackfake.Server, a *Adapter, logs *logBuffer) func() int {
	t.Helper()
	ran := make(chan struct{}, 10)
	deploy := core.Tool{
		Name: "deploy", Description: "deploy", Consequence: core.Irreversible, Targets: []string{"env"},
		Schema: json.RawMessage(`{"type":"object","properties":{"env":{"type":"string"}},"required":["env"]}`),
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			ran <- struct{}{}
			return core.Observation{Text: "build 4f2c9e1 live", Trust: core.Trusted}, nil
		},
	}
	tools, err := gate.NewRegistry(deploy)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err = tools.WithDefault("deploy"); err != nil {
		t.Fatal(err)
	}
	filter := intent.NewFilter(intent.NewMemoryStore(nil), nil)
	eng, err := engine.New(engine.Config{
		Journal:  coretest.NewMemJournal(coretest.NewSigner(t)),
		Boundary: core.NewBoundary(nil),
		Model:    deployModel{},
		Tools:    tools,
		Surfaces: map[string]core.Surface{Platform: a},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			d, err := filter.Decide(ctx, ev)
			return d.Route, d.Reason.String(), err
		}),
		PostObserver:  filter,
		CardKey:       []byte("slack-inbox-test-card-key-0123456789"),
		Logger:        logs.logger(),
		DefaultPolicy: core.Policy{Approvers: []string{bob, carol}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.SetHomeOpened(func(ctx context.Context, user string) error { return eng.PublishHome(ctx, Platform, user) })
	ectx, ecancel := context.WithCancel(context.Background())
	if err := eng.Start(ectx); err != nil {
		t.Fatal(err)
	}
	run(t, a, eng.Deliver)
	t.Cleanup(func() {
		ecancel()
		_ = eng.Close()
	})
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("no connection")
	}
	return func() int { return len(ran) }
}

// buttons returns action id → token of the buttons in a message's blocks.
func buttons(t *testing.T, blocks json.RawMessage) map[string]string {
	t.Helper()
	var bs []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(blocks, &bs); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	out := map[string]string{}
	for _, b := range bs {
		if b.Type == "actions" {
			for _, e := range b.Elements {
				out[e.ActionID] = e.Value
			}
		}
	}
	return out
}

// cards waits for the approval card in the thread and in Bob's DM.
func cards(t *testing.T, f *slackfake.Server) (thread, dm slackfake.Post) {
	t.Helper()
	thread = waitPost(t, f, func(p slackfake.Post) bool {
		return p.Channel == chPublic && strings.Contains(string(p.Blocks), `"approve"`)
	})
	dm = waitPost(t, f, func(p slackfake.Post) bool {
		return p.Channel == dmBob && strings.Contains(string(p.Blocks), `"approve"`)
	})
	return thread, dm
}

func waitDecided(t *testing.T, f *slackfake.Server, p slackfake.Post, want string) {
	t.Helper()
	waitUntil(t, 10*time.Second, "the card in "+p.Channel+" showing "+want, func() bool {
		m, ok := f.Message(p.Channel, p.TS)
		return ok && strings.Contains(string(m.Blocks), want) && !strings.Contains(string(m.Blocks), `"action_id":"approve"`)
	})
}

// An approval reaches the approver's DM; Bob decides there; the thread card
// and his DM card both show the decision. The App Home tab shows the item
// while it waits (published on change and when opened) and empties after.
func TestSlackApprovalDecidedFromTheDMInbox(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	deploys := inboxEngine(t, f, a, logs)

	root, ids := f.Say(chPublic, "", alice, botMention(f)+" deploy to staging")
	ackAll(t, f, ids)
	thread, dm := cards(t, f)
	if thread.ThreadTS != root || dm.ThreadTS != "" {
		t.Fatalf("thread card in %q, DM card in %q", thread.ThreadTS, dm.ThreadTS)
	}
	if !strings.Contains(string(dm.Blocks), "Where") || !strings.Contains(string(dm.Blocks), `\u003c#`+chPublic) {
		t.Errorf("the DM card does not say where: %s", dm.Blocks)
	}
	homeWith := func(user string) int {
		n := 0
		for _, v := range f.HomeViews() {
			if v.User == user && strings.Contains(string(v.View), "Approval needed: deploy") {
				n++
			}
		}
		return n
	}
	// Both approvers' tabs are published when the approval appears; wait for
	// both so the count below sees only what opening the tab publishes.
	waitUntil(t, 5*time.Second, "Bob's and Carol's Home tabs with the item", func() bool {
		return homeWith(bob) > 0 && homeWith(carol) > 0
	})

	// Opening the Home tab publishes it too.
	before := homeWith(carol)
	ackAll(t, f, []string{f.PushEvent(f.AppHomeOpenedEvent(carol, "home"))})
	waitUntil(t, 5*time.Second, "Carol's Home tab republished on app_home_opened", func() bool {
		return homeWith(carol) > before
	})

	tok := buttons(t, dm.Blocks)["approve"]
	if tok == "" || tok != buttons(t, thread.Blocks)["approve"] {
		t.Fatalf("the DM card's approve token %q differs from the thread card's", tok)
	}
	id := f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: dmBob, MessageTS: dm.TS, User: bob, UserName: "bob",
		BlockID: dm.TS, ActionID: "approve", Value: tok, Label: "Approve",
	}))
	ackAll(t, f, []string{id})
	waitDecided(t, f, thread, "Approved by")
	waitDecided(t, f, dm, "Approved by")
	waitPost(t, f, func(p slackfake.Post) bool {
		return p.Channel == chPublic && strings.Contains(p.Text, "Deploy finished")
	})
	if n := deploys(); n != 1 {
		t.Errorf("deploys = %d", n)
	}
	waitUntil(t, 5*time.Second, "Bob's Home tab emptied", func() bool {
		hv := f.HomeViews()
		for i := len(hv) - 1; i >= 0; i-- {
			if hv[i].User == bob {
				return strings.Contains(string(hv[i].View), "Nothing waits for you")
			}
		}
		return false
	})
}

// Decided in the thread: the DM card is updated in place; a click on the
// stale DM rendering is refused as already decided, in the DM.
func TestSlackThreadDecisionUpdatesTheDMCard(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	deploys := inboxEngine(t, f, a, logs)

	root, ids := f.Say(chPublic, "", alice, botMention(f)+" deploy to staging")
	ackAll(t, f, ids)
	thread, dm := cards(t, f)
	tok := buttons(t, thread.Blocks)["decline"]
	ackAll(t, f, []string{f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: chPublic, MessageTS: thread.TS, ThreadTS: root, User: carol, UserName: "carol",
		BlockID: thread.TS, ActionID: "decline", Value: tok, Label: "Decline",
	}))})
	waitDecided(t, f, dm, "Declined by")
	ackAll(t, f, []string{f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: dmBob, MessageTS: dm.TS, User: bob, UserName: "bob",
		BlockID: dm.TS, ActionID: "approve", Value: buttons(t, dm.Blocks)["approve"], Label: "Approve",
	}))})
	waitPost(t, f, func(p slackfake.Post) bool { return p.Channel == dmBob && strings.Contains(p.Text, "already decided") })
	if n := deploys(); n != 0 {
		t.Errorf("deploys = %d after a decline", n)
	}
}
