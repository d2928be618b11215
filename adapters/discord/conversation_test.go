package discord

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// Fake Discord → adapter → real intent filter → engine → recording model:
// mention → answer (in a thread on the message) → Alice's untagged
// top-level follow-up (the top-level window) → Bob's untagged message in
// the follow-up's thread → Carol's reply (message_reference) to Alice's
// first message. Each model request carries the conversation so far.
func TestConversationContinuesAcrossTopLevelThreadAndReply(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	m := coretest.NewScriptedModel(coretest.Answered)
	var eng atomic.Pointer[engine.Engine]
	a := startAdapter(t, f, func(ctx context.Context, in core.Inbound) error {
		e := eng.Load()
		if e == nil {
			return errors.New("engine not started")
		}
		return e.Deliver(ctx, in)
	})
	e, _ := testengine.Start(t, a, m, nil)
	eng.Store(e)

	mention := "<@" + f.Bot().ID + "> "
	say := func(msg discordfake.Msg, words string) (id string, v core.View) {
		t.Helper()
		n := m.Calls()
		id = f.Say(msg)
		if !f.Wait(10*time.Second, func() bool {
			for _, p := range f.PostsLocked() {
				if p.Content == "answered: "+words {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no answer to %q: %+v", words, f.Posts())
		}
		if err := e.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if m.Calls() != n+1 {
			t.Fatalf("%d model calls for %q, want 1", m.Calls()-n, words)
		}
		return id, m.Views()[n]
	}
	first, _ := say(discordfake.Msg{Channel: general, Author: alice, Content: mention + "the launch moved to Friday, note it"}, "the launch moved to Friday, note it")
	follow, v := say(discordfake.Msg{Channel: general, Author: alice, Content: "and who owns that launch?"}, "and who owns that launch?")
	coretest.WantConversation(t, v, "and who owns that launch?", "the launch moved to Friday, note it", "you (the bot): answered: the launch moved to Friday, note it")

	_, v = say(discordfake.Msg{Channel: follow, Author: bob, Content: "what day was it again?"}, "what day was it again?")
	coretest.WantConversation(t, v, "what day was it again?",
		"the launch moved to Friday, note it", "you (the bot): answered: the launch moved to Friday, note it",
		"and who owns that launch?", "you (the bot): answered: and who owns that launch?")

	_, v = say(discordfake.Msg{Channel: general, Author: carol, ReplyTo: first, Content: mention + "is Friday final?"}, "is Friday final?")
	coretest.WantConversation(t, v, "is Friday final?",
		"the launch moved to Friday, note it", "and who owns that launch?", "what day was it again?", "you (the bot): answered: what day was it again?")
}
