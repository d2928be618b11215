package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// runMetrics records what the engine reports.
type runMetrics struct {
	mu     sync.Mutex
	ended  map[core.RunStatus]int
	calls  int
	errs   int
	tokens int
}

func (m *runMetrics) RunEnded(s core.RunStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended == nil {
		m.ended = map[core.RunStatus]int{}
	}
	m.ended[s]++
}

func (m *runMetrics) ModelCalled(_ time.Duration, u core.Usage, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.tokens += u.InputTokens + u.OutputTokens
	if err != nil {
		m.errs++
	}
}

func (m *runMetrics) get() (map[core.RunStatus]int, int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[core.RunStatus]int{}
	for k, v := range m.ended {
		out[k] = v
	}
	return out, m.calls, m.errs
}

// TestDrainRefusesNewWorkAndWaitsForTheRunInHand: once Drain has begun,
// Deliver refuses with ErrDraining (nothing journaled, so the platform's
// redelivery is the only copy), and Drain returns only after the run that
// was in flight has completed, its answer posted once.
func TestDrainRefusesNewWorkAndWaitsForTheRunInHand(t *testing.T) {
	inCall := make(chan struct{}, 1)
	release := make(chan struct{})
	m := coretest.NewScriptedModel(coretest.Text("the answer"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		inCall <- struct{}{}
		<-release
	}
	rm := &runMetrics{}
	h := newHarness(t, m, nil, func(c *engine.Config) { c.Metrics = rm })
	h.deliver(h.mention(alice, "C1", "question"))
	<-inCall

	drained := make(chan error, 1)
	go func() { drained <- h.e.Drain(context.Background()) }()
	coretest.WaitFor(t, 5*time.Second, "draining", h.e.Draining)

	before := len(h.kinds("C1"))
	ev := h.mention(bob, "C1", "a second question")
	if err := h.e.Deliver(context.Background(), core.Inbound{Event: &ev}); !errors.Is(err, engine.ErrDraining) {
		t.Fatalf("Deliver while draining = %v, want ErrDraining", err)
	}
	if n := len(h.kinds("C1")); n != before {
		t.Fatalf("a refused delivery journaled %d commands", n-before)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with a run in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return after the run finished")
	}
	if n := h.count("C1", core.KindRunCompleted); n != 1 {
		t.Fatalf("run.completed = %d when Drain returned, want 1", n)
	}
	if n := h.count("C1", core.KindRunStarted); n != 1 {
		t.Fatalf("run.started = %d, want 1 (the refused message started nothing)", n)
	}
	ended, calls, errs := rm.get()
	if ended[core.RunDone] != 1 || calls != 1 || errs != 0 {
		t.Fatalf("metrics: ended %v, %d model calls, %d errors; want 1 done, 1 call, 0 errors", ended, calls, errs)
	}
}

// TestDrainTimesOutWithARunStillGoing: a run that does not settle within
// the drain's context leaves Drain with the context's error; Close then
// stops it and it resumes (and completes once) at the next Start.
func TestDrainTimesOutWithARunStillGoing(t *testing.T) {
	inCall := make(chan struct{}, 1)
	var mu sync.Mutex
	hang := true
	m := coretest.NewScriptedModel(coretest.Text("finally"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			inCall <- struct{}{}
			<-ctx.Done()
		}
	}
	h := newHarness(t, m, nil)
	h.deliver(h.mention(alice, "C1", "question"))
	<-inCall
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.e.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain = %v, want the deadline", err)
	}
	mu.Lock()
	hang = false
	mu.Unlock()
	h.restart()
	h.idle()
	if n := h.count("C1", core.KindRunCompleted); n != 1 {
		t.Fatalf("run.completed after restart = %d, want 1", n)
	}
}

// TestRunMetricsCountEndsAndModelErrors: a failed model call is reported
// with its error and its run as broken; a run cancelled by its requester is
// reported cancelled, once.
func TestRunMetricsCountEndsAndModelErrors(t *testing.T) {
	inCall := make(chan struct{}, 1)
	m := coretest.NewScriptedModel(func(core.View) (core.Reply, error) {
		return core.Reply{}, &core.ModelError{Failure: core.FailAuth}
	}, coretest.Text("never"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if n == 2 { // the second run's call hangs until the cancel interrupts it
			inCall <- struct{}{}
			<-ctx.Done()
		}
	}
	rm := &runMetrics{}
	h := newHarness(t, m, nil, func(c *engine.Config) { c.Metrics = rm; c.ModelRetries = -1 })
	h.deliver(h.mention(alice, "C1", "question"))
	h.idle()
	ended, calls, errs := rm.get()
	if ended[core.RunBroken] != 1 || calls != 1 || errs != 1 {
		t.Fatalf("metrics: ended %v, %d calls, %d errors; want 1 broken, 1 call, 1 error", ended, calls, errs)
	}
	root := h.mention(alice, "C1", "another")
	h.deliver(root)
	<-inCall
	h.deliver(h.inThread(alice, "C1", root.MessageID, "<@"+botID+"> cancel"))
	h.idle()
	if ended, _, _ := rm.get(); ended[core.RunCancelled] != 1 || ended[core.RunBroken] != 1 {
		t.Fatalf("after cancel: ended %v, want 1 broken and 1 cancelled", ended)
	}
}
