package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// Fake Slack → adapter → real intent filter → engine → recording model:
// mention → answer (in its thread) → Alice's untagged top-level follow-up
// (the top-level window) → Bob's untagged reply in the first thread. The
// follow-up's model request carries the first exchange; the thread reply's
// carries all four turns, oldest first.
func TestConversationContinuesAcrossTopLevelAndThread(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	m := coretest.NewScriptedModel(coretest.Answered)
	eng, _ := startEngine(t, a, m, logs)
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("no connection")
	}
	say := func(thread, user, text string) string {
		t.Helper()
		ts, _ := f.Say(chPublic, thread, user, text)
		waitPost(t, f, func(p slackfake.Post) bool {
			return strings.Contains(p.Text, "answered: "+strings.TrimSpace(strings.TrimPrefix(text, botMention(f))))
		})
		if err := eng.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	root := say("", alice, botMention(f)+" the launch moved to Friday, note it")
	say("", alice, "and who owns that launch?")
	views := m.Views()
	if len(views) != 2 {
		t.Fatalf("%d model calls, want 2", len(views))
	}
	coretest.WantConversation(t, views[1], "and who owns that launch?",
		"the launch moved to Friday, note it", "you (the bot): answered: the launch moved to Friday, note it")

	say(root, bob, "what day was it again?")
	views = m.Views()
	coretest.WantConversation(t, views[2], "what day was it again?",
		"the launch moved to Friday, note it", "you (the bot): answered: the launch moved to Friday, note it",
		"and who owns that launch?", "you (the bot): answered: and who owns that launch?")
}
