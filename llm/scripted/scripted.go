// Package scripted is a core.Model that plays a fixed script: for tests, and
// for the offline demo. Each Step call takes the next step of the script; a
// step is a fixed reply, a fixed error, or a function of the view.
package scripted

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/marlowe-bot/marlowe/core"
)

// ProviderName is the default Reply.Provider of a scripted model.
const ProviderName = "scripted"

// ErrExhausted is wrapped by the error a Model returns when it is called
// after its last step (and has no fallback).
var ErrExhausted = errors.New("scripted: script exhausted")

// Step is one scripted model call.
type Step struct {
	fn func(core.View) (core.Reply, error)
}

// Reply answers with r.
func Reply(r core.Reply) Step {
	return Step{fn: func(core.View) (core.Reply, error) { return r, nil }}
}

// Text answers with a final text.
func Text(text string) Step { return Reply(core.Reply{Text: text}) }

// Call is a tool call for ToolCalls; Args is the raw argument text.
type Call = core.ToolCall

// ToolCalls answers with tool calls (and no text).
func ToolCalls(calls ...core.ToolCall) Step {
	return Reply(core.Reply{ToolCalls: append([]core.ToolCall(nil), calls...)})
}

// Error fails the call with err.
func Error(err error) Step {
	return Step{fn: func(core.View) (core.Reply, error) { return core.Reply{}, err }}
}

// Fail fails the call with a *core.ModelError of kind f.
func Fail(f core.ModelFailure) Step {
	return Step{fn: func(core.View) (core.Reply, error) {
		return core.Reply{}, &core.ModelError{Failure: f, Err: fmt.Errorf("scripted %s", f)}
	}}
}

// Func answers with whatever fn makes of the view.
func Func(fn func(core.View) (core.Reply, error)) Step { return Step{fn: fn} }

// Model is a scripted core.Model. It is safe for concurrent use: concurrent
// calls take successive steps in the order they acquire the model.
type Model struct {
	provider, model string

	mu       sync.Mutex
	steps    []Step
	next     int
	views    []core.View
	fallback func(core.View) (core.Reply, error)
}

var _ core.Model = (*Model)(nil)

// New returns a model that plays steps in order. Replies carry provider
// "scripted" and model "scripted" unless the step sets its own.
func New(steps ...Step) *Model { return NewNamed(ProviderName, steps...) }

// NewNamed is New with another provider label (say, to tell a primary from a
// secondary in failover tests).
func NewNamed(provider string, steps ...Step) *Model {
	return &Model{provider: provider, model: ProviderName, steps: append([]Step(nil), steps...)}
}

// Then appends steps to the script.
func (m *Model) Then(steps ...Step) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, steps...)
	return m
}

// Otherwise makes fn answer every call after the script is exhausted,
// instead of the ErrExhausted error (an offline demo that never runs dry).
func (m *Model) Otherwise(fn func(core.View) (core.Reply, error)) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fallback = fn
	return m
}

// Step plays the next step. A context that is already done fails the call
// without using up a step.
func (m *Model) Step(ctx context.Context, v core.View) (core.Reply, error) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return core.Reply{}, &core.ModelError{Provider: m.provider, Failure: core.FailTimeout, Err: err}
		}
		return core.Reply{}, fmt.Errorf("model %s: call cancelled: %w", m.provider, err)
	}
	m.mu.Lock()
	call := len(m.views) + 1
	m.views = append(m.views, CloneView(v))
	var fn func(core.View) (core.Reply, error)
	if m.next < len(m.steps) {
		fn = m.steps[m.next].fn
		m.next++
	} else {
		fn = m.fallback
	}
	scripted := len(m.steps)
	m.mu.Unlock()

	if fn == nil {
		return core.Reply{}, fmt.Errorf("%w: call %d, but only %d step(s) scripted (last message: %q)",
			ErrExhausted, call, scripted, lastText(v))
	}
	r, err := fn(CloneView(v))
	if err != nil {
		if me, ok := core.AsModelError(err); ok && me.Provider == "" {
			cp := *me
			cp.Provider = m.provider
			return core.Reply{}, &cp
		}
		return core.Reply{}, err
	}
	if r.Provider == "" {
		r.Provider = m.provider
	}
	if r.Model == "" {
		r.Model = m.model
	}
	r.ToolCalls = append([]core.ToolCall(nil), r.ToolCalls...)
	return r, nil
}

// Views returns a copy of every view the model was called with, in order.
func (m *Model) Views() []core.View {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]core.View, len(m.views))
	for i, v := range m.views {
		out[i] = CloneView(v)
	}
	return out
}

// Calls is how many times Step was called (with a live context).
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.views)
}

// Remaining is how many scripted steps have not been played.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.steps) - m.next
}

// CloneView deep-copies a view, so a recorded view cannot change under the
// test that inspects it.
func CloneView(v core.View) core.View {
	out := v
	out.Messages = make([]core.Message, len(v.Messages))
	for i, msg := range v.Messages {
		msg.ToolCalls = append([]core.ToolCall(nil), msg.ToolCalls...)
		out.Messages[i] = msg
	}
	if v.Messages == nil {
		out.Messages = nil
	}
	if v.Tools != nil {
		out.Tools = make([]core.ToolSpec, len(v.Tools))
		for i, t := range v.Tools {
			t.Schema = append([]byte(nil), t.Schema...)
			out.Tools[i] = t
		}
	}
	return out
}

// Echo is a deterministic answer for demos: it repeats, briefly, the last
// thing it was told (a person's message or a tool result).
func Echo(v core.View) (core.Reply, error) {
	return core.Reply{Text: EchoText(v)}, nil
}

// EchoText is Echo's text.
func EchoText(v core.View) string {
	for i := len(v.Messages) - 1; i >= 0; i-- {
		msg := v.Messages[i]
		switch msg.Role {
		case core.RoleUser:
			return "You said: " + short(msg.Text)
		case core.RoleTool:
			return "The tool answered: " + short(msg.Text)
		}
	}
	return "Hello."
}

func lastText(v core.View) string {
	if len(v.Messages) == 0 {
		return ""
	}
	return short(v.Messages[len(v.Messages)-1].Text)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}
