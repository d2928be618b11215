package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
)

const buildAnswer = "The build is green: 214 checks passed."

// heldModel streams like a provider: a read tool first, then the answer,
// shown piece by piece and held until released. With failFirst the tool
// call's step shows its preamble first and the answer's first attempt
// shows some text and fails (a lost connection).
type heldModel struct {
	release   chan struct{}
	failFirst bool
	oneStep   bool // answer at once, no tool
	mu        sync.Mutex
	attempts  int
}

func (m *heldModel) Step(ctx context.Context, v core.View) (core.Reply, error) {
	return m.StepStream(ctx, v, func(string, bool) {})
}

func (m *heldModel) StepStream(ctx context.Context, v core.View, text func(string, bool)) (core.Reply, error) {
	if last := v.Messages[len(v.Messages)-1]; last.Role != core.RoleTool && !m.oneStep {
		if m.failFirst {
			text("Let me check", false) // shown before the call is known
		}
		text("Let me check", true)
		return core.Reply{Text: "Let me check", ToolCalls: []core.ToolCall{{ID: "c1", Name: "build_status", Args: `{}`}}}, nil
	}
	m.mu.Lock()
	m.attempts++
	first := m.attempts == 1
	m.mu.Unlock()
	if first && m.failFirst {
		text("I think the build fa", false)
		return core.Reply{}, &core.ModelError{Provider: "held", Failure: core.FailUnavailable, Err: context.DeadlineExceeded}
	}
	text("The build is", false)
	text("The build is green:", false)
	select {
	case <-m.release:
	case <-ctx.Done():
		return core.Reply{}, ctx.Err()
	}
	text(buildAnswer, false)
	return core.Reply{Text: buildAnswer}, nil
}

// The final answer streams into the run's plan message while the model is
// still writing it, and the message ends holding exactly the answer: not
// the text of a failed attempt, not the text that preceded a tool call.
// Text shown before a tool call or by a failed attempt does not stay: the
// stopped message holds exactly the answer.
func TestModelTextStreamsIntoThePlan(t *testing.T) {
	t.Run("held", func(t *testing.T) { modelTextStreams(t, false, false) })
	t.Run("retried", func(t *testing.T) { modelTextStreams(t, true, false) })
	// A run's first call outlasting the checklist delay streams from the
	// moment the plan shows.
	t.Run("first-call", func(t *testing.T) { modelTextStreams(t, false, true) })
}

func modelTextStreams(t *testing.T, failFirst, oneStep bool) {
	sb := newSandbox(t, Config{Clock: time.Now})
	m := &heldModel{release: make(chan struct{}), failFirst: failFirst, oneStep: oneStep}
	if failFirst {
		close(m.release)
	}
	status := core.Tool{
		Name: "build_status", Description: "The build's status.", Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{}}`),
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			return core.Observation{Text: "green, 214 checks", Trust: core.Untrusted}, nil
		},
	}
	tools, err := gate.NewRegistry(status)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err = tools.WithDefault("build_status"); err != nil {
		t.Fatal(err)
	}
	eng := newEngine(t, sb, func(c *engine.Config) {
		c.Model, c.Tools, c.ChecklistDelay, c.RetryBackoff = m, tools, time.Millisecond, time.Millisecond
		if oneStep {
			c.ChecklistDelay = 50 * time.Millisecond
		}
	})
	base := run(t, sb, eng.Deliver)
	q := say(t, base, "alice", "general", "", "<@marlowe> is the build green?")

	wait := func(what string, cond func(m message) bool) message {
		t.Helper()
		return waitMessage(t, sb, what, cond)
	}
	var plan message
	if !failFirst {
		// While the model holds its answer, the plan already shows its start.
		plan = wait("the answer's start in the open plan", func(m message) bool {
			return m.Bot && m.Thread == q && m.Stream != nil && !m.Stream.Stopped && strings.HasPrefix(m.Text, "The build is green:")
		})
		close(m.release)
	} else {
		plan = wait("the plan", func(m message) bool { return m.Bot && m.Thread == q && m.Stream != nil })
	}
	done := wait("the plan stopped", func(m message) bool { return m.ID == plan.ID && m.Stream != nil && m.Stream.Stopped })
	if done.Text != buildAnswer {
		t.Errorf("the finished message holds %q, want exactly %q", done.Text, buildAnswer)
	}
	if err := eng.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	var bots int
	sb.mu.Lock()
	for _, m := range sb.msgs {
		if m.Bot && m.Thread == q {
			bots++
		}
	}
	sb.mu.Unlock()
	if bots != 1 {
		t.Errorf("%d bot messages in the thread, want the one plan holding the answer", bots)
	}
}
