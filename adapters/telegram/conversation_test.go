package telegram

import (
	"context"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// Fake Bot API → adapter (polling) → real intent filter → engine →
// recording model, in a forum topic: mention → answer (a reply to it) →
// Alice's untagged top-level follow-up (the top-level window) → Bob's
// reply to Marlowe's first answer. Telegram has no threads: the reply chain
// and the window are what make it one conversation, and each model request
// carries the turns so far. Every answer is a reply, in the same topic.
func TestConversationContinuesAcrossFollowUpAndReplyChain(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModePolling))
	m := coretest.NewScriptedModel(coretest.Answered)
	eng, _ := testengine.Start(t, a, m, logs.logger())
	run(t, a, eng.Deliver)

	// say injects a message and waits for its answer: a reply to it in
	// topic 42. It returns the answer and the model request it came from.
	say := func(in telegramfake.Incoming, words string) (telegramfake.Sent, core.View) {
		t.Helper()
		n := m.Calls()
		in.Chat, in.Topic = forum, 42
		_, id := f.Inject(in)
		var ans telegramfake.Sent
		awaitFake(t, f, "the answer to "+words, func() bool {
			for _, s := range f.Sent() {
				if s.Text == "answered: "+words {
					ans = s
					return true
				}
			}
			return false
		})
		if err := eng.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ans.ReplyTo != id || ans.Topic != 42 {
			t.Fatalf("the answer to %q replies to %d in topic %d, want a reply to %d in topic 42", words, ans.ReplyTo, ans.Topic, id)
		}
		if m.Calls() != n+1 {
			t.Fatalf("%d model calls for %q, want 1", m.Calls()-n, words)
		}
		return ans, m.Views()[n]
	}
	first, v := say(telegramfake.Incoming{From: alice, Text: "@marlowe_test_bot the launch moved to Friday, note it"}, "the launch moved to Friday, note it")
	if hist := coretest.ConversationOf(v); hist != "" {
		t.Fatalf("the first mention got a conversation:\n%s", hist)
	}
	_, v = say(telegramfake.Incoming{From: alice, Text: "and who owns that launch?"}, "and who owns that launch?")
	coretest.WantConversation(t, v, "and who owns that launch?",
		"(<@501>): the launch moved to Friday, note it", "you (the bot): answered: the launch moved to Friday, note it")

	_, v = say(telegramfake.Incoming{From: bob, ReplyTo: first.MessageID, Text: "is Friday final?"}, "is Friday final?")
	coretest.WantConversation(t, v, "is Friday final?",
		"(<@501>): the launch moved to Friday, note it", "you (the bot): answered: the launch moved to Friday, note it",
		"(<@501>): and who owns that launch?", "you (the bot): answered: and who owns that launch?")
}
