package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// typingSurface is the fake surface with a typing indicator that lasts
// every: it records the indicator and the posts in one sequence.
type typingSurface struct {
	*coretest.FakeSurface
	every time.Duration
	fail  error

	mu      sync.Mutex
	seq     []string // "typing <channel>" | "post <text>"
	changed chan struct{}
}

func newTypingSurface(fs *coretest.FakeSurface) *typingSurface {
	return &typingSurface{FakeSurface: fs, every: 10 * time.Millisecond, changed: make(chan struct{})}
}

func (s *typingSurface) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = append(s.seq, what)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *typingSurface) Typing(_ context.Context, sc core.Scope) error {
	s.note("typing " + sc.Channel)
	return s.fail
}

func (s *typingSurface) TypingEvery() time.Duration { return s.every }

func (s *typingSurface) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	ref, err := s.FakeSurface.Post(ctx, out)
	if err == nil {
		text := out.Text
		if out.Card != nil {
			text = "card " + out.Card.Title
		}
		s.note("post " + text)
	}
	return ref, err
}

func (s *typingSurface) sequence() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seq...)
}

func (s *typingSurface) typings() int {
	n := 0
	for _, e := range s.sequence() {
		if strings.HasPrefix(e, "typing ") {
			n++
		}
	}
	return n
}

// await waits for cond, woken by each recorded call; false after 5 s or
// when ctx ends.
func (s *typingSurface) await(ctx context.Context, cond func() bool) bool {
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// withTyping gives the harness's surface a typing indicator.
func withTyping(ts **typingSurface) func(*engine.Config) {
	return func(c *engine.Config) {
		*ts = newTypingSurface(c.Surfaces[platform].(*coretest.FakeSurface))
		c.Surfaces[platform] = *ts
	}
}

// typistRunning reports a refresh goroutine still alive.
func typistRunning() bool {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "engine.(*typist).refresh")
}

// lastIndex is the index of the last entry with prefix, or -1.
func lastIndex(seq []string, prefix string) int {
	for i := len(seq) - 1; i >= 0; i-- {
		if strings.HasPrefix(seq[i], prefix) {
			return i
		}
	}
	return -1
}

// TestTypingShowsWhileTheModelWorks: the indicator is asked for as soon
// as the model call starts and again at the surface's cadence while it
// lasts; it is not asked for after the answer, and no refresh outlives the
// run.
func TestTypingShowsWhileTheModelWorks(t *testing.T) {
	var ts *typingSurface
	m := coretest.NewScriptedModel(coretest.Text("the deploy is done"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if !ts.await(ctx, func() bool { return ts.typings() >= 3 }) {
			t.Errorf("typing was asked for %d times during a model call of 5 s, want it refreshed (>= 3)", ts.typings())
		}
	}
	h := newHarness(t, m, nil, withTyping(&ts))
	h.deliver(h.mention(alice, "C1", "is the deploy done?"))
	h.idle()
	seq := quietAfter(t, ts, "post the deploy is done")
	for _, e := range seq {
		if strings.HasPrefix(e, "typing ") && e != "typing C1" {
			t.Errorf("typing shown in the wrong channel: %q", e)
		}
	}
}

// quietAfter checks that the post starting with post was made, that no
// typing was asked for after it, and that no refresh goroutine is left.
func quietAfter(t *testing.T, ts *typingSurface, post string) []string {
	t.Helper()
	seq := ts.sequence()
	at := lastIndex(seq, post)
	if at < 0 {
		t.Fatalf("no %q: %q", post, seq)
	}
	if last := lastIndex(seq, "typing "); last > at {
		t.Errorf("typing asked for after %q: %q", post, seq)
	}
	// The drive joined the refresh (its done channel is closed, in a
	// defer); the goroutine itself may still be returning for a moment.
	for deadline := time.Now().Add(2 * time.Second); typistRunning(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Error("a typing refresh goroutine outlived the drive")
			break
		}
	}
	return seq
}

// TestTypingStopsWhenTheRunParks: a tool's run shows the indicator too;
// when the run parks on a question card the refreshing stops with it.
func TestTypingStopsWhenTheRunParks(t *testing.T) {
	var ts *typingSurface
	slowAsk := core.Tool{Name: "ask", Description: "ask people", Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			before := ts.typings()
			if !ts.await(ctx, func() bool { return ts.typings() >= before+2 }) {
				t.Errorf("typing not refreshed while the tool ran (%d calls before, %d after)", before, ts.typings())
			}
			return core.Observation{Escalate: &core.Escalation{Question: "Ship it?", Options: []string{"yes", "no"}}}, nil
		}}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "ask", `{"question":"Ship it?"}`)))
	h := newHarness(t, m, []core.Tool{slowAsk}, withTyping(&ts))
	h.deliver(h.mention(alice, "C1", "should we ship?"))
	h.idle()
	quietAfter(t, ts, "post card")
}

// TestTypingFailureNeverFailsARun: a surface that refuses the indicator
// gets a debug log line; the run answers as usual.
func TestTypingFailureNeverFailsARun(t *testing.T) {
	var ts *typingSurface
	m := coretest.NewScriptedModel(coretest.Text("all good"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if !ts.await(ctx, func() bool { return ts.typings() >= 2 }) {
			t.Errorf("typing not asked for again after a failure (%d calls)", ts.typings())
		}
	}
	h := newHarness(t, m, nil, withTyping(&ts), func(*engine.Config) { ts.fail = errors.New("429 slow down") })
	h.deliver(h.mention(alice, "C1", "how are things?"))
	h.idle()
	if _, ok := h.s.Find("all good"); !ok {
		t.Fatalf("no answer after typing failed: %+v", h.s.Posts())
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "level=DEBUG msg=\"typing indicator failed\"") || !strings.Contains(logs, "429 slow down") {
		t.Errorf("typing failure not logged at debug:\n%s", logs)
	}
	if strings.Contains(logs, "level=WARN msg=\"typing") || strings.Contains(logs, "level=ERROR msg=\"typing") {
		t.Errorf("typing failure logged above debug:\n%s", logs)
	}
}

// TestTypingStopsOnClose: Close during a hung model call leaves no
// typing goroutine behind.
func TestTypingStopsOnClose(t *testing.T) {
	var ts *typingSurface
	m := coretest.NewScriptedModel(coretest.Text("never"))
	m.OnCall = func(ctx context.Context, n int, v core.View) { <-ctx.Done() }
	h := newHarness(t, m, nil, withTyping(&ts))
	h.deliver(h.mention(alice, "C1", "hang please"))
	if !ts.await(context.Background(), func() bool { return ts.typings() >= 2 }) {
		t.Fatalf("typing not shown during the hung call: %q", ts.sequence())
	}
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	if typistRunning() {
		t.Error("a typing refresh goroutine outlived Close")
	}
}
