package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// teammateModel answers the latest user message; it never calls tools.
type teammateModel struct{}

func (teammateModel) Step(_ context.Context, v core.View) (core.Reply, error) {
	for i := len(v.Messages) - 1; i >= 0; i-- {
		m := v.Messages[i]
		if m.Role != core.RoleUser {
			continue
		}
		switch {
		case strings.Contains(m.Text, "deploy"):
			return core.Reply{Text: "The 10:00 deploy finished; all checks green.", Usage: core.Usage{InputTokens: 50, OutputTokens: 10}}, nil
		case strings.Contains(m.Text, "rollback"):
			return core.Reply{Text: "No rollback needed.", Usage: core.Usage{InputTokens: 50, OutputTokens: 5}}, nil
		}
		break
	}
	return core.Reply{Text: "Hello.", Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

// Fake Slack → adapter (Socket Mode) → intent filter → engine (in-memory
// journal, scripted model) → adapter → fake Slack: a mention is acknowledged
// and answered in its thread once (despite app_mention + message), a
// follow-up in the thread window is answered without a mention, chatter
// leaves no trace, and the bot's own echoed posts are ignored.
func TestEndToEndMentionAnsweredInThread(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.EchoPosts = true })
	a, logs := newAdapter(t, testConfig(f, ModeSocket), WithChannelPace(time.Second, 4))

	eng, journal := startEngine(t, a, teammateModel{}, logs)
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("no connection")
	}

	// Chatter: acknowledged, nothing journaled, nothing posted.
	_, chatter := f.Say(chPublic, "", bob, "lunch anyone? the usual place")
	for _, id := range chatter {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatal("chatter not acknowledged")
		}
	}

	// The mention: two deliveries, one message, one threaded answer.
	root, ids := f.Say(chPublic, "", alice, botMention(f)+" how did the deploy go?")
	for _, id := range ids {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("mention delivery %s not acknowledged", id)
		}
	}
	answer := waitPost(t, f, func(p slackfake.Post) bool { return strings.Contains(p.Text, "deploy finished") })
	if answer.ThreadTS != root || answer.Channel != chPublic {
		t.Fatalf("answer in %s thread %q, want thread %s", answer.Channel, answer.ThreadTS, root)
	}

	// A follow-up in the thread, no mention: the thread window routes it.
	// The window opens when the answer is recorded, a moment after Slack
	// shows it (no checklist opened it earlier): a person replies later.
	if err := eng.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.Say(chPublic, root, bob, "any rollback needed?")
	follow := waitPost(t, f, func(p slackfake.Post) bool { return strings.Contains(p.Text, "No rollback") })
	if follow.ThreadTS != root {
		t.Fatalf("follow-up answer thread %q, want %s", follow.ThreadTS, root)
	}

	if err := eng.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // echoes of the bot's posts come back and are ignored
	if n := journal.Count(core.KindMessageReceived); n != 2 {
		t.Fatalf("journaled %d messages, want 2 (mention + follow-up; no chatter, no echoes, no duplicate)", n)
	}
	answers := 0
	seen := map[string]bool{}
	for _, p := range f.Posts() {
		if seen[string(p.Metadata)] {
			t.Fatalf("two posts share an idempotency key: %s", p.Metadata)
		}
		seen[string(p.Metadata)] = true
		if strings.Contains(p.Text, "deploy finished") || strings.Contains(p.Text, "No rollback") {
			answers++
		}
	}
	if answers != 2 {
		t.Fatalf("%d answers posted, want 2: %+v", answers, f.Posts())
	}
	for _, secret := range []string{"lunch", "rollback needed", "how did the deploy"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("message text %q in logs", secret)
		}
	}
}

// startEngine runs a over a real engine (in-memory journal, the real intent
// filter) answering with model.
func startEngine(t *testing.T, a *Adapter, model core.Model, logs *logBuffer) (*engine.Engine, *coretest.MemJournal) {
	t.Helper()
	eng, journal := testengine.Start(t, a, model, logs.logger())
	run(t, a, eng.Deliver) // cleanups run last-in first-out: adapter stops before the engine
	return eng, journal
}

func waitPost(t *testing.T, f *slackfake.Server, match func(slackfake.Post) bool) slackfake.Post {
	t.Helper()
	var got slackfake.Post
	waitUntil(t, 10*time.Second, "the bot's post", func() bool {
		for _, p := range f.Posts() {
			if match(p) {
				got = p
				return true
			}
		}
		return false
	})
	return got
}
