package telegram

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

// Telegram's bot-wide limit (30 a second) counts every Bot API call the
// adapter makes, and a third of it stays free for answers. On a stopped
// clock: 40 decorations in 40 chats (20 go, the rest are dropped, never
// queued), then 20 other calls (getFile, getChatMember,
// getChatAdministrators) which find no slot and wait, then 10 answers in
// 10 chats, which go at once in the kept third, ahead of the waiting
// calls. The fake, stamping calls with the same clock, never counts more
// than 30 in a second; a second later the waiting calls go. The old
// adapter counted only what went through the chats' queues and
// decorations: the 20 other calls went at once and the fake counted 40
// calls in one second (50 with the answers).
func TestTelegramEveryCallCountsBotWide(t *testing.T) {
	clock := pacertest.New()
	f := newFake(t, func(c *telegramfake.Config) { c.Now = clock.Now })
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	a.pacer = newPacer(clock.Now, clock.After, paceConfig{chatInterval: time.Second, chatBurst: 3, groupPerMinute: 20, globalPerSecond: 30}, a.log)
	ctx := t.Context()
	start := clock.Now()

	for i := range 20 {
		if err := a.React(ctx, core.MessageRef{Scope: scope(fmt.Sprint(5000+i), ""), ID: "1"}, "eyes"); err != nil {
			t.Fatal(err)
		}
		if err := a.Typing(ctx, scope(fmt.Sprint(6000+i), "")); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.Reactions()) + len(f.ChatActions()); n != 20 {
		t.Fatalf("%d decorations sent, want 20 (two thirds of 30; the rest dropped)", n)
	}

	// Other calls: none fits in the two thirds left to them.
	file := f.HostFile([]byte("a,b\n"))
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	returned := make(chan struct{}, 20)
	other := func(call func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- call()
			returned <- struct{}{}
		}()
	}
	for i := range 10 {
		other(func() error {
			_, err := a.FetchAttachment(ctx, core.Attachment{ID: fmt.Sprint("f", i), Ref: file}, 1<<20)
			return err
		})
	}
	for i := range 5 {
		other(func() error { _, err := a.IsMember(ctx, fmt.Sprint(-2000-i), "7"); return err })
		other(func() error { _, err := a.IsAdmin(ctx, scope(fmt.Sprint(-3000-i), ""), "7"); return err })
	}
	for parked, done := 0, 0; parked < 20; {
		select {
		case <-returned:
			if done++; done == 20 {
				t.Fatalf("the 20 other calls went at once with the decorations: %d calls in one second at the fake", f.PeakPerSecond())
			}
		case <-time.After(2 * time.Millisecond):
			parked = clock.TimersAt(start.Add(time.Second))
		}
	}

	// Answers go at once, in the third kept for them.
	answered := make(chan error, 1)
	go func() {
		for i := range 10 {
			if _, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("ans-", i), Scope: scope(fmt.Sprint(7000+i), ""), Text: "answer", Priority: core.PriorityHigh}); err != nil {
				answered <- err
				return
			}
		}
		answered <- nil
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("answers waited behind the other calls: %d of 10 sent on a stopped clock", len(f.Sent()))
	}
	if n := len(f.Sent()); n != 10 {
		t.Fatalf("%d answers sent, want 10", n)
	}
	if n := f.PeakPerSecond(); n != 30 {
		t.Fatalf("the fake counted %d calls in one second, want 30 (20 decorations, 10 answers)", n)
	}

	// A second later the waiting calls go, and still no second holds more
	// than 30.
	clock.AdvanceTo(start.Add(time.Second))
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.PeakPerSecond(); n > 30 {
		t.Fatalf("the fake counted %d calls in one second, want at most 30", n)
	}
	if n := len(f.Calls()); n != 50 {
		t.Fatalf("%d calls at the fake, want 50 (20 decorations, 20 others, 10 answers)", n)
	}
	clock.Advance(time.Hour) // the queues run dry and exit
}

// A 429 on a call outside the chats' queues (getFile, getChatMember, a
// callback's answer) is waited out on the pacer's clock and the call sent
// again. It used to fail the call.
func TestTelegramReadsWaitOutRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		method string
		do     func(t *testing.T, a *Adapter, f *telegramfake.Server) error
	}{
		{"getFile", func(t *testing.T, a *Adapter, f *telegramfake.Server) error {
			_, err := a.FetchAttachment(t.Context(), core.Attachment{ID: "f", Ref: f.HostFile([]byte("x"))}, 1<<20)
			return err
		}},
		{"getChatMember", func(t *testing.T, a *Adapter, f *telegramfake.Server) error {
			_, err := a.IsMember(t.Context(), "-2001", "7")
			return err
		}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			clock := pacertest.New()
			f := newFake(t, func(c *telegramfake.Config) { c.Now = clock.Now })
			a, _ := newAdapter(t, testConfig(f, ModePolling))
			a.pacer = newPacer(clock.Now, clock.After, paceConfig{chatInterval: time.Second, chatBurst: 3, groupPerMinute: 20, globalPerSecond: 30}, a.log)
			f.RateLimit(tc.method, 1, 2*time.Second)
			start := clock.Now()
			done := make(chan error, 1)
			go func() { done <- tc.do(t, a, f) }()
			select {
			case err := <-done:
				t.Fatalf("%s returned at once after a 429: %v", tc.method, err)
			case <-clock.Waiting():
			}
			if n := f.CallCount(tc.method); n != 1 {
				t.Fatalf("%d %s calls before retry_after passed, want the one refused", n, tc.method)
			}
			clock.AdvanceTo(start.Add(2 * time.Second))
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := f.CallCount(tc.method); n != 2 {
				t.Fatalf("%d %s calls, want the refused one and its retry", n, tc.method)
			}
		})
	}
}
