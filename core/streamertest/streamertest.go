// Package streamertest is the conformance suite every core.Streamer runs
// (the sandbox, and Slack against slackfake), so the engine can rely on one
// behaviour whichever surface streams the run.
//
// The rule for a stream stopped without an answer (StopStream with an empty
// Text: the run failed, was stopped or paused after a model call was cut):
// the message keeps none of the text streamed into it. A cut answer read as
// an answer would mislead, so its text becomes the plan's title, which says
// what happened; a stream into which nothing was streamed stays the plan
// alone (its text empty or the title).
package streamertest

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// Harness is one Streamer under test, fresh for each case.
type Harness struct {
	Streamer core.Streamer
	// Scope is a thread the Streamer streams in.
	Scope     core.Scope
	Recipient string
	// Text reads back the text ref's message shows now (the answer, not
	// the plan), from the platform (or its fake), not from the Streamer.
	Text func(t *testing.T, ref core.MessageRef) string
	// Restart is the Streamer as a new process would have it: a fresh
	// instance over the same platform, knowing nothing it was told.
	Restart func(t *testing.T) core.Streamer
}

// Run runs the suite; newHarness is called once per case.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	const cut, answer = "I think the build fa", "I think the build failed on the linter."
	const failed = "❌ Failed — the model provider is down"
	working := core.StreamUpdate{Title: "⏳ Working on it…"}
	start := func(t *testing.T, h Harness, key string) core.MessageRef {
		t.Helper()
		ctx := context.Background()
		if !h.Streamer.Streams(ctx, h.Scope) {
			t.Fatal("the harness's scope takes no stream")
		}
		u := working
		u.Recipient = h.Recipient
		ref, err := h.Streamer.StartStream(ctx, core.Outbound{Key: key, Scope: h.Scope}, u)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	appendText := func(t *testing.T, h Harness, ref core.MessageRef, text string) {
		t.Helper()
		u := working
		u.Text = text
		if err := h.Streamer.AppendStream(context.Background(), ref, u); err != nil {
			t.Fatal(err)
		}
	}
	stop := func(t *testing.T, h Harness, ref core.MessageRef, key, title, text string) {
		t.Helper()
		if err := h.Streamer.StopStream(context.Background(), ref, core.StreamUpdate{Key: key, Title: title, Text: text}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("stopped with its answer holds exactly the answer", func(t *testing.T) {
		h := newHarness(t)
		ref := start(t, h, "k-answer")
		appendText(t, h, ref, cut)
		stop(t, h, ref, "k-answer", "✅ Done", answer)
		if got := h.Text(t, ref); got != answer {
			t.Fatalf("the stopped stream holds %q, want the answer %q", got, answer)
		}
	})
	t.Run("stopped without an answer holds the plan's title, not the cut text", func(t *testing.T) {
		h := newHarness(t)
		ref := start(t, h, "k-cut")
		appendText(t, h, ref, cut)
		stop(t, h, ref, "k-cut", failed, "")
		if got := h.Text(t, ref); got != failed {
			t.Fatalf("the stream stopped without an answer holds %q, want the plan's title %q", got, failed)
		}
	})
	t.Run("stopped without an answer or any text stays the plan", func(t *testing.T) {
		h := newHarness(t)
		ref := start(t, h, "k-none")
		stop(t, h, ref, "k-none", failed, "")
		if got := h.Text(t, ref); got != "" && got != failed {
			t.Fatalf("the stream stopped with nothing streamed holds %q, want nothing or %q", got, failed)
		}
	})
	t.Run("a repeated stop is no error and changes nothing", func(t *testing.T) {
		h := newHarness(t)
		ref := start(t, h, "k-twice")
		stop(t, h, ref, "k-twice", "✅ Done", answer)
		stop(t, h, ref, "k-twice", "✅ Done", answer)
		if got := h.Text(t, ref); got != answer {
			t.Fatalf("after a second stop the stream holds %q, want %q", got, answer)
		}
	})
	t.Run("more text after the stop is ErrStreamEnded", func(t *testing.T) {
		h := newHarness(t)
		ref := start(t, h, "k-after")
		stop(t, h, ref, "k-after", "✅ Done", answer)
		u := working
		u.Text = answer + " And more."
		if err := h.Streamer.AppendStream(context.Background(), ref, u); !errors.Is(err, core.ErrStreamEnded) {
			t.Fatalf("appending after the stop: %v, want core.ErrStreamEnded", err)
		}
		if got := h.Text(t, ref); got != answer {
			t.Fatalf("after a refused append the stream holds %q, want %q", got, answer)
		}
	})
	// A process that died after stopping (or starting) a stream, before
	// it could record the message, must not leave the next one starting a
	// second: a resumed start with the same key returns that message.
	for _, stopped := range []bool{false, true} {
		name := map[bool]string{false: "open", true: "stopped"}[stopped]
		t.Run("a resumed start finds the "+name+" stream an earlier process started", func(t *testing.T) {
			h := newHarness(t)
			key := "k-resumed-" + name
			ref := start(t, h, key)
			appendText(t, h, ref, cut)
			if stopped {
				stop(t, h, ref, key, "✅ Done", answer)
			}
			next := h.Restart(t)
			u := working
			u.Recipient, u.Key, u.Resumed = h.Recipient, key, true
			got, err := next.StartStream(context.Background(), core.Outbound{Key: key, Scope: h.Scope, Resumed: true}, u)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != ref.ID {
				t.Fatalf("the resumed start made message %s, want the earlier process's %s", got.ID, ref.ID)
			}
			if err := next.StopStream(context.Background(), got, core.StreamUpdate{Key: key, Title: "✅ Done", Text: answer, Resumed: true}); err != nil {
				t.Fatal(err)
			}
			if got := h.Text(t, ref); got != answer {
				t.Fatalf("the resumed stream holds %q, want %q", got, answer)
			}
		})
	}
}
