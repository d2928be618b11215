package coretest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/marlowe-bot/marlowe/core"
)

// Step is one scripted model answer, computed from the view.
type Step func(v core.View) (core.Reply, error)

// Text answers with final text.
func Text(s string) Step {
	return func(core.View) (core.Reply, error) { return core.Reply{Text: s}, nil }
}

// Calls answers with tool calls.
func Calls(calls ...core.ToolCall) Step {
	return func(core.View) (core.Reply, error) {
		return core.Reply{ToolCalls: slices.Clone(calls)}, nil
	}
}

// ReplyStep answers with r.
func ReplyStep(r core.Reply) Step {
	return func(core.View) (core.Reply, error) { return r, nil }
}

// Fail answers with a *core.ModelError of kind f.
func Fail(f core.ModelFailure) Step {
	return func(core.View) (core.Reply, error) {
		return core.Reply{}, &core.ModelError{Provider: "scripted", Failure: f, Err: fmt.Errorf("scripted %s", f)}
	}
}

// Call builds a tool call.
func Call(id, name, args string) core.ToolCall { return core.ToolCall{ID: id, Name: name, Args: args} }

// ScriptedModel is a core.Model whose answer to a call is chosen by the
// number of assistant turns already in the view, not by how many calls it
// has seen: a run resumed after a crash that repeats a call gets the same
// answer, which is what makes crash tests deterministic.
type ScriptedModel struct {
	// Usage is added to every reply that sets none.
	Usage core.Usage
	// OnCall, when set, runs at the start of each call (n counts calls
	// from 1); tests use it to block a call or inject steering mid-call.
	OnCall func(ctx context.Context, n int, v core.View)

	mu    sync.Mutex
	steps []Step
	views []core.View
}

var _ core.Model = (*ScriptedModel)(nil)

// NewScriptedModel plays steps by view position.
func NewScriptedModel(steps ...Step) *ScriptedModel {
	return &ScriptedModel{steps: steps, Usage: core.Usage{InputTokens: 100, OutputTokens: 20}}
}

// Step implements core.Model.
func (m *ScriptedModel) Step(ctx context.Context, v core.View) (core.Reply, error) {
	m.mu.Lock()
	m.views = append(m.views, v)
	n := len(m.views)
	m.mu.Unlock()
	if m.OnCall != nil {
		m.OnCall(ctx, n, v)
	}
	if err := ctx.Err(); err != nil {
		return core.Reply{}, err
	}
	i := 0
	for _, msg := range v.Messages {
		if msg.Role == core.RoleAssistant {
			i++
		}
	}
	if i >= len(m.steps) {
		return core.Reply{}, &core.ModelError{Provider: "scripted", Failure: core.FailBadResponse, Err: fmt.Errorf("script exhausted at step %d", i)}
	}
	r, err := m.steps[i](v)
	if err != nil {
		return r, err
	}
	if r.Usage == (core.Usage{}) {
		r.Usage = m.Usage
	}
	if r.Provider == "" {
		r.Provider, r.Model = "scripted", "scripted"
	}
	return r, nil
}

// Views returns every view the model was called with.
func (m *ScriptedModel) Views() []core.View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.views)
}

// Calls returns how many calls the model received.
func (m *ScriptedModel) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.views)
}

// Answered answers "answered: <words>", the words being the view's last
// message without its "Name (<@id>): " prefix, so every answer names what
// it answers (conversation tests look for it in later views).
func Answered(v core.View) (core.Reply, error) {
	last := ""
	if n := len(v.Messages); n > 0 {
		last = v.Messages[n-1].Text
	}
	if _, words, ok := strings.Cut(last, "): "); ok {
		last = words
	}
	return core.Reply{Text: "answered: " + last}, nil
}
