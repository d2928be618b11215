package discord

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// TestTypingInChannelOrThread: "is typing…" goes to the thread channel
// when the scope's thread exists, else to the channel the thread will be
// started in.
func TestTypingInChannelOrThread(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a := startAdapter(t, f, newRecorder().deliver)
	ctx := context.Background()
	for _, sc := range []core.Scope{
		{Platform: Platform, Workspace: guildID, Channel: general},
		{Platform: Platform, Workspace: guildID, Channel: general, Thread: oldThread},
		{Platform: Platform, Workspace: guildID, Channel: ops, Thread: "300000000000000099"}, // no thread yet
	} {
		if err := a.Typing(ctx, sc); err != nil {
			t.Fatalf("Typing(%+v): %v", sc, err)
		}
	}
	var got []string
	for _, ty := range f.Typings() {
		got = append(got, ty.ChannelID)
	}
	if want := []string{general, oldThread, ops}; !slices.Equal(got, want) {
		t.Errorf("typing in %q, want %q", got, want)
	}
	if a.TypingEvery() <= 0 || a.TypingEvery() >= 10*time.Second {
		t.Errorf("TypingEvery %s: Discord's indicator lasts 10 s, so it must be triggered again sooner", a.TypingEvery())
	}
}

// TestTypingWhileARunWorks, end to end: a mention in a thread, a model
// call that lasts until Discord shows "is typing…" in that thread, then
// the answer there; no typing is triggered after the answer.
func TestTypingWhileARunWorks(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	m := coretest.NewScriptedModel(coretest.Text("all green"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if !f.Wait(5*time.Second, func() bool { return len(f.TypingsLocked()) > 0 }) {
			t.Error("no typing while the model worked")
		}
	}
	var eng atomic.Pointer[engine.Engine]
	a := startAdapter(t, f, func(ctx context.Context, in core.Inbound) error {
		if e := eng.Load(); e != nil {
			return e.Deliver(ctx, in)
		}
		return errors.New("engine not started")
	})
	e, _ := testengine.Start(t, a, m, nil)
	eng.Store(e)
	f.Say(discordfake.Msg{Channel: oldThread, Author: alice, Content: "<@" + f.Bot().ID + "> how is the build?"})
	var answered time.Time
	if !f.Wait(10*time.Second, func() bool {
		for _, p := range f.PostsLocked() {
			if p.Content == "all green" {
				answered = p.At
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no answer: %+v", f.Posts())
	}
	if err := e.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	ty := f.Typings()
	if len(ty) == 0 || ty[0].ChannelID != oldThread {
		t.Fatalf("typings %+v, want one in the thread %s", ty, oldThread)
	}
	if last := ty[len(ty)-1].At; last.After(answered) {
		t.Errorf("typing at %s, after the answer at %s", last, answered)
	}
}
