package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// streamSurface is the fake surface with core.Streamer: every stream call
// is recorded with the update it carried.
type streamSurface struct {
	*coretest.FakeSurface
	mu    sync.Mutex
	calls []streamCall
}

type streamCall struct {
	op string // start, append, stop
	u  core.StreamUpdate
}

func (s *streamSurface) record(op string, u core.StreamUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, streamCall{op: op, u: u})
}

func (s *streamSurface) Calls() []streamCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]streamCall(nil), s.calls...)
}

func (s *streamSurface) Streams(_ context.Context, sc core.Scope) bool { return sc.Thread != "" }

func (s *streamSurface) StartStream(ctx context.Context, out core.Outbound, u core.StreamUpdate) (core.MessageRef, error) {
	s.record("start", u)
	out.Text = u.Title
	return s.Post(ctx, out)
}

func (s *streamSurface) AppendStream(_ context.Context, _ core.MessageRef, u core.StreamUpdate) error {
	s.record("append", u)
	return nil
}

func (s *streamSurface) StopStream(_ context.Context, _ core.MessageRef, u core.StreamUpdate) error {
	s.record("stop", u)
	return nil
}

// On a surface that streams, a one-step answer slower than the checklist
// delay streams the answer alone: no stream started with "⏳ Working on
// it…" that then stops as a "✅ Done" plan with no tasks above the answer
// (issue 36). The wait shows in the surface's own status meanwhile.
func TestSlowOneStepAnswerStreamsNoEmptyPlan(t *testing.T) {
	var h *harness
	m := coretest.NewScriptedModel(coretest.Text("It took a while."))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		h.clk.Advance(time.Second) // slow by the engine's clock
	}
	var ss *streamSurface
	h = newHarness(t, m, nil, func(c *engine.Config) {
		c.ChecklistDelay = 50 * time.Millisecond
		ss = &streamSurface{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface)}
		c.Surfaces = map[string]core.Surface{platform: ss}
	})
	h.deliver(h.mention(alice, "C1", "think hard"))
	h.idle()
	calls := ss.Calls()
	var starts int
	for _, c := range calls {
		if c.op == "start" {
			starts++
		}
		if c.u.Title != "" || len(c.u.Tasks) != 0 {
			t.Errorf("%s carried a plan %q with %d tasks, want the answer alone", c.op, c.u.Title, len(c.u.Tasks))
		}
	}
	if starts != 1 || len(calls) == 0 || calls[len(calls)-1].op != "stop" || calls[len(calls)-1].u.Text != "It took a while." {
		t.Fatalf("stream calls = %+v, want one stream of the answer, stopped", calls)
	}
	if posts := h.s.Posts(); len(posts) != 1 {
		t.Errorf("posts = %d, want the one streamed answer", len(posts))
	}
}
