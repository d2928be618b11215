package telegram

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
)

// echoModel answers "re: <the latest user message>".
type echoModel struct{}

func (echoModel) Step(_ context.Context, v core.View) (core.Reply, error) {
	for i := len(v.Messages) - 1; i >= 0; i-- {
		if v.Messages[i].Role == core.RoleUser {
			return core.Reply{Text: "re: " + v.Messages[i].Text, Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}, nil
		}
	}
	return core.Reply{Text: "hello", Usage: core.Usage{InputTokens: 1, OutputTokens: 1}}, nil
}

// Fake Bot API → adapter (polling) → intent filter → engine (in-memory
// journal) → adapter → fake. A crash between receiving and journaling is
// redelivered to the next process and answered once; a crash between
// journaling and confirming the offset is redelivered and still answered
// once (the engine recognises the message id).
func TestEndToEndCrashesAnsweredOnce(t *testing.T) {
	f := newFake(t)

	// Process 1 dies while delivering: nothing journaled, nothing confirmed.
	a1, _ := newAdapter(t, testConfig(f, ModePolling))
	entered := make(chan struct{})
	rec1 := newRecorder()
	rec1.hook = func(ctx context.Context, _ int, _ core.Inbound) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	}
	stop1 := run(t, a1, rec1.deliver)
	_, m1 := f.Inject(telegramfake.Incoming{Chat: forum, Topic: 42, From: alice, Text: "@marlowe_test_bot first question"})
	<-entered
	stop1()

	// Process 2: a fresh adapter and engine over the journal.
	a2, logs := newAdapter(t, testConfig(f, ModePolling))
	filter := intent.NewFilter(intent.NewMemoryStore(nil), nil)
	journal := coretest.NewMemJournal(coretest.NewSigner(t))
	eng, err := engine.New(engine.Config{
		Journal:  journal,
		Boundary: core.NewBoundary(nil),
		Model:    echoModel{},
		Surfaces: map[string]core.Surface{Platform: a2},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			d, err := filter.Decide(ctx, ev)
			return d.Route, d.Reason.String(), err
		}),
		PostObserver: filter,
		CardKey:      []byte("telegram-e2e-test-card-key-0123456789"),
		Logger:       logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(context.Background())
	if err := eng.Start(ectx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ecancel(); _ = eng.Close() })

	// The second message's first delivery is journaled, then "crashes"
	// before its offset is confirmed: the poller fetches it again.
	var crashed atomic.Bool
	deliver := func(ctx context.Context, in core.Inbound) error {
		err := eng.Deliver(ctx, in)
		if err == nil && in.Event != nil && strings.Contains(in.Event.Text, "second") && !crashed.Swap(true) {
			return errors.New("crash after journaling")
		}
		return err
	}
	run(t, a2, deliver)
	awaitFake(t, f, "the first answer", func() bool { return countText(f, "first question") == 1 })
	_, m2 := f.Inject(telegramfake.Incoming{Chat: forum, Topic: 42, From: alice, Text: "@marlowe_test_bot second question"})
	awaitFake(t, f, "the second answer", func() bool { return countText(f, "second question") == 1 })
	awaitFake(t, f, "all confirmed", func() bool { return len(f.Pending()) == 0 })
	if err := eng.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !crashed.Load() {
		t.Fatal("setup: the second delivery never crashed")
	}
	for _, s := range f.Sent() {
		if s.Topic != 42 {
			t.Fatalf("answer left the topic: %+v", s)
		}
	}
	for _, tc := range []struct {
		text  string
		reply int64
	}{{"first question", m1}, {"second question", m2}} {
		if n := countText(f, tc.text); n != 1 {
			t.Fatalf("%q sent %d times, want once", tc.text, n)
		}
		for _, s := range f.Sent() {
			if strings.HasPrefix(s.Text, "re: ") && strings.Contains(s.Text, tc.text) && s.ReplyTo != tc.reply {
				t.Fatalf("%q replies to %d, want %d", tc.text, s.ReplyTo, tc.reply)
			}
		}
	}
	if n := journal.Count(core.KindMessageReceived); n != 2 {
		t.Fatalf("journaled %d messages, want 2", n)
	}
	if strings.Contains(logs.String(), "first question") {
		t.Fatal("message text in the logs")
	}
}

// countText counts the bot's answers (the model's "re: ...") containing text.
func countText(f *telegramfake.Server, text string) int {
	n := 0
	for _, s := range f.Sent() {
		if !strings.HasPrefix(s.Text, "re: ") {
			continue
		}
		if strings.Contains(s.Text, text) {
			n++
		}
	}
	return n
}
