package openai_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// A streamed step shows its text growing, then returns the reply Step
// returns for the same scripted answer: text, tool calls, usage, model.
func TestStepStreamEqualsStep(t *testing.T) {
	answers := []llmtest.Response{
		{Text: "The deploy finished at 10:42; all checks passed.", Pieces: 5, Usage: llmtest.Usage{InputTokens: 12, OutputTokens: 9}, Model: "test-model-2025"},
		{Text: "Let me look.", ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "get_weather", Args: `{"city":"Oslo"}`}}, Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 2}},
	}
	for _, a := range answers {
		srv := llmtest.NewOpenAIServer(t)
		srv.Enqueue(a, a)
		m := newModel(t, srv, nil)
		v := core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}}
		want, err := m.Step(context.Background(), v)
		if err != nil {
			t.Fatalf("Step: %v", err)
		}
		var seen []string
		var calls bool
		got, err := m.StepStream(context.Background(), v, func(s string, c bool) {
			seen = append(seen, s)
			calls = c
		})
		if err != nil {
			t.Fatalf("StepStream: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("streamed reply %+v, Step's %+v", got, want)
		}
		if a.ToolCalls == nil && len(seen) < 3 {
			t.Errorf("text shown %d times (%q), want it to grow piece by piece", len(seen), seen)
		}
		for i := 1; i < len(seen); i++ {
			if !strings.HasPrefix(seen[i], seen[i-1]) {
				t.Errorf("shown text %q does not extend %q", seen[i], seen[i-1])
			}
		}
		if seen[len(seen)-1] != a.Text || calls != (a.ToolCalls != nil) {
			t.Errorf("last shown %q (calls %v), want %q (calls %v)", seen[len(seen)-1], calls, a.Text, a.ToolCalls != nil)
		}
		reqs := chatRequests(t, srv)
		if !reqs[1].Stream || !reqs[1].StreamOptions.IncludeUsage {
			t.Errorf("the streamed request did not ask for a stream with usage: %+v", reqs[1])
		}
	}
}

// A stream cut before its end is a transient failure, never a short answer.
func TestStepStreamCutIsTransient(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Response{Text: "one two three four", Pieces: 4, CutAfter: 2})
	m := newModel(t, srv, nil)
	shown := ""
	r, err := m.StepStream(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}}, func(s string, _ bool) { shown = s })
	me, ok := core.AsModelError(err)
	if !ok || !me.Transient() {
		t.Fatalf("cut stream: reply %+v, err %v; want a transient model error", r, err)
	}
	if shown == "" || shown == "one two three four" {
		t.Errorf("shown %q before the cut, want part of the text", shown)
	}
}

// A compatible server that ignores "stream" and answers whole is asked
// the ordinary way: the answer, not a failure.
func TestStepStreamFromAServerThatDoesNotStream(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	whole := llmtest.Response{Body: `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`}
	srv.Enqueue(whole, whole)
	m := newModel(t, srv, nil)
	r, err := m.StepStream(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}}, func(string, bool) {})
	if err != nil || r.Text != "whole answer" {
		t.Fatalf("reply %+v, err %v; want the whole answer", r, err)
	}
}
