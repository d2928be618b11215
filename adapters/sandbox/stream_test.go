package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

func streamScope(thread string) core.Scope {
	return core.Scope{Platform: Platform, Workspace: Workspace, Channel: "general", Thread: thread}
}

func working(text string, tasks ...core.StreamTask) core.StreamUpdate {
	return core.StreamUpdate{Title: "⏳ Working on it…", Tasks: tasks, Text: text}
}

func msgOf(t *testing.T, s *Sandbox, id string) message {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	if !ok {
		t.Fatalf("message %s is gone", id)
	}
	return *m
}

func botMessages(s *Sandbox) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		if m.Bot {
			n++
		}
	}
	return n
}

// TestStreamerSemantics pins core.Streamer on the sandbox: a start keyed
// like a post, text that only grows while streaming, a stop that ends on
// exactly the final text, a second stop that is no error, and more text
// after the stop refused with core.ErrStreamEnded.
func TestStreamerSemantics(t *testing.T) {
	ctx := context.Background()
	s := newSandbox(t, Config{})
	root := botPost(t, s, "root", "general", "", "a root to reply under")
	if !s.Streams(ctx, streamScope(root.ID)) {
		t.Fatal("the sandbox does not stream in a thread by default")
	}
	if s.Streams(ctx, streamScope("")) {
		t.Error("the sandbox streams at top level (Slack streams only in threads)")
	}

	deploy := core.StreamTask{ID: "call-1", Title: "deploy", Status: core.TaskInProgress}
	ref, err := s.StartStream(ctx, core.Outbound{Key: "run1:checklist", Scope: streamScope(root.ID)}, working("", deploy))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.StartStream(ctx, core.Outbound{Key: "run1:checklist", Scope: streamScope(root.ID), Resumed: true}, working(""))
	if err != nil || again.ID != ref.ID {
		t.Fatalf("second start with the same key: %v, %v; want %s", again, err, ref.ID)
	}
	if p, err := s.Post(ctx, core.Outbound{Key: "run1:checklist", Scope: streamScope(root.ID), Text: "x"}); err != nil || p.ID != ref.ID {
		t.Fatalf("a post with the stream's key: %v, %v; want the stream %s", p, err, ref.ID)
	}
	if n := botMessages(s); n != 2 {
		t.Fatalf("%d bot messages, want the root and one stream", n)
	}
	m := msgOf(t, s, ref.ID)
	if m.Stream == nil || m.Stream.Title != "⏳ Working on it…" || len(m.Stream.Tasks) != 1 || m.Stream.Tasks[0].Status != core.TaskInProgress || m.Stream.Stopped {
		t.Fatalf("started stream: %+v", m.Stream)
	}

	// read_thread (History) sees no empty message for a stream with no text.
	if h, err := s.History(ctx, streamScope(root.ID), 0); err != nil || len(h) != 1 || h[0].MessageID != root.ID {
		t.Fatalf("history with an empty stream: %+v, %v; want the root alone", h, err)
	}
	done := core.StreamTask{ID: "call-1", Title: "deploy", Status: core.TaskComplete}
	for _, text := range []string{"Deployed", "Deployed release", "Deployed release 1.4"} {
		if err := s.AppendStream(ctx, ref, working(text, done)); err != nil {
			t.Fatal(err)
		}
	}
	// Repeating an update (a resumed run) and a shorter text change nothing.
	rev := msgOf(t, s, ref.ID).Rev
	for _, text := range []string{"Deployed release 1.4", "Deployed", ""} {
		if err := s.AppendStream(ctx, ref, working(text, done)); err != nil {
			t.Fatal(err)
		}
	}
	if m := msgOf(t, s, ref.ID); m.Text != "Deployed release 1.4" || m.Rev != rev {
		t.Fatalf("after repeats: %q rev %d, want the text unchanged at rev %d", m.Text, m.Rev, rev)
	}
	if h, err := s.History(ctx, streamScope(root.ID), 0); err != nil || len(h) != 2 || h[1].Text != "Deployed release 1.4" {
		t.Fatalf("history with a streamed text: %+v, %v", h, err)
	}
	// A text that does not extend the message appends nothing.
	if err := s.AppendStream(ctx, ref, working("Rolled back release 1.4 entirely", done)); err != nil {
		t.Fatal(err)
	}
	if m := msgOf(t, s, ref.ID); m.Text != "Deployed release 1.4" {
		t.Fatalf("a divergent append changed the text to %q", m.Text)
	}

	final := "Deployed release 1.4 to staging ✅"
	if err := s.StopStream(ctx, ref, core.StreamUpdate{Title: "✅ Done", Tasks: []core.StreamTask{done}, Text: "Deployed 1.4: " + final}); err != nil {
		t.Fatal(err)
	}
	m = msgOf(t, s, ref.ID)
	if m.Text != "Deployed 1.4: "+final || !m.Stream.Stopped || m.Stream.Title != "✅ Done" || m.Stream.Tasks[0].Status != core.TaskComplete {
		t.Fatalf("stopped stream: %q %+v; want exactly the final text, stopped, done", m.Text, m.Stream)
	}
	if err := s.StopStream(ctx, ref, core.StreamUpdate{Title: "❌ Failed", Text: "something else"}); err != nil {
		t.Fatalf("stopping a stopped stream: %v", err)
	}
	if got := msgOf(t, s, ref.ID); got.Text != m.Text || got.Stream.Title != "✅ Done" || got.Rev != m.Rev {
		t.Fatalf("a second stop changed the message: %q %+v", got.Text, got.Stream)
	}
	if err := s.AppendStream(ctx, ref, working(m.Text+" and more")); !errors.Is(err, core.ErrStreamEnded) {
		t.Fatalf("more text after the stop: %v, want core.ErrStreamEnded", err)
	}
	if err := s.AppendStream(ctx, ref, working(m.Text)); err != nil {
		t.Fatalf("repeating the final text after the stop: %v", err)
	}
	if err := s.AppendStream(ctx, core.MessageRef{ID: root.ID}, working("more")); !errors.Is(err, core.ErrStreamEnded) {
		t.Fatalf("appending to a message that is not a stream: %v, want core.ErrStreamEnded", err)
	}
	if err := s.AppendStream(ctx, core.MessageRef{ID: "1.000001"}, working("x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("appending to no message: %v", err)
	}

	// A plan-only stop (a failed run) keeps what was streamed.
	ref2, err := s.StartStream(ctx, core.Outbound{Key: "run2:checklist", Scope: streamScope(root.ID)}, working(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendStream(ctx, ref2, working("Half an ans")); err != nil {
		t.Fatal(err)
	}
	if err := s.StopStream(ctx, ref2, core.StreamUpdate{Title: "❌ Failed — model unavailable", Tasks: []core.StreamTask{{ID: "t", Title: "read thread", Status: core.TaskError, Output: "timeout"}}}); err != nil {
		t.Fatal(err)
	}
	if m := msgOf(t, s, ref2.ID); m.Text != "Half an ans" || m.Stream.Title != "❌ Failed — model unavailable" || m.Stream.Tasks[0].Status != core.TaskError {
		t.Fatalf("failed stream: %q %+v", m.Text, m.Stream)
	}
	if _, err := s.StartStream(ctx, core.Outbound{Scope: streamScope(root.ID)}, working("")); err == nil {
		t.Error("a stream without a key started")
	}
	if _, err := s.StartStream(ctx, core.Outbound{Key: "k", Scope: core.Scope{Platform: Platform, Channel: "nowhere"}}, working("")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a stream in no channel: %v", err)
	}
	if off := newSandbox(t, Config{NoStream: true}); off.Streams(ctx, streamScope(root.ID)) {
		t.Error("NoStream still streams")
	}
}

// TestStreamSurvivesRestart: a stream started and appended to, then the
// process stops before StopStream; the next sandbox on the same data file
// finds it by its key (no second message), appends the rest and stops it.
func TestStreamSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "sandbox.jsonl")
	s1 := newSandbox(t, Config{DataFile: file})
	root := botPost(t, s1, "root", "general", "", "root")
	out := core.Outbound{Key: "run1:checklist", Scope: streamScope(root.ID)}
	ref, err := s1.StartStream(ctx, out, working("", core.StreamTask{ID: "a", Title: "read thread", Status: core.TaskInProgress}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.AppendStream(ctx, ref, working("The code is", core.StreamTask{ID: "a", Title: "read thread", Status: core.TaskComplete})); err != nil {
		t.Fatal(err)
	}

	s2 := newSandbox(t, Config{DataFile: file})
	out.Resumed = true
	ref2, err := s2.StartStream(ctx, out, working(""))
	if err != nil || ref2.ID != ref.ID {
		t.Fatalf("resumed start: %v, %v; want the stream %s", ref2, err, ref.ID)
	}
	m := msgOf(t, s2, ref.ID)
	if m.Text != "The code is" || m.Stream == nil || m.Stream.Stopped || len(m.Stream.Tasks) != 1 || m.Stream.Tasks[0].Status != core.TaskComplete {
		t.Fatalf("after restart: %q %+v", m.Text, m.Stream)
	}
	u := core.StreamUpdate{Title: "✅ Done", Text: "The code is 42.", Resumed: true}
	if err := s2.AppendStream(ctx, ref2, u); err != nil {
		t.Fatal(err)
	}
	if err := s2.StopStream(ctx, ref2, u); err != nil {
		t.Fatal(err)
	}
	if n := botMessages(s2); n != 2 {
		t.Fatalf("%d bot messages after the restart, want the root and one stream", n)
	}

	s3 := newSandbox(t, Config{DataFile: file})
	if m := msgOf(t, s3, ref.ID); m.Text != "The code is 42." || !m.Stream.Stopped {
		t.Fatalf("the stop did not survive a restart: %q %+v", m.Text, m.Stream)
	}
	if err := s3.StopStream(ctx, ref, u); err != nil {
		t.Fatalf("stopping the stopped stream after a restart: %v", err)
	}
	if err := s3.AppendStream(ctx, ref, core.StreamUpdate{Text: "The code is 42. Also 43."}); !errors.Is(err, core.ErrStreamEnded) {
		t.Fatalf("more text after a restart: %v, want core.ErrStreamEnded", err)
	}
}

// TestStreamDataFileStaysBounded: an answer streamed piece by piece
// appends its whole text so far at every piece; the data file is compacted
// as it runs, so it stays near the size of what it holds.
func TestStreamDataFileStaysBounded(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "sandbox.jsonl")
	s := newSandbox(t, Config{DataFile: file})
	root := botPost(t, s, "root", "general", "", "root")
	ref, err := s.StartStream(ctx, core.Outbound{Key: "long", Scope: streamScope(root.ID)}, working(""))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for range 3000 {
		text.WriteString("word ")
		if err := s.AppendStream(ctx, ref, working(text.String())); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// Uncompacted, the file would hold 3000 revisions, ~22 MB.
	if limit := int64(compactAfter + 2*text.Len() + 64<<10); fi.Size() > limit {
		t.Fatalf("data file is %d bytes after streaming a %d-byte answer, want at most %d", fi.Size(), text.Len(), limit)
	}
	if m := msgOf(t, newSandbox(t, Config{DataFile: file}), ref.ID); m.Text != text.String() {
		t.Fatalf("after compactions the stream holds %d bytes, want %d", len(m.Text), text.Len())
	}
}

// A one-step answer slow enough to show "⏳ Working on it…" stops with the
// answer alone: no empty "✅ Done" plan above it. A stop without an answer
// keeps its title (it says what happened).
func TestSlowOneStepAnswerHasNoEmptyPlan(t *testing.T) {
	ctx := context.Background()
	s := newSandbox(t, Config{})
	root := botPost(t, s, "root", "general", "", "a question")
	ref, err := s.StartStream(ctx, core.Outbound{Key: "run:checklist", Scope: streamScope(root.ID)}, working(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StopStream(ctx, ref, core.StreamUpdate{Title: "✅ Done", Text: "the answer"}); err != nil {
		t.Fatal(err)
	}
	if m := msgOf(t, s, ref.ID); m.Stream == nil || m.Stream.Title != "" || m.Text != "the answer" {
		t.Fatalf("stopped stream: %+v %q", m.Stream, m.Text)
	}
	ref2, err := s.StartStream(ctx, core.Outbound{Key: "run2:checklist", Scope: streamScope(root.ID)}, working(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StopStream(ctx, ref2, core.StreamUpdate{Title: "❌ Failed — the model is down"}); err != nil {
		t.Fatal(err)
	}
	if m := msgOf(t, s, ref2.ID); m.Stream == nil || m.Stream.Title != "❌ Failed — the model is down" {
		t.Fatalf("failed stream: %+v", m.Stream)
	}
}
