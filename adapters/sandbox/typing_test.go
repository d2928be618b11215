package sandbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// TestTypingIndicator: Typing is sent to pages as a "typing" event naming
// the conversation and how long it lasts; the bot's next new message there
// clears it; a page connecting with no indicator showing gets no typing
// event at all.
func TestTypingIndicator(t *testing.T) {
	ctx := context.Background()
	s := newSandbox(t, Config{})
	base := run(t, s, newRecorder().deliver)
	root := botPost(t, s, "root", "general", "", "root")
	events, _ := stream(t, base, "")
	if ev := nextSSE(t, events); ev.Event != "hello" {
		t.Fatalf("first event %q", ev.Event)
	}
	if ev := nextSSE(t, events); ev.Event != "message" {
		t.Fatalf("with no indicator, the page got %q before the root message", ev.Event)
	}
	nextTyping := func() []typingView {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			ev := nextSSE(t, events)
			if ev.Event != "typing" {
				continue
			}
			var v []typingView
			if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		t.Fatal("no typing event")
		return nil
	}
	if err := s.Typing(ctx, streamScope(root.ID)); err != nil {
		t.Fatal(err)
	}
	v := nextTyping()
	if len(v) != 1 || v[0].Channel != "general" || v[0].Thread != root.ID || v[0].MS <= 0 || v[0].MS > typingLasts.Milliseconds() {
		t.Fatalf("typing = %+v", v)
	}
	botPost(t, s, "answer", "general", root.ID, "the answer")
	if v := nextTyping(); len(v) != 0 {
		t.Fatalf("after the bot's post, typing = %+v, want none", v)
	}
	// A streamed answer ends the indicator when it stops, not 6 s later
	// (the plan was posted first; the model then works under it).
	ref, err := s.StartStream(ctx, core.Outbound{Key: "plan", Scope: streamScope(root.ID)}, core.StreamUpdate{Title: "Working"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Typing(ctx, streamScope(root.ID)); err != nil {
		t.Fatal(err)
	}
	if v := nextTyping(); len(v) != 1 {
		t.Fatalf("typing = %+v", v)
	}
	if err := s.StopStream(ctx, ref, core.StreamUpdate{Title: "Done", Text: "the streamed answer"}); err != nil {
		t.Fatal(err)
	}
	if v := nextTyping(); len(v) != 0 {
		t.Fatalf("after the stream stopped, typing = %+v, want none", v)
	}
	if err := s.Typing(ctx, streamScope("")); err != nil {
		t.Fatal(err)
	}
	if v := nextTyping(); len(v) != 1 || v[0].Thread != "" {
		t.Fatalf("top-level typing = %+v", v)
	}
	if err := s.Typing(ctx, streamScope("no-such-root")); err == nil {
		t.Error("typing in a thread that does not exist")
	}
	if s.TypingEvery() >= typingLasts {
		t.Errorf("TypingEvery %v is not shorter than the indicator lasts (%v)", s.TypingEvery(), typingLasts)
	}
}
