package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
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

// The final answer streams into the run's plan message once its step is
// journaled, and the message ends holding exactly the answer: not the text
// of a failed attempt, not the text that preceded a tool call (neither is
// shown at all: see TestStreamShowsOnlyWhatTheJournalRecords).
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
	close(m.release) // nothing is shown while the model writes: no need to hold it
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
	plan := wait("the plan", func(m message) bool { return m.Bot && m.Thread == q && m.Stream != nil })
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

// shownSurface is the sandbox as the engine's surface, recording every
// text a stream shows (start, appends, stop) and every post or edit.
type shownSurface struct {
	*Sandbox
	mu    sync.Mutex
	shown []string
	seen  chan string
}

func (s *shownSurface) note(text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	s.mu.Lock()
	s.shown = append(s.shown, text)
	s.mu.Unlock()
	select {
	case s.seen <- text:
	default:
	}
}

func (s *shownSurface) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.shown...)
}

func (s *shownSurface) StartStream(ctx context.Context, out core.Outbound, u core.StreamUpdate) (core.MessageRef, error) {
	s.note(u.Text)
	return s.Sandbox.StartStream(ctx, out, u)
}

func (s *shownSurface) AppendStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate) error {
	s.note(u.Text)
	return s.Sandbox.AppendStream(ctx, ref, u)
}

func (s *shownSurface) StopStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate) error {
	s.note(u.Text)
	return s.Sandbox.StopStream(ctx, ref, u)
}

func (s *shownSurface) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	s.note(out.Text)
	return s.Sandbox.Post(ctx, out)
}

func (s *shownSurface) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	s.note(out.Text)
	return s.Sandbox.Update(ctx, ref, out)
}

const leakPreamble = "Posting the Q3 numbers (revenue 4.2M) to #leaks now"

// preambleModel writes text before a tool call the gate refuses, then
// answers. Asked to stream (StepStream), it writes the preamble and waits
// until the surface shows it, as a provider's stream would be shown.
type preambleModel struct{ shown <-chan string }

func (m *preambleModel) reply(v core.View) core.Reply {
	if v.Messages[len(v.Messages)-1].Role != core.RoleTool {
		return core.Reply{Text: leakPreamble, ToolCalls: []core.ToolCall{{ID: "c1", Name: "leak", Args: `{}`}}}
	}
	return core.Reply{Text: "I can't share those numbers there."}
}

func (m *preambleModel) Step(_ context.Context, v core.View) (core.Reply, error) {
	return m.reply(v), nil
}

func (m *preambleModel) StepStream(ctx context.Context, v core.View, text func(string, bool)) (core.Reply, error) {
	r := m.reply(v)
	if len(r.ToolCalls) > 0 {
		text(r.Text, false) // the call is not known yet
		for shown := false; !shown; {
			select {
			case s := <-m.shown:
				shown = strings.Contains(s, "4.2M")
			case <-ctx.Done():
				return core.Reply{}, ctx.Err()
			}
		}
	}
	text(r.Text, len(r.ToolCalls) > 0)
	return r, nil
}

// ATTACK (streaming runs ahead of the gate): the model writes "Posting the
// Q3 numbers (revenue 4.2M) to #leaks now" and then calls a tool the gate
// refuses. On the old code the text streamed into the thread while the
// model wrote it, before the call was even journaled, and was never
// recorded as shown. Now every text the surface showed is one the journal
// records as posted (message.posted, or a prefix of it while it
// streamed), and the refused call's text was never shown.
func TestStreamShowsOnlyWhatTheJournalRecords(t *testing.T) {
	sb := newSandbox(t, Config{Clock: time.Now})
	seen := make(chan string, 64)
	surf := &shownSurface{Sandbox: sb, seen: seen}
	leak := core.Tool{
		Name: "leak", Description: "Post somewhere.", Consequence: core.Send,
		Schema: json.RawMessage(`{"type":"object","properties":{}}`),
		Check: func(context.Context, core.ToolContext, json.RawMessage) (core.Consequence, error) {
			return "", errors.New("not allowed here")
		},
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			t.Error("the refused tool ran")
			return core.Observation{}, nil
		},
	}
	tools, err := gate.NewRegistry(leak)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err = tools.WithDefault("leak"); err != nil {
		t.Fatal(err)
	}
	journal := coretest.NewMemJournal(coretest.NewSigner(t))
	eng := newEngine(t, sb, func(c *engine.Config) {
		c.Model, c.Tools, c.Journal = &preambleModel{shown: seen}, tools, journal
		c.Surfaces = map[string]core.Surface{Platform: surf}
		c.ChecklistDelay, c.RetryBackoff = time.Millisecond, time.Millisecond
	})
	base := run(t, sb, eng.Deliver)
	q := say(t, base, "alice", "general", "", "<@marlowe> share the Q3 numbers in #leaks")
	waitMessage(t, sb, "the answer", func(m message) bool {
		return m.Bot && m.Thread == q && strings.Contains(m.Text, "can't share")
	})
	if err := eng.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}

	var posted []string
	refused := false
	for _, c := range journal.All(core.Scope{Platform: Platform, Workspace: Workspace, Channel: "general"}.Key()) {
		switch c.Kind() {
		case core.KindMessagePosted:
			if p, err := core.Decode[*core.MessagePosted](c); err == nil {
				posted = append(posted, p.Text)
			}
		case core.KindToolCompleted:
			if p, err := core.Decode[*core.ToolCompleted](c); err == nil && p.Tool == "leak" && !p.OK {
				refused = true
			}
		}
	}
	if !refused {
		t.Fatal("the leak call was not refused")
	}
	for _, s := range surf.texts() {
		if strings.Contains(s, "4.2M") {
			t.Errorf("the refused call's text was shown: %q", s)
		}
		if !slices.ContainsFunc(posted, func(p string) bool { return strings.HasPrefix(p, strings.TrimSpace(s)) }) {
			t.Errorf("shown but not journaled as posted: %q (journaled: %q)", s, posted)
		}
	}
}
