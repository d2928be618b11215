package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// loopModel calls the note tool forever.
func loopModel() *coretest.ScriptedModel {
	steps := make([]coretest.Step, 50)
	for i := range steps {
		steps[i] = coretest.Calls(coretest.Call("", "note", `{"text":"again"}`))
	}
	return coretest.NewScriptedModel(steps...)
}

func TestStepBudgetPausesWithACard(t *testing.T) {
	m := loopModel()
	h := newHarness(t, m, []core.Tool{noteTool(&toolLog{})}, func(c *engine.Config) {
		c.Budgets.MaxSteps = 3
	})
	ev := h.mention(alice, "C1", "loop")
	h.deliver(ev)
	h.idle()
	if m.Calls() != 3 {
		t.Errorf("model calls = %d, want 3 (checked before every call)", m.Calls())
	}
	var runID string
	for id, r := range h.runs("C1") {
		runID = id
		if r.Status != core.RunBlocked || !strings.Contains(r.Reason, "step budget") {
			t.Errorf("run = %+v", r)
		}
	}
	notice, ok := h.s.Find("I had to pause")
	if !ok || !strings.Contains(notice.Out.Text, "step budget") || notice.Ref.Scope != threadOf(ev) || notice.Out.Priority != core.PriorityHigh {
		t.Errorf("notice = %+v", notice)
	}
	cur, _ := h.s.Current(h.s.Posts()[0].Ref.ID)
	if !strings.HasPrefix(cur.Text, "⏸ Paused") {
		t.Errorf("checklist = %q", cur.Text)
	}
	// Parked: a restart neither resumes nor re-posts it.
	h.restart()
	h.idle()
	if m.Calls() != 3 || len(h.s.Posts()) != 2 {
		t.Errorf("restart touched a blocked run: calls %d posts %d", m.Calls(), len(h.s.Posts()))
	}
	// A new message in the thread starts afresh and cancels the blocked run.
	h.deliver(h.inThread(alice, "C1", ev.MessageID, "try again"))
	h.idle()
	runs := h.runs("C1")
	if len(runs) != 2 || runs[runID].Status != core.RunCancelled {
		t.Errorf("runs = %+v", runs)
	}
}

func TestTokenBudgetMidRun(t *testing.T) {
	m := loopModel()
	m.Usage = core.Usage{InputTokens: 400, OutputTokens: 100}
	h := newHarness(t, m, []core.Tool{noteTool(&toolLog{})}, func(c *engine.Config) {
		c.Budgets.MaxTokens = 1200
	})
	h.deliver(h.mention(alice, "C1", "loop"))
	h.idle()
	if m.Calls() != 3 {
		t.Errorf("model calls = %d, want 3", m.Calls())
	}
	steps := payloads[*core.ModelStep](h, "C1", core.KindModelStep)
	for _, s := range steps {
		if s.Usage.InputTokens != 400 || s.Usage.OutputTokens != 100 {
			t.Errorf("step usage not recorded: %+v", s.Usage)
		}
	}
	if _, ok := h.s.Find("token budget"); !ok {
		t.Errorf("no notice: %+v", h.s.Posts())
	}
}

func TestDailyChannelBudget(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("ok"))
	m.Usage = core.Usage{InputTokens: 900, OutputTokens: 100}
	h := newHarness(t, m, nil, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{DailyTokenBudget: 1500}
	})
	h.deliver(h.mention(alice, "C1", "one"))
	h.idle()
	h.deliver(h.mention(alice, "C1", "two"))
	h.idle()
	h.deliver(h.mention(bob, "C1", "three"))
	h.idle()
	if m.Calls() != 2 {
		t.Errorf("model calls = %d, want 2 (the third run is over the daily budget)", m.Calls())
	}
	if p, ok := h.s.Find("daily token budget"); !ok || !strings.Contains(p.Out.Text, "policy set budget") {
		t.Errorf("notice = %+v", p.Out.Text)
	}
	// Another channel is unaffected; the next day is fresh.
	h.deliver(h.mention(alice, "C2", "other channel"))
	h.idle()
	h.clk.Advance(24 * time.Hour)
	h.deliver(h.mention(alice, "C1", "tomorrow"))
	h.idle()
	if m.Calls() != 4 {
		t.Errorf("model calls = %d, want 4", m.Calls())
	}
}

func TestWallTimeBudget(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("late"))
	m.OnCall = func(ctx context.Context, n int, v core.View) { <-ctx.Done() } // a hung provider
	h := newHarness(t, m, nil, func(c *engine.Config) {
		c.Budgets.MaxWall = 50 * time.Millisecond
		c.Clock = time.Now
	})
	h.deliver(h.mention(alice, "C1", "slow"))
	h.idle()
	for _, r := range h.runs("C1") {
		if r.Status != core.RunBlocked || !strings.Contains(r.Reason, "time budget") {
			t.Errorf("run = %+v", r)
		}
	}
}

func TestModelFailuresAreVisible(t *testing.T) {
	cases := []struct {
		failure core.ModelFailure
		status  core.RunStatus
		words   string
	}{
		{core.FailRateLimited, core.RunBlocked, "rate limiting"},
		{core.FailUnavailable, core.RunBlocked, "unavailable"},
		{core.FailAuth, core.RunBroken, "credentials"},
		{core.FailBadResponse, core.RunBroken, "unusable response"},
	}
	for _, c := range cases {
		t.Run(string(c.failure), func(t *testing.T) {
			m := coretest.NewScriptedModel(coretest.Fail(c.failure))
			h := newHarness(t, m, nil)
			h.deliver(h.mention(alice, "C1", "hi"))
			h.idle()
			for _, r := range h.runs("C1") {
				if r.Status != c.status || !strings.Contains(r.Reason, c.words) {
					t.Errorf("run = %+v", r)
				}
			}
			var saw bool
			for _, p := range h.s.Posts() {
				saw = saw || strings.Contains(p.Out.Text, c.words)
				if strings.HasPrefix(p.Out.Text, "⏳") {
					t.Errorf("a run that failed at once posted a checklist: %q", p.Out.Text)
				}
			}
			if !saw {
				t.Errorf("no visible notice: %+v", h.s.Posts())
			}
			transient := c.failure != core.FailAuth
			if want := 1; !transient && m.Calls() != want || transient && m.Calls() != 3 {
				t.Errorf("model calls = %d (transient %v)", m.Calls(), transient)
			}
		})
	}
}

func TestTransientModelErrorRecovers(t *testing.T) {
	var calls int
	m := coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		calls++
		if calls == 1 {
			return core.Reply{}, &core.ModelError{Failure: core.FailUnavailable, Err: context.DeadlineExceeded}
		}
		return core.Reply{Text: "recovered"}, nil
	})
	h := newHarness(t, m, nil)
	h.deliver(h.mention(alice, "C1", "hi"))
	h.idle()
	if _, ok := h.s.Find("recovered"); !ok {
		t.Errorf("no answer after retry")
	}
}

// A message that arrives in the thread while the run works is seen by the
// next model call; no second run starts.
func TestSteeringReachesTheNextModelCall(t *testing.T) {
	release := make(chan struct{})
	inCall := make(chan struct{})
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "note", `{"text":"draft"}`)),
		coretest.Text("final, with the change"),
	)
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if n == 1 {
			close(inCall)
			<-release
		}
	}
	h := newHarness(t, m, []core.Tool{noteTool(&toolLog{})})
	ev := h.mention(alice, "C1", "write the summary")
	h.deliver(ev)
	<-inCall
	h.deliver(h.inThread(bob, "C1", ev.MessageID, "make it shorter please"))
	h.deliver(h.inThread(alice, "C1", ev.MessageID, "and in French"))
	close(release)
	h.idle()
	if n := h.count("C1", core.KindRunStarted); n != 1 {
		t.Fatalf("run.started = %d, want 1", n)
	}
	views := m.Views()
	if len(views) != 2 {
		t.Fatalf("model calls = %d", len(views))
	}
	var texts []string
	for _, msg := range views[1].Messages {
		texts = append(texts, msg.Text)
	}
	joined := strings.Join(texts, "\n")
	if !strings.Contains(joined, "Bob (<@UBOB>): make it shorter please") || !strings.Contains(joined, "and in French") {
		t.Errorf("second view lacks the steering messages:\n%s", joined)
	}
	steps := payloads[*core.ModelStep](h, "C1", core.KindModelStep)
	if len(steps[1].Steering) != 2 {
		t.Errorf("model.step steering = %v", steps[1].Steering)
	}
	if len(h.s.Posts()) != 2 {
		t.Errorf("posts = %d", len(h.s.Posts()))
	}
}

// A steering message that lands after the final model step is not dropped:
// the run takes another step for it before completing.
func TestSteeringAfterFinalStepIsNotDropped(t *testing.T) {
	var h *harness
	var ev core.Event
	m := coretest.NewScriptedModel(
		func(v core.View) (core.Reply, error) {
			h.deliver(h.inThread(bob, "C1", ev.MessageID, "one more thing"))
			return core.Reply{Text: "first answer"}, nil
		},
		coretest.Text("second answer"),
	)
	h = newHarness(t, m, nil)
	ev = h.mention(alice, "C1", "question")
	h.deliver(ev)
	h.idle()
	if m.Calls() != 2 {
		t.Fatalf("model calls = %d", m.Calls())
	}
	if _, ok := h.s.Find("second answer"); !ok {
		t.Errorf("steering after the final step was dropped: %+v", h.s.Posts())
	}
	if n := h.count("C1", core.KindRunCompleted); n != 1 {
		t.Errorf("run.completed = %d", n)
	}
}

func TestReplyToolAndFinalTextPostOnce(t *testing.T) {
	m := coretest.NewScriptedModel(
		coretest.ReplyStep(core.Reply{Text: "Here you go: 42", ToolCalls: []core.ToolCall{{ID: "c1", Name: "reply", Args: `{"text":"Here you go: 42"}`}}}),
		coretest.Text("Here you go: 42"),
	)
	h := newHarness(t, m, []core.Tool{replyTool()})
	h.deliver(h.mention(alice, "C1", "answer?"))
	h.idle()
	var n int
	for _, p := range h.s.Posts() {
		if strings.Contains(p.Out.Text, "Here you go") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("answer posted %d times", n)
	}
}

func TestSeparateThreadsRunConcurrently(t *testing.T) {
	block := make(chan struct{})
	m := coretest.NewScriptedModel(coretest.Text("done"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if strings.Contains(lastText(v), "slow") {
			<-block
		}
	}
	h := newHarness(t, m, nil)
	h.deliver(h.mention(alice, "C1", "slow one"))
	h.deliver(h.mention(bob, "C1", "fast one"))
	coretest.WaitFor(t, 5*time.Second, "the fast thread to finish", func() bool {
		return h.count("C1", core.KindRunCompleted) == 1
	})
	close(block)
	h.idle()
	if n := h.count("C1", core.KindRunCompleted); n != 2 {
		t.Errorf("completed = %d", n)
	}
}
